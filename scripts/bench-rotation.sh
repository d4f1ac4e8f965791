#!/usr/bin/env bash
# What a rotating job store would cost and save (issue 35 item 1, the
# reshape), measured before building it. Three layouts of the job table
# (scripts/lib/bench-rotation.sql): as it is (`one`); LIST-partitioned by a
# slot that rotates, drained partitions truncated (`rot`); and that with
# only the claim's indexes on the rotating partitions and a cold one for
# the rest (`hot`). All driven by the same plain statements: alkstore's
# claim probe, claim and ack, without the functions around them.
#
#   scripts/bench-rotation.sh [seconds]     (about 13 minutes with 10)
#
# Prints (1) ops/s of enqueue 1/tx and claim+ack 1 at 1 and 8 clients on a
# backlog, medians of $ALK_BENCH_ROUNDS (3) runs in alternating order;
# (2) the tight loop of docs/benchmarks.md's "Under MVCC pressure" (2
# clients, each transaction enqueues 38 jobs, claims 38 and acks them) with
# one XID held from the start: transactions/s in four windows of 15 s, and
# the walk a claim makes at the end; (3) the same loop beside a REPEATABLE
# READ reader of the table. `rot` and `hot` are rotated every second by a
# loop beside the clients (the rotation a background worker would make).
#
# ALK_ROTATION_PRESSURE=1 adds (4): facade/benches/pressure.rs's idle_in_tx
# scenario (1,200 jobs/s offered, an XID held 120 s) through alkstore's own
# functions, on the extension's table and on that table swapped for `rot`
# (scripts/lib/bench-rotation-alkstore.sql), rotated every second (9 more
# minutes). Stop scripts/postgres.sh's standby first.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${ALK_BENCH_ROUNDS:-3}
db=alkstore_bench_rotation
. scripts/lib/bench-common.sh
psql -X -q -d postgres -c "SET client_min_messages = warning" \
  -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
psql -X -q -v ON_ERROR_STOP=1 -d $db -f scripts/lib/bench-rotation.sql
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

cols="queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms,
  backoff_base_ms, backoff_max_ms, run_at, created_at"
vals="'work', 'pending', '{\"n\": 1}', 0, 0, 5, 30000, 1000, 60000, now(), now()"
for l in one rot hot; do
  if [ $l != one ]; then c="$cols, slot" v="$vals, (SELECT slot FROM rot.current)"; else c=$cols v=$vals; fi
  # enqueue N: one INSERT of N jobs; claim N + ack: alkstore's probe for
  # expired claims, its claim UPDATE, then its ack DELETE of each job.
  for n in 1 38; do
    echo "INSERT INTO $l.jobs ($c) SELECT $v FROM generate_series(1, $n);" > "$work/enqueue$n.$l"
    cat > "$work/claim$n.$l" <<SQL
BEGIN;
SELECT (SELECT CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END
          FROM $l.jobs e
         WHERE e.queue = 'work' AND (e.state = 'running' OR (e.state = 'pending' AND e.expires_at IS NOT NULL))
           AND CASE WHEN e.state = 'running' THEN e.claim_expires_at ELSE e.expires_at END <= now()
         ORDER BY 1 LIMIT 1) IS NOT NULL;
WITH u AS (
  UPDATE $l.jobs j
     SET state = 'running', attempts = j.attempts + 1, claimed_by = 'w',
         claim_expires_at = now() + j.visibility_timeout_ms * interval '1 millisecond'
   WHERE j.id = ANY (ARRAY(
           SELECT c.id FROM $l.jobs c
            WHERE hashtextextended(c.queue, 0) = hashtextextended('work', 0) AND c.queue = 'work'
              AND c.state = 'pending' AND c.run_at <= now()
              AND (c.expires_at IS NULL OR c.expires_at > now())
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT $n
            FOR UPDATE SKIP LOCKED))
  RETURNING j.id)
SELECT coalesce(string_agg(id::text, ','), '0') AS ids FROM u \gset
COMMIT;
DELETE FROM $l.jobs j WHERE j.id = ANY (string_to_array(:ids, ',')::bigint[]) AND j.state = 'running' AND j.claimed_by = 'w';
SQL
  done
  cat "$work/enqueue38.$l" "$work/claim38.$l" > "$work/loop.$l"
done

rotating() { # rotate rot and hot every second until killed
  while sleep 1; do psql -X -q -d $db -c "CALL rotate('rot')" -c "CALL rotate('hot')" 2>/dev/null || true; done
}
reset() { # layout [backlog]: empty the table, then fill and vacuum
  psql -X -q -d $db -c "TRUNCATE one.jobs, rot.jobs, hot.jobs" \
    -c "$(sed "s/generate_series(1, 1)/generate_series(1, ${2:-0})/" "$work/enqueue1.$1")" \
    -c "VACUUM ANALYZE $1.jobs"
}
run() { # script layout clients -> ops/s (transactions/s)
  pgbench -n -M prepared -T "$secs" -c "$3" -j "$3" -f "$work/$1.$2" $db 2>"$work/err" |
    awk '/^tps/ {print $3}' || cat "$work/err" >&2
}

