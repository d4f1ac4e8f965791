#!/usr/bin/env bash
# pgbench-driven benchmark of the PostgreSQL engine beside the raw SQL floor.
#
#   scripts/bench-postgres.sh [seconds-per-case]    (default 5)
#
# Needs the cluster running with the extension installed
# (scripts/postgres.sh start && scripts/postgres.sh install). Each case runs
# with 1 and 8 clients (-M prepared), through alkstore and as the plain SQL
# an application could write by hand on tables of the same shape (copies of
# alkstore's tables with their indexes), and prints ops/s and the ratio.
#
# ALK_BENCH_PEERS=1 adds the peers (installed by scripts/bench-peers.sh)
# doing the same operations in the same run, like for like: the job queues
# pgmq and graphile-worker on enqueues and claims, PgQ's insert_event (an
# append to an event log) on publish; and the ratio of the best of them to
# alkstore (at or below 1.00: alkstore is ahead). With the peers the table
# also has a "plain" column: the same alkstore calls on the plain SQL install
# (cargo xtask plain-sql) in a second database, and alk/plain, the
# extension's ops/s over the plain install's (the plain install is to stay
# within 1.25x); ALK_BENCH_PLAIN_COLUMN=0 leaves it out.
# ALK_BENCH_ROUNDS (default 2) is how many times each system runs each of
# those cells, the order reversed each round; the median is shown (single
# runs on a small shared machine move by 20-30%). ALK_BENCH_MAIN_ONLY=1
# stops after that first table. ALK_BENCH_FILL (default 60) is the
# thousands of pending jobs per second of a cell each system gets for the
# claim cases; faster settings need more. pgbench's connections
# take PGOPTIONS: PGOPTIONS='-c synchronous_commit=off' measures the CPU each
# system spends, without the WAL flush every commit otherwise waits for.
# ALK_BENCH_FLOOR=1 (with ALK_BENCH_PEERS=1) adds a table of enqueues into
# the thinnest job table the contract leaves (scripts/lib/bench-floor.sql)
# beside alkstore's and the best peer's.
# ALK_BENCH_CPU=1 (with ALK_BENCH_PEERS=1) also prints the server's CPU time
# per operation in those cells: every process of the cluster (the backends,
# also after they exit, and the WAL writer, autovacuum...), read from /proc
# before and after each run, so the cluster must run on this machine.
# Ops/s count waiting too (WAL flushes, other processes on the same cores);
# this counts what each system costs the server's CPUs (it moves between
# runs too: docs/benchmarks.md).
# ALK_BENCH_WAITS=1 (with ALK_BENCH_PEERS=1) samples pg_stat_activity every
# 10 ms during each 8-client cell and prints, per system, where its
# backends were: on CPU (no wait event), waiting for pgbench (Client:
# ClientRead, between statements), or on a lock, a WAL flush, I/O. Summed
# over every round; what contention costs shows as the share of LWLock,
# Lock and IO/WAL samples.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${ALK_BENCH_ROUNDS:-2}
cpu=${ALK_BENCH_CPU:-0}
waits=${ALK_BENCH_WAITS:-0}
db=alkstore_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A streaming standby (the test setup makes one) wakes a WAL sender on every
# commit: on a small machine that alone costs about a third of the commits
# per second, on every side, and skews the ratios.
replicas=$(psql -X -q -At -d postgres -c "SELECT count(*) FROM pg_stat_replication")
if [ "$replicas" != 0 ] && [ "${ALK_BENCH_ALLOW_REPLICA:-0}" != 1 ]; then
  echo "bench-postgres.sh: $replicas standby(s) stream from this cluster; stop them first" \
       "(scripts/postgres.sh standby-stop), or set ALK_BENCH_ALLOW_REPLICA=1" >&2
  exit 1
fi

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
if [ "${ALK_BENCH_PLAIN:-0}" = 1 ]; then  # the plain SQL install: same functions, no rebuild needed
  psql -X -q -v ON_ERROR_STOP=1 -d $db -f "$(cargo xtask plain-sql)"
