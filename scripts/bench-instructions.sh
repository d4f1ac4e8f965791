#!/usr/bin/env bash
# CPU instructions per operation on the PostgreSQL engine, counted by
# valgrind (callgrind) in a single-user backend: alkstore beside the raw SQL
# floor and, with ALK_BENCH_PEERS=1, pgmq, graphile-worker and PgQ. Not part
# of CI.
#
#   scripts/bench-instructions.sh
#
# ALK_BENCH_PEERS=1 adds the peers; ALK_BENCH_FLOOR=1 adds the floor of an
# enqueue under the contract (scripts/lib/bench-floor.sql): the INSERT into
# a job table with nothing but the stamped columns, a primary key and a
# claim index, sent, in a function, and in a function with alk_enqueue's
# name check, stamping and wake-up; ALK_BENCH_OPS picks operations (default
# "enqueue batch claim1 claim32"; also "pair pairdeps": a job and a second
# one with a neutral option, or after the first (depends_on, contract v1.2
# §J); also "publish publish10": alk_publish 1
# and 10 per transaction, with a "no ticket" column beside them — the same
# with the commit-ticket trigger disabled, contract v1.2 §L). About 2
# minutes, 9 with the peers.
#
# ALK_BENCH_EXTENSION=1 counts the extension (CREATE EXTENSION, the library
# installed by scripts/postgres.sh install) instead of the plain install;
# ALK_BENCH_AFTER_INSTALL=FILE runs FILE right after the install, e.g. the
# plain install's PL/pgSQL stand-in for one of the library's functions
# (ALK_BENCH_AFTER_INSTALL=sql/postgres/ticket_plain.sql: the extension
# with its commit ticket in PL/pgSQL, for a before/after).
#
# Why: on a small shared machine, pgbench figures move by 20-30% between
# identical runs, more than most changes worth making. Instruction counts
# repeat to within a fraction of a percent, so they tell whether a change
# made a path cheaper. They do not count waiting (WAL flushes, locks), so
# they complement scripts/bench-postgres.sh; they do not replace it.
#
# How: a throwaway cluster in a temporary directory gets the plain SQL
# install (and the peers, by scripts/bench-peers.sh). Each operation runs as
# a loop in a procedure that commits after every transaction, as a worker
# would; each loop runs twice, N1 and N2 times, each in a fresh backend
# under callgrind, and the difference of the two counts over N2 - N1 is
# what one operation costs: start-up, fills and plan caching cancel out.
# Statements a peer's client sends run from PL/pgSQL with cached plans, as
# with pgbench -M prepared.
set -euo pipefail
shopt -s inherit_errexit # a failing count stops the script, not just its line
cd "$(dirname "$0")/.."
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
if ! command -v valgrind >/dev/null; then
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null
fi
bin=$(pg_config --bindir)
peers=${ALK_BENCH_PEERS:-0}
floor=${ALK_BENCH_FLOOR:-0}
plain=$(cargo xtask plain-sql)