windows() { # layout: the loop's transactions/s in four windows of 15 s, on one line
  local line=$1 w
  for w in 1 2 3 4; do
    line="$line $(secs=15 run loop "$1" 2)"
  done
  echo "$line" | awk '{printf "%-4s %8.0f %8.0f %8.0f %8.0f\n", $1, $2, $3, $4, $5}'
}

rotating &
echo "(1) no transaction held: ops/s, medians of $rounds runs of $secs s"
printf '%-24s %2s  %10s  %10s  %10s  %8s  %8s\n' operation c one rot hot one/rot one/hot
for op in enqueue1 claim1; do
  for c in 1 8; do
    rm -f "$work"/runs_*
    for ((r = 1; r <= rounds; r++)); do
      if ((r % 2)); then order=(one rot hot); else order=(hot rot one); fi
      for l in "${order[@]}"; do
        if [ $op = claim1 ]; then reset $l 200000; else reset $l; fi
        run $op $l $c >> "$work/runs_$l"
      done
    done
    awk -v o=$op -v c=$c -v a="$(median < "$work/runs_one")" -v b="$(median < "$work/runs_rot")" \
      -v h="$(median < "$work/runs_hot")" \
      'BEGIN { printf "%-24s %2d  %10.0f  %10.0f  %10.0f  %7.2fx  %7.2fx\n", o, c, a, b, h, a / b, a / h }'
  done
done

echo
echo "(2) one XID held from the start: transactions/s (enqueue 38, claim 38, ack), 2 clients, 15 s windows"
for l in one rot hot; do
  reset $l
  psql -X -q -d $db -c "BEGIN" -c "SELECT txid_current()" -c "SELECT pg_sleep(75)" >/dev/null &
  holder=$!
  sleep 1
  windows $l
  psql -X -d $db -At -c "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
    SELECT c.id FROM $l.jobs c
     WHERE hashtextextended(c.queue, 0) = hashtextextended('work', 0) AND c.queue = 'work'
       AND c.state = 'pending' AND c.run_at <= now()
     ORDER BY c.priority DESC, c.run_at, c.id LIMIT 38" | grep -E 'Index|Rows Removed|rows=' | head -6 | sed 's/^/    /'
  psql -X -d $db -At -c "SELECT '    ' || relname || ': ' || n_dead_tup || ' dead, ' || n_live_tup || ' live'
    FROM pg_stat_user_tables WHERE schemaname = '$l' ORDER BY relname"
  kill $holder 2>/dev/null || true
  wait $holder 2>/dev/null || true
done

echo
echo "(3) one REPEATABLE READ reader counting the table every 100 ms in one transaction: the same loop"
for l in one hot; do
  reset $l
  { echo "BEGIN ISOLATION LEVEL REPEATABLE READ;"
    for ((i = 0; i < 700; i++)); do echo "SELECT count(*) FROM $l.jobs; SELECT pg_sleep(0.1);"; done
  } | psql -X -q -d $db >/dev/null &
  holder=$!
  sleep 1
  windows $l
  kill $holder 2>/dev/null || true
  wait $holder 2>/dev/null || true
done

if [ "${ALK_ROTATION_PRESSURE:-0}" = 1 ]; then
  echo
  echo "(4) alkstore's functions, 1,200 jobs/s offered, one XID held for the stress phase (idle_in_tx)"
  for l in one rot; do
    pdb=${db}_$l
    psql -X -q -d postgres -c "SET client_min_messages = warning" \
      -c "DROP DATABASE IF EXISTS $pdb WITH (FORCE)" -c "CREATE DATABASE $pdb"
    psql -X -q -v ON_ERROR_STOP=1 -d $pdb -c "CREATE EXTENSION alkstore"
    if [ $l = rot ]; then
      psql -X -q -v ON_ERROR_STOP=1 -d $pdb -f scripts/lib/bench-rotation-alkstore.sql
      sed -n '/^CREATE PROCEDURE rotate/,$p' scripts/lib/bench-rotation.sql | psql -X -q -v ON_ERROR_STOP=1 -d $pdb
      (while sleep 1; do psql -X -q -d $pdb -c "CALL rotate('alkstore')" 2>/dev/null || true; done) &
    fi
    echo "$l:"
    ALK_PRESSURE_URL="postgresql://$(id -un)@/$pdb?host=/var/run/postgresql" ALK_PRESSURE_SYSTEMS=alkstore \
      ALK_PRESSURE_SCENARIOS=idle_in_tx cargo bench -q -p alkstore --bench pressure | tail -n +3
    if [ $l = rot ]; then kill $! 2>/dev/null || true; fi
    psql -X -q -d postgres -c "DROP DATABASE $pdb WITH (FORCE)"
  done
fi