else
  psql -X -q -v ON_ERROR_STOP=1 -d $db -c "CREATE EXTENSION alkstore"
fi
peers=${ALK_BENCH_PEERS:-0}
# The plain install beside the extension, in a database of its own (the two
# cannot share one: the same functions in the same schema).
plain_col=$([ "$peers" = 1 ] && [ "${ALK_BENCH_PLAIN:-0}" != 1 ] && echo "${ALK_BENCH_PLAIN_COLUMN:-1}" || echo 0)
plain_db=${db}_plain
if [ "$plain_col" = 1 ]; then
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $plain_db" -c "CREATE DATABASE $plain_db"
  psql -X -q -v ON_ERROR_STOP=1 -d $plain_db -f "$(cargo xtask plain-sql)" >/dev/null
  trap 'rm -rf "$work"; psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $plain_db" 2>/dev/null' EXIT
fi
psql -X -q -v ON_ERROR_STOP=1 -d $db <<'SQL'
CREATE TABLE raw_jobs (LIKE alkstore.jobs INCLUDING ALL);
CREATE TABLE raw_events (LIKE alkstore.events INCLUDING ALL);
ALTER TABLE raw_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY;
CREATE SEQUENCE raw_offsets;
SQL
if [ "$peers" = 1 ]; then
  scripts/bench-peers.sh postgres $db
  psql -X -q -v ON_ERROR_STOP=1 -d $db <<'SQL' >/dev/null
SELECT pgmq.create(q) FROM unnest(ARRAY['enq', 'batch', 'work']) q;
SELECT pgq.create_queue('events');
SQL
fi
floor=${ALK_BENCH_FLOOR:-0}
[ "$floor" = 1 ] && psql -X -q -v ON_ERROR_STOP=1 -d $db -f scripts/lib/bench-floor.sql

payload='{"user": 42, "email": "user42@example.com", "plan": "pro"}'
batch="[$(for i in $(seq 1 100); do printf '%s{"user": %d, "email": "user%d@example.com"}' "$([ "$i" = 1 ] || echo ,)" "$i" "$i"; done)]"
. scripts/lib/bench-raw.sh # raw_cols, raw_vals, raw_claim_set, raw_pick
pick=$(raw_pick raw_jobs)

script() { printf '%s\n' "$2" > "$work/$1.sql"; }
script enqueue_alk   "SELECT alk_enqueue('enq', NULL, '$payload');"
script enqueue_raw   "INSERT INTO raw_jobs ($raw_cols) VALUES ('enq', 'pending', '$payload', $raw_vals);"
script batch_alk     "SELECT alk_enqueue_batch('batch', NULL, '$batch');"
script batch_raw     "INSERT INTO raw_jobs ($raw_cols) SELECT 'batch', 'pending', p, $raw_vals FROM jsonb_array_elements('$batch') AS p;"
script claim1_alk    "SELECT alk_ack(c.id, 'w') FROM alk_claim('work', 'w', 1) c;"
script claim1_raw    "DELETE FROM raw_jobs WHERE id = ($pick LIMIT 1 FOR UPDATE SKIP LOCKED);"
# Like for like: a claim that survives a crash is a write, and so is the ack.
script claim1_raw2   "WITH c AS (UPDATE raw_jobs $raw_claim_set WHERE id = ($pick LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id) SELECT 1;
DELETE FROM raw_jobs WHERE id = (SELECT id FROM raw_jobs WHERE queue = 'work' AND state = 'running' AND claimed_by = 'w' LIMIT 1);"
script claim32_alk   "SELECT alk_ack_batch(array_agg(c.id), 'w') FROM alk_claim('work', 'w', 32) c;"
script claim32_raw   "DELETE FROM raw_jobs WHERE id IN ($pick LIMIT 32 FOR UPDATE SKIP LOCKED);"
script publish_alk   "SELECT alk_publish('events', '$payload');"
script publish_raw   "INSERT INTO raw_events (stream, \"offset\", payload, created_at) VALUES ('events', nextval('raw_offsets'), '$payload', clock_timestamp());"
script publishN_alk  "SELECT alk_publish('events-' || :client_id, '$payload');"
script read_alk      "\\set after random(0, 100000 - 1000)
SELECT * FROM alk_read('reads', :after, 1000);"
script read_raw      "\\set after random(0, 100000 - 1000)
SELECT stream, \"offset\", key, payload, created_at FROM raw_events WHERE stream = 'reads' AND \"offset\" > :after ORDER BY \"offset\" LIMIT 1000;"