# PostgreSQL does not run as root: the cluster belongs to postgres then.
as=()
[ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
work=$(mktemp -d)
trap '"${as[@]}" "$bin/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
chmod 755 "$work"
[ "$(id -u)" = 0 ] && chown postgres "$work"
"${as[@]}" "$bin/initdb" -D "$work/data" -A trust -U postgres >/dev/null
"${as[@]}" "$bin/pg_ctl" -D "$work/data" -o "-p 5499 -k $work -c listen_addresses=''" -l "$work/log" -w start >/dev/null
export PGHOST=$work PGPORT=5499 PGUSER=postgres PGDATABASE=bench
psql -X -q -d postgres -c "CREATE DATABASE bench"
if [ "${ALK_BENCH_EXTENSION:-0}" = 1 ]; then
  psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION alkstore"
else
  psql -X -q -v ON_ERROR_STOP=1 -f "$plain" 2>&1 | { grep -v NOTICE || true; }
fi
if [ -n "${ALK_BENCH_AFTER_INSTALL:-}" ]; then
  psql -X -q -v ON_ERROR_STOP=1 -f "$ALK_BENCH_AFTER_INSTALL"
fi
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE TABLE raw_jobs (LIKE alkstore.jobs INCLUDING ALL);
CREATE TABLE raw_published (LIKE alkstore.published INCLUDING ALL);
SQL
[ "$floor" = 1 ] && psql -X -q -v ON_ERROR_STOP=1 -f scripts/lib/bench-floor.sql
if [ "$peers" = 1 ]; then
  scripts/bench-peers.sh postgres bench
  psql -X -q -v ON_ERROR_STOP=1 <<'SQL' >/dev/null
SELECT pgmq.create(q) FROM unnest(ARRAY['enq', 'batch', 'work']) q;
SELECT pgq.create_queue(q) FROM unnest(ARRAY['enq', 'batch', 'events']) q;
SELECT graphile_worker.add_job('work', '{}'::json); -- registers the task
SQL
fi
"${as[@]}" "$bin/pg_ctl" -D "$work/data" -w stop >/dev/null

count() { # sql -> instructions of a single-user backend running it
  local out=$work/cg.out err=$work/err
  printf 'SET synchronous_commit = off;\n\n%s\n\n' "$1" |
    "${as[@]}" valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$bin/postgres" --single -j -D "$work/data" -c fsync=off bench >/dev/null 2>"$err"
  if grep -q 'ERROR:' "$err"; then
    grep -A2 'ERROR:' "$err" >&2
    exit 1
  fi
  grep -o 'Collected : [0-9]*' "$err" | awk '{print $3}'
}

payload='{"user": 42, "email": "user42@example.com", "plan": "pro"}'
. scripts/lib/bench-raw.sh # raw_cols, raw_vals, raw_claim_set, raw_pick
pick=$(raw_pick raw_jobs)
. scripts/lib/bench-graphile.sh # gw_claim: graphile-worker's claim, as bench-postgres.sh sends it

# Every loop starts from empty tables; the claim cases then get the
# pending jobs their loop needs.
reset() { # system
  case $1 in
    alk)  echo "TRUNCATE alkstore.jobs, alkstore.published; ALTER TABLE alkstore.published ENABLE TRIGGER published_ticket;" ;;
    alknt) echo "TRUNCATE alkstore.published; ALTER TABLE alkstore.published DISABLE TRIGGER published_ticket;" ;;
    raw)  echo "TRUNCATE raw_jobs, raw_published;" ;;
    floor*) echo "TRUNCATE floor_jobs;" ;;
    pgmq) echo "TRUNCATE pgmq.q_enq, pgmq.q_batch, pgmq.q_work;" ;;
    gw)   echo "TRUNCATE graphile_worker._private_jobs;" ;;
    pgq)  echo "SELECT 1;" ;; # its event tables rotate; nothing here reads them
  esac
}
fill() { # system jobs
  case $1 in
    alk)  echo "SELECT count(alk_enqueue_batch('work', NULL, (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i))) FROM generate_series(1, $(( $2 / 1000 + 1 )));" ;;
    raw)  echo "INSERT INTO raw_jobs ($raw_cols) SELECT 'work', 'pending', jsonb_build_object('n', i), $raw_vals FROM generate_series(1, $2) i;" ;;
    pgmq) echo "SELECT count(*) FROM pgmq.send_batch('work', ARRAY(SELECT jsonb_build_object('n', i) FROM generate_series(1, $2) i));" ;;
    gw)   echo "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('work', json_build_object('n', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, $2) i));" ;;
  esac
  echo
  echo "VACUUM ANALYZE;"
}