# A worker's real shape: the claim commits, the handler runs, the ack
# commits -- two transactions per job (or per batch), for every system.
script claim1_alk2   "SELECT coalesce(max(id), 0) AS id FROM alk_claim('work', 'w', 1) \gset
SELECT alk_ack(:id, 'w');"
script claim32_alk2  "SELECT array_agg(id) AS ids FROM alk_claim('work', 'w', 32) \gset
SELECT alk_ack_batch(:ids::bigint[], 'w');"
script claim32_raw2  "WITH c AS (UPDATE raw_jobs $raw_claim_set WHERE id IN ($pick LIMIT 32 FOR UPDATE SKIP LOCKED) RETURNING id) SELECT array_agg(id) AS ids FROM c \gset
DELETE FROM raw_jobs WHERE id = ANY(:ids::bigint[]);"
if [ "$peers" = 1 ]; then
  # Each peer's own calls: pgmq's functions; PgQ's insert_event; for
  # graphile-worker the statements its worker sends (dist/sql/getJobs.js with
  # its default named-queue strategy, and completeJobs.js), since its claim
  # and completion are not SQL functions.
  script enqueue_pgmq  "SELECT pgmq.send('enq', '$payload');"
  script enqueue_gw    "SELECT (graphile_worker.add_job('enq', '$payload')).id;"
  script publish_pgq   "SELECT pgq.insert_event('events', 'event', '$payload');"
  script batch_pgmq    "SELECT count(*) FROM pgmq.send_batch('batch', ARRAY(SELECT jsonb_array_elements('$batch')));"
  script batch_gw      "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('batch', p, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM json_array_elements('$batch') p));"
  script claim1_pgmq   "SELECT coalesce(max(msg_id), 0) AS id FROM pgmq.read('work', 60, 1) \gset
SELECT pgmq.delete('work', :id::bigint);"
  script claim32_pgmq  "SELECT array_agg(msg_id) AS ids FROM pgmq.read('work', 60, 32) \gset
SELECT count(*) FROM pgmq.delete('work', :ids::bigint[]);"
fi
if [ "$floor" = 1 ]; then
  script enqueue_floor  "INSERT INTO floor_jobs ($raw_cols) VALUES ('enq', 'pending', '$payload', $raw_vals);"
  script enqueue_floorf "SELECT floor_enqueue('enq', '$payload');"
  script enqueue_floors "SELECT floor_enqueue_stamped('enq', NULL, '$payload');"
  script batch_floor    "INSERT INTO floor_jobs ($raw_cols) SELECT 'batch', 'pending', p, $raw_vals FROM jsonb_array_elements('$batch') AS p;"
  script batch_floorf   "SELECT floor_enqueue_batch('batch', '$batch');"
fi
. scripts/lib/bench-graphile.sh # gw_claim