# The body of one iteration: one or two transactions, each ending in COMMIT.
body() { # operation system -> PL/pgSQL, or nothing if the system has no such operation
  case $1:$2 in
    enqueue:alk)  echo "PERFORM alk_enqueue('enq', NULL, p); COMMIT;" ;;
    enqueue:raw)  echo "INSERT INTO raw_jobs ($raw_cols) VALUES ('enq', 'pending', p, $raw_vals); COMMIT;" ;;
    enqueue:floor)  echo "INSERT INTO floor_jobs ($raw_cols) VALUES ('enq', 'pending', p, $raw_vals); COMMIT;" ;;
    enqueue:floorf) echo "PERFORM floor_enqueue('enq', p); COMMIT;" ;;
    enqueue:floors) echo "PERFORM floor_enqueue_stamped('enq', NULL, p); COMMIT;" ;;
    batch:floor)    echo "INSERT INTO floor_jobs ($raw_cols) SELECT 'batch', 'pending', e, $raw_vals FROM jsonb_array_elements(b) e; COMMIT;" ;;
    batch:floorf)   echo "PERFORM floor_enqueue_batch('batch', b); COMMIT;" ;;
    enqueue:pgmq) echo "PERFORM pgmq.send('enq', p); COMMIT;" ;;
    enqueue:gw)   echo "PERFORM graphile_worker.add_job('enq', p::json); COMMIT;" ;;
    enqueue:pgq)  echo "PERFORM pgq.insert_event('enq', 'job', p::text); COMMIT;" ;;
    batch:alk)    echo "PERFORM alk_enqueue_batch('batch', NULL, b); COMMIT;" ;;
    # Two jobs, the second after the first (depends_on), against the same
    # two through the same (general) enqueue path with a neutral option.
    pair:alk)     echo "PERFORM alk_enqueue('enq', jsonb_build_object('priority', 0 * alk_enqueue('enq', NULL, p)), p); COMMIT;" ;;
    pairdeps:alk) echo "PERFORM alk_enqueue('enq', jsonb_build_object('depends_on', jsonb_build_array(alk_enqueue('enq', NULL, p))), p); COMMIT;" ;;
    batch:raw)    echo "INSERT INTO raw_jobs ($raw_cols) SELECT 'batch', 'pending', e, $raw_vals FROM jsonb_array_elements(b) e; COMMIT;" ;;
    batch:pgmq)   echo "PERFORM pgmq.send_batch('batch', ARRAY(SELECT jsonb_array_elements(b))); COMMIT;" ;;
    batch:gw)     echo "PERFORM graphile_worker.add_jobs(ARRAY(SELECT ('batch', e, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM json_array_elements(b::json) e)); COMMIT;" ;;
    batch:pgq)    echo "PERFORM count(pgq.insert_event('batch', 'job', e::text)) FROM jsonb_array_elements(b) e; COMMIT;" ;;
    publish:alk | publish:alknt) echo "PERFORM alk_publish('events', p); COMMIT;" ;;
    publish:raw)  echo "INSERT INTO raw_published (stream, payload, created_at) VALUES ('events', p, clock_timestamp()); COMMIT;" ;;
    publish:pgq)  echo "PERFORM pgq.insert_event('events', 'event', p::text); COMMIT;" ;;
    publish10:alk | publish10:alknt) echo "FOR j IN 1..10 LOOP PERFORM alk_publish('events', p); END LOOP; COMMIT;" ;;
    publish10:raw) echo "FOR j IN 1..10 LOOP INSERT INTO raw_published (stream, payload, created_at) VALUES ('events', p, clock_timestamp()); END LOOP; COMMIT;" ;;
    publish10:pgq) echo "FOR j IN 1..10 LOOP PERFORM pgq.insert_event('events', 'event', p::text); END LOOP; COMMIT;" ;;
    claim1:alk)   echo "SELECT c.id INTO x FROM alk_claim('work', 'w', 1) c; COMMIT;
    PERFORM alk_ack(x, 'w'); COMMIT;" ;;
    claim1deps:alk) body claim1 alk ;;
    claim1:raw)   echo "UPDATE raw_jobs $raw_claim_set WHERE id = ($pick LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id INTO x; COMMIT;
    DELETE FROM raw_jobs WHERE id = x; COMMIT;" ;;
    claim1:pgmq)  echo "SELECT msg_id INTO x FROM pgmq.read('work', 60, 1); COMMIT;
    PERFORM pgmq.delete('work', x); COMMIT;" ;;
    claim1:gw)    echo "$(gw_claim 1 tsk) SELECT max(id) INTO x FROM c; COMMIT;
    DELETE FROM graphile_worker._private_jobs AS jobs WHERE id = x; COMMIT;" ;;
    claim32:alk)  echo "SELECT array_agg(c.id) INTO xs FROM alk_claim('work', 'w', 32) c; COMMIT;
    PERFORM alk_ack_batch(xs, 'w'); COMMIT;" ;;
    claim32:raw)  echo "WITH c AS (UPDATE raw_jobs $raw_claim_set WHERE id IN ($pick LIMIT 32 FOR UPDATE SKIP LOCKED) RETURNING id) SELECT array_agg(id) INTO xs FROM c; COMMIT;
    DELETE FROM raw_jobs WHERE id = ANY (xs); COMMIT;" ;;
    claim32:pgmq) echo "SELECT array_agg(msg_id) INTO xs FROM pgmq.read('work', 60, 32); COMMIT;
    PERFORM pgmq.delete('work', xs); COMMIT;" ;;
    claim32:gw)   echo "$(gw_claim 32 tsk) SELECT array_agg(id) INTO xs FROM c; COMMIT;
    DELETE FROM graphile_worker._private_jobs AS jobs USING unnest(xs) u(jid) WHERE id = u.jid; COMMIT;" ;;
  esac
}

per_op() { # operation system -> instructions per operation, or -
  local op=$1 sys=$2 b n1 n2 pre check=
  b=$(body "$op" "$sys")
  [ -n "$b" ] || { echo -; return; }
  case $op in
    enqueue|claim1|claim1deps|publish|pair|pairdeps) n1=100; n2=600 ;;
    batch|claim32|publish10) n1=10;  n2=60 ;;
  esac
  pre=$(reset "$sys")
  case $op in
    claim1)  pre+=$'\n\n'$(fill "$sys" "$n2"); check="IF x IS NULL THEN RAISE 'nothing claimed'; END IF;" ;;
    # Every job claimed has a dependent (at a lower priority) that its ack releases.
    claim1deps) pre+=$'\n\n'"SELECT count(alk_enqueue('work', jsonb_build_object('priority', -1, 'depends_on', jsonb_build_array(alk_enqueue('work', NULL, '1'))), '2')) FROM generate_series(1, $n2);"$'\n\n'"VACUUM ANALYZE;"
                check="IF x IS NULL THEN RAISE 'nothing claimed'; END IF;" ;;
    claim32) pre+=$'\n\n'$(fill "$sys" $(( n2 * 32 ))); check="IF cardinality(xs) IS DISTINCT FROM 32 THEN RAISE 'claimed %', xs; END IF;" ;;
  esac
  local loop="CREATE OR REPLACE PROCEDURE public.bench_loop(n int) LANGUAGE plpgsql AS \$body\$
DECLARE
  p   jsonb := '$payload';
  b   jsonb := (SELECT jsonb_agg(jsonb_build_object('user', i, 'email', 'user' || i || '@example.com')) FROM generate_series(1, 100) i);
  x   bigint;
  xs  bigint[];
  tsk int := (SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'work');
BEGIN
  FOR i IN 1..n LOOP
    $b
    $check
  END LOOP;
END \$body\$;"
  [ "$peers" = 1 ] || loop=${loop/"(SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'work')"/NULL}
  local c1 c2
  c1=$(count "$pre

$loop

CALL bench_loop($n1);")
  c2=$(count "$pre

$loop

CALL bench_loop($n2);")
  echo $(( (c2 - c1) / (n2 - n1) ))
}

systems=(alk raw)
case " ${ALK_BENCH_OPS:-} " in *" publish"*) systems=(alk alknt raw) ;; esac
[ "$peers" = 1 ] && systems+=(pgmq gw pgq)
[ "$floor" = 1 ] && systems+=(floor floorf floors)
declare -A head=([alk]=alkstore [alknt]="no ticket" [raw]=raw [pgmq]=pgmq [gw]=graphile [pgq]=pgq
                 [floor]=floor [floorf]="floor fn" [floors]="fn+stamp")
printf '%-32s' "operation (instructions/op)"
for s in "${systems[@]}"; do printf ' %10s' "${head[$s]}"; done
printf '   %7s' alk/raw
[ "$peers" = 1 ] && printf '  %8s' alk/peer
echo
for op in ${ALK_BENCH_OPS:-enqueue batch claim1 claim32}; do
  case $op in
    enqueue) label="enqueue 1/tx" ;;
    batch)   label="enqueue 100/tx (batch)" ;;
    claim1)  label="claim 1 + ack (2 tx)" ;;
    claim32) label="claim 32 + ack (2 tx)" ;;
    publish) label="publish 1/tx" ;;
    publish10) label="publish 10/tx" ;;
    pair)      label="2 jobs/tx, general path" ;;
    pairdeps)  label="2 jobs/tx, 2nd depends_on 1st" ;;
    claim1deps) label="claim 1 + ack releasing 1 (2 tx)" ;;
  esac
  declare -A v=()
  printf '%-32s' "$label"
  for s in "${systems[@]}"; do v[$s]=$(per_op $op "$s"); printf ' %10s' "${v[$s]}"; done
  if [ "${v[raw]}" = - ]; then printf '   %7s' -; else printf '   %6.2fx' "$(echo "${v[alk]} / ${v[raw]}" | bc -l)"; fi
  if [ "$peers" = 1 ]; then
    best=$(for s in pgmq gw pgq; do [ "${v[$s]}" = - ] || echo "${v[$s]}"; done | sort -n | head -1)
    printf '  %7.2fx' "$(echo "${v[alk]} / $best" | bc -l)"
  fi
  echo
done