fill_work() { # enough pending jobs on every side for the claim cases
  psql -X -q -d $db <<SQL
SELECT count(alk_enqueue_batch('work', NULL, (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i)))
  FROM generate_series(1, $1);
INSERT INTO raw_jobs ($raw_cols)
  SELECT 'work', 'pending', jsonb_build_object('n', i), $raw_vals
  FROM generate_series(1, $1 * 1000) i;
VACUUM ANALYZE alkstore.jobs; VACUUM ANALYZE raw_jobs;
CHECKPOINT; -- the fill wrote a lot of WAL: checkpoint now, not during the first cells
SQL
  [ "$plain_col" = 1 ] && psql -X -q -d $plain_db <<SQL
SELECT count(alk_enqueue_batch('work', NULL, (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i)))
  FROM generate_series(1, $1);
VACUUM ANALYZE alkstore.jobs;
CHECKPOINT;
SQL
  [ "$peers" = 1 ] || return 0
  psql -X -q -d $db <<SQL
SELECT count(*) FROM pgmq.send_batch('work', ARRAY(SELECT jsonb_build_object('n', i) FROM generate_series(1, $1 * 1000) i));
SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('work', json_build_object('n', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, $1 * 1000) i));
VACUUM ANALYZE pgmq.q_work; VACUUM ANALYZE graphile_worker._private_jobs;
CHECKPOINT;
SQL
  local task
  task=$(psql -X -q -At -d $db -c "SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'work'")
  script claim1_gw  "$(gw_claim 1 "$task") SELECT coalesce(max(id), 0) AS id FROM c \gset
DELETE FROM graphile_worker._private_jobs AS jobs WHERE id = :id::bigint;"
  script claim32_gw "$(gw_claim 32 "$task") SELECT array_agg(id) AS ids FROM c \gset
DELETE FROM graphile_worker._private_jobs AS jobs USING unnest(:ids::bigint[]) n(n) WHERE id = n;"
}

sample_waits() { # seconds script: where pgbench's backends are, every 10 ms, added to $work/waits_<script>
  psql -X -q -At -F ' ' -d $db >> "$work/waits_$2" <<SQL
CREATE TEMP TABLE samples (w text);
DO \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  WHILE clock_timestamp() < t0 + interval '$1 s' LOOP
    PERFORM pg_stat_clear_snapshot(); -- else one snapshot for the whole block
    INSERT INTO samples SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU')
      FROM pg_stat_activity WHERE application_name = 'pgbench' AND backend_type = 'client backend';
    PERFORM pg_sleep(0.01);
  END LOOP;
END \$\$;
SELECT w, count(*) FROM samples GROUP BY w;
SQL
}

tps() { # script clients -> transactions per second (and, with ALK_BENCH_CPU=1, $work/cpu: server CPU µs per transaction)
  # plain:SCRIPT runs SCRIPT on the plain install's database.
  case $1 in plain:*) db=$plain_db tps "${1#plain:}" "$2" _plain; return ;; esac
  if [ "$waits" = 1 ] && [ "$2" = 8 ]; then
    sample_waits "$((secs - 1))" "$1${3:-}" &
    local sampler=$!
    waits=0 tps "$@"
    wait "$sampler"
    return
  fi
  [ "$cpu" = 1 ] || {
    { pgbench -n -M prepared -T "$secs" -c "$2" -j "$2" -f "$work/$1.sql" $db 2>"$work/err" || cat "$work/err" >&2; } |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p'
    return
  }
  local c0 c1
  sleep 0.3 # the exit of the backends before (a fill, say) counted before the cell, not in it
  c0=$(cpu_ticks)
  pgbench -n -M prepared -T "$secs" -c "$2" -j "$2" -f "$work/$1.sql" $db >"$work/out" 2>"$work/err" || cat "$work/err" >&2
  sleep 0.3 # the backends' exit: their time moves to the postmaster's children's
  c1=$(cpu_ticks)
  awk -v d=$((c1 - c0)) -v hz="$hz" '/^number of transactions actually processed/ { print (d / hz * 1e6) / ($NF > 0 ? $NF : 1) }' \
    "$work/out" > "$work/cpu"
  sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/out"
}

if [ "$cpu" = 1 ]; then
  # The postmaster: the checkpointer's parent. Ticks of every process of the
  # cluster so far: the postmaster's own and its exited children's (fields
  # 14-17 of /proc/PID/stat), and each live child's.
  pm=$(ps -o ppid= -p "$(psql -X -q -At -d $db -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")" | tr -d ' ')
  hz=$(getconf CLK_TCK)
  cpu_ticks() {
    cat "/proc/$pm/stat" $(ps --ppid "$pm" -o pid= | sed 's|.*|/proc/&/stat|') 2>/dev/null |
      awk '{ sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15 } END { print t }'
  }
  : > "$work/cpu_table"
fi

row() { # label alk-script raw-script clients ops-per-tx
  local a r
  a=$(tps "$2" "$4"); r=$(tps "$3" "$4")
  awk -v l="$1" -v c="$4" -v a="$a" -v r="$r" -v k="$5" \
    'BEGIN { printf "%-34s %2d  %12.0f  %12.0f   %5.2fx\n", l, c, a * k, r * k, (r > 0 && a > 0) ? r / a : 0 }'
}

medians() { # lines of numbers -> the median of each line, on one line (of two: the mean)
  awk '{ n = split($0, v, " "); for (x = 1; x <= n; x++) for (y = x + 1; y <= n; y++) if (v[y] < v[x]) { t = v[x]; v[x] = v[y]; v[y] = t }
         printf "%s ", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 } END { print "" }'
}

prow() { # label alk-script raw-script clients ops-per-tx [pgmq graphile pgq scripts, - for none]
  [ "$peers" = 1 ] || { row "$@"; return; }
  # $rounds runs of every system, the order reversed each round, so that
  # neither the first-run penalty nor the order favours one; the median of
  # each system's runs (of two: the mean). Systems: alkstore, the plain
  # install (or -), raw, pgmq, graphile-worker, PgQ.
  local a p r m g q ca cp cr cm cg cq s i k runs=() cpus=()
  local sys=("$2" "$([ "$plain_col" = 1 ] && echo "plain:$2" || echo -)" "$3" "${6:--}" "${7:--}" "${8:--}")
  for ((k = 0; k < rounds; k++)); do
    for ((s = 0; s < ${#sys[@]}; s++)); do
      i=$((k % 2 ? ${#sys[@]} - 1 - s : s))
      echo 0 > "$work/cpu"
      runs[i]+="$([ "${sys[i]}" = - ] && echo 0 || tps "${sys[i]}" "$4") "
      cpus[i]+="$(cat "$work/cpu") "
    done
  done
  read -r a p r m g q < <(for i in "${!sys[@]}"; do echo "${runs[i]}"; done | medians)
  if [ "$cpu" = 1 ]; then
    read -r ca cp cr cm cg cq < <(for i in "${!sys[@]}"; do echo "${cpus[i]}"; done | medians)
    awk -v l="$1" -v c="$4" -v k="$5" -v a="$ca" -v p="$cp" -v r="$cr" -v m="$cm" -v g="$cg" -v q="$cq" 'BEGIN {
      best = 0; if (m > 0) best = m; if (g > 0 && (best == 0 || g < best)) best = g; if (q > 0 && (best == 0 || q < best)) best = q
      printf "%-34s %2d  %10.1f  %10s  %10.1f  %10s  %10s  %10s   %5.2fx  %5.2fx\n", l, c, a / k,
        (p > 0) ? sprintf("%.1f", p / k) : "-", r / k,
        (m > 0) ? sprintf("%.1f", m / k) : "-", (g > 0) ? sprintf("%.1f", g / k) : "-", (q > 0) ? sprintf("%.1f", q / k) : "-",
        (r > 0) ? a / r : 0, (best > 0) ? a / best : 0 }' >> "$work/cpu_table"
  fi
  awk -v l="$1" -v c="$4" -v a="$a" -v p="$p" -v r="$r" -v k="$5" -v m="$m" -v g="$g" -v q="$q" 'BEGIN {
    best = m; if (g > best) best = g; if (q > best) best = q
    printf "%-34s %2d  %10.0f  %10s  %10.0f  %10s  %10s  %10s   %6.2fx  %9s  %6.2fx\n", l, c, a * k,
      p ? sprintf("%.0f", p * k) : "-", r * k,
      m ? sprintf("%.0f", m * k) : "-", g ? sprintf("%.0f", g * k) : "-", q ? sprintf("%.0f", q * k) : "-",
      (r > 0 && a > 0) ? r / a : 0, (p > 0 && a > 0) ? sprintf("%.2fx", a / p) : "-", (best > 0 && a > 0) ? best / a : 0 }'
}

psql -X -q -d $db -c "SELECT count(alk_publish('reads', jsonb_build_object('n', i))) FROM generate_series(1, 100000) i" \
  -c "INSERT INTO raw_events (stream, \"offset\", payload, created_at) SELECT 'reads', i, jsonb_build_object('n', i), clock_timestamp() FROM generate_series(1, 100000) i" \
  -c "CALL alk_sequence(NULL)" \
  -c "ANALYZE alkstore.events; ANALYZE raw_events" >/dev/null
if [ "$peers" = 1 ]; then
  printf '%-34s %2s  %10s  %10s  %10s  %10s  %10s  %10s   %7s  %9s  %7s\n' "operation (ops/s)" "c" "alkstore" "plain" "raw" "pgmq" "graphile" "pgq" "raw/alk" "alk/plain" "peer/alk"
else
  printf '%-34s %2s  %12s  %12s   %6s\n' "operation (ops/s)" "c" "alkstore" "raw" "ratio"
fi
for c in 1 8; do
  fill_work $((${ALK_BENCH_FILL:-60} * secs * (c == 1 ? 1 : 2) * (rounds + 1) / 2)) >/dev/null
  prow "enqueue 1/tx" enqueue_alk enqueue_raw $c 1 enqueue_pgmq enqueue_gw -
  prow "enqueue 100/tx (batch)" batch_alk batch_raw $c 100 batch_pgmq batch_gw -
  prow "claim+ack 1 (claim tx, ack tx)" claim1_alk2 claim1_raw2 $c 1 claim1_pgmq claim1_gw -
  prow "claim 32 + ack (claim tx, ack tx)" claim32_alk2 claim32_raw2 $c 32 claim32_pgmq claim32_gw -
  # A stream publish beside PgQ's insert_event, the same job (an append to an
  # event log); alkstore's also takes the commit ticket (contract v1.2 §L).
  if [ "$peers" = 1 ]; then
    prow "publish 1/tx, one stream" publish_alk publish_raw $c 1 - - publish_pgq
  fi
  row "claim+ack 1, one tx; raw DELETE" claim1_alk claim1_raw $c 1
  row "claim 32 + ack_batch, one tx" claim32_alk claim32_raw $c 32
  [ "$peers" = 1 ] || row "publish 1/tx, one stream" publish_alk publish_raw $c 1
  row "read page of 1000 (events/s)" read_alk read_raw $c 1000
done
row "publish 1/tx, a stream per client" publishN_alk publish_raw 8 1
if [ "$cpu" = 1 ] && [ "$peers" = 1 ]; then
  echo
  echo "server CPU per operation (µs, all of the cluster's processes; the median of each system's runs above):"
  printf '%-34s %2s  %10s  %10s  %10s  %10s  %10s  %10s   %6s  %6s\n' "operation (CPU µs/op)" "c" "alkstore" "plain" "raw" "pgmq" "graphile" "pgq" "alk/raw" "alk/peer"
  cat "$work/cpu_table"
fi
if [ "$waits" = 1 ] && [ "$peers" = 1 ]; then
  echo
  echo "where the backends were, 8 clients (% of pg_stat_activity samples every 10 ms, all rounds; CPU: no wait event):"
  for f in "$work"/waits_*; do
    [ -s "$f" ] || continue
    awk -v s="${f##*/waits_}" '{ n[$1] += $2; t += $2 }
      END { printf "  %-14s", s; m = 0
            for (k in n) { v[++m] = k }
            for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (n[v[y]] > n[v[x]]) { z = v[x]; v[x] = v[y]; v[y] = z }
            for (x = 1; x <= m && x <= 6; x++) printf "  %s %.0f%%", v[x], 100 * n[v[x]] / t; print "" }' "$f"
  done
fi
if [ "$floor" = 1 ] && [ "$peers" = 1 ]; then
  frow() { # label clients ops-per-tx script... (- for none): medians of $rounds runs, the order reversed each round
    local label=$1 c=$2 k=$3 sys runs=() r s i
    shift 3; sys=("$@")
    for ((r = 0; r < rounds; r++)); do
      for ((s = 0; s < ${#sys[@]}; s++)); do
        i=$((r % 2 ? ${#sys[@]} - 1 - s : s))
        runs[i]+="$([ "${sys[i]}" = - ] && echo 0 || tps "${sys[i]}" "$c") "
      done
    done
    printf '%-34s %2d' "$label" "$c"
    for i in "${!sys[@]}"; do echo "${runs[i]}"; done | medians |
      awk -v k="$k" '{ for (i = 1; i <= NF; i++) printf "  %10s", ($i > 0 ? sprintf("%.0f", $i * k) : "-"); print "" }'
  }
  echo
  echo "the floor under the contract (scripts/lib/bench-floor.sql; peer: pgmq):"
  printf '%-34s %2s  %10s  %10s  %10s  %10s  %10s\n' "operation (ops/s)" "c" "alkstore" "fn+stamp" "floor fn" "floor" "peer"
  for c in 1 8; do
    frow "enqueue 1/tx" $c 1 enqueue_alk enqueue_floors enqueue_floorf enqueue_floor enqueue_pgmq
    frow "enqueue 100/tx (batch)" $c 100 batch_alk - batch_floorf batch_floor batch_pgmq
  done
fi
[ "${ALK_BENCH_MAIN_ONLY:-0}" = 1 ] && { psql -X -q -d postgres -c "DROP DATABASE $db"; exit 0; }

# Job features (contract v1.1 §C) against the same operation without them.
# A backlog of 100,000 pending jobs, interleaved over 10,000 groups as a busy
# service enqueues them, against 100,000 ungrouped jobs; acks that keep the
# job as completed against acks that delete it.
script gclaim1     "SELECT alk_ack(c.id, 'w') FROM alk_claim('grouped', 'w', 1) c;"
script pclaim1     "SELECT alk_ack(c.id, 'w') FROM alk_claim('plain', 'w', 1) c;"
script gclaim32    "SELECT alk_ack_batch(coalesce(array_agg(c.id), '{}'), 'w') FROM alk_claim('grouped', 'w', 32) c;"
script pclaim32    "SELECT alk_ack_batch(coalesce(array_agg(c.id), '{}'), 'w') FROM alk_claim('plain', 'w', 32) c;"
script kclaim1     "SELECT alk_ack(c.id, 'w') FROM alk_claim('kept', 'w', 1) c;"
script gclaimonly  "SELECT count(*) FROM alk_claim('grouped', 'w', 32);"
script pclaimonly  "SELECT count(*) FROM alk_claim('plain', 'w', 32);"
tps_n() { # script clients transactions-per-client -> transactions per second
  { pgbench -n -M prepared -t "$3" -c "$2" -j "$2" -f "$work/$1.sql" $db 2>"$work/err" || cat "$work/err" >&2; } |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
fill_features() {
  psql -X -q -d $db <<'SQL'
TRUNCATE alkstore.jobs, alkstore.groups;
SELECT alk_queue_configure('kept', '{"retain_completed_s": 3600}') IS NOT NULL;
SELECT count(alk_enqueue('grouped', jsonb_build_object('group_key', 'g' || (i % 10000)), jsonb_build_object('n', i)))
  FROM generate_series(0, 99999) i;
SELECT count(alk_enqueue_batch(q, NULL, (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i)))
  FROM unnest(ARRAY['plain', 'kept']) q, generate_series(1, 100);
VACUUM ANALYZE alkstore.jobs; VACUUM ANALYZE alkstore.groups;
SQL
}
echo
echo "job features, against the same operation without them (100,000 pending jobs; 10,000 groups):"
printf '%-34s %2s  %12s  %12s   %6s\n' "operation (ops/s)" "c" "with" "without" "ratio"
for c in 1 8; do
  fill_features >/dev/null
  row "grouped claim+ack 1" gclaim1 pclaim1 $c 1
  row "grouped claim 32 + ack_batch" gclaim32 pclaim32 $c 32
  row "claim+ack 1 keeping completed" kclaim1 pclaim1 $c 1
  # Claims alone, no acks: 300 claims of 32 in all, 9,600 of the 10,000 heads.
  fill_features >/dev/null
  g=$(tps_n gclaimonly $c $((300 / c))); p=$(tps_n pclaimonly $c $((300 / c)))
  awk -v c="$c" -v a="$g" -v r="$p" \
    'BEGIN { printf "%-34s %2d  %12.0f  %12.0f   %5.2fx\n", "grouped claim 32, claims alone", c, a * 32, r * 32, r / a }'
done

# Operating it (contract v1.1 §D): pages of 100 job documents at random
# points of a queue of 1,000,000 jobs (half pending, half dead), and the
# listing of every queue.
echo
echo "admin listings, a queue of 1,000,000 jobs (pages of 100, 1 client):"
psql -X -q -d $db <<'SQL' >/dev/null
TRUNCATE alkstore.jobs, alkstore.groups;
INSERT INTO alkstore.jobs (queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms,
  backoff_base_ms, backoff_max_ms, run_at, created_at, last_error)
  SELECT 'big', CASE WHEN i % 2 = 0 THEN 'dead' ELSE 'pending' END, jsonb_build_object('n', i), 0, 0, 5, 60000,
         5000, 3600000, clock_timestamp(), clock_timestamp(), CASE WHEN i % 2 = 0 THEN 'boom' END
  FROM generate_series(1, 1000000) i;
VACUUM ANALYZE alkstore.jobs;
SQL
maxid=$(psql -X -q -At -d $db -c "SELECT max(id) FROM alkstore.jobs")
script page_dead  "\\set after random(0, $maxid - 1000)
SELECT count(*) FROM alk_list_jobs('big', 'dead', :after, 100);"
script page_any   "\\set after random(0, $maxid - 1000)
SELECT count(*) FROM alk_list_jobs('big', NULL, :after, 100);"
script page_first "SELECT count(*) FROM alk_list_jobs('big', 'dead', 0, 100);"
script queues     "SELECT count(*) FROM alk_queues();"
for case in page_first page_dead page_any queues; do
  printf '  %-32s %10.0f calls/s\n' "$case" "$(tps $case 1)"
done

[ "${ALK_BENCH_SKIP_HISTORY:-0}" = 1 ] && { psql -X -q -d postgres -c "DROP DATABASE $db"; exit 0; }

# Claims must not slow down as finished jobs pile up.
echo
echo "claim+ack 1 at a time, 8 clients, with history of the same queue:"
psql -X -q -d $db -c "TRUNCATE alkstore.jobs, raw_jobs" >/dev/null
fill_work 200 >/dev/null
printf '  %-32s %12.0f ops/s\n' "no history" "$(tps claim1_alk 8)"
psql -X -q -d $db <<'SQL' >/dev/null
INSERT INTO alkstore.jobs (queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms,
  backoff_base_ms, backoff_max_ms, run_at, created_at, last_error)
  SELECT 'work', 'dead', '{}', 0, 5, 5, 60000, 5000, 3600000, clock_timestamp(), clock_timestamp(), 'x'
  FROM generate_series(1, 1000000);
WITH acked AS (
  INSERT INTO alkstore.jobs (queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms,
    backoff_base_ms, backoff_max_ms, run_at, created_at)
  SELECT 'work', 'running', '{}', 0, 1, 5, 60000, 5000, 3600000, clock_timestamp(), clock_timestamp()
  FROM generate_series(1, 1000000) RETURNING id)
SELECT count(*) FROM acked;
DELETE FROM alkstore.jobs WHERE state = 'running';
VACUUM ANALYZE alkstore.jobs;
SQL
printf '  %-32s %12.0f ops/s\n' "1,000,000 dead + 1,000,000 acked" "$(tps claim1_alk 8)"
psql -X -q -d postgres -c "DROP DATABASE $db"
