#!/usr/bin/env bash
# Job dependencies (contract v1.2 §J), in one run:
#  1. pgbench cells, ops/s at 1 and 8 clients: a transaction that enqueues a
#     job and a second job after it (depends_on) against one that enqueues
#     two plain jobs (the workflow's shape: steps enqueued together);
#     claim+ack 1/tx where every ack releases a dependent against a plain
#     backlog of the same size.
#  2. The ack of a job with 1,000 dependents, beside 100,000 and then
#     1,000,000 other pending jobs: its time does not grow with the queue.
#
#   scripts/bench-deps.sh [seconds-per-cell]      (default 5)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install); works in a database of its own.
# ALK_BENCH_ROUNDS (default 3) runs each cell that many times, alternating
# with its baseline; medians shown.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${ALK_BENCH_ROUNDS:-3}
db=alkstore_bench_deps
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. scripts/lib/bench-common.sh
fresh_db $db

cat > "$work/pair_deps" <<'SQL'
BEGIN;
SELECT alk_enqueue('e', NULL, '1') AS parent \gset
SELECT alk_enqueue('e', jsonb_build_object('depends_on', jsonb_build_array(:parent::bigint)), '2');
COMMIT;
SQL
cat > "$work/pair_none" <<'SQL'
BEGIN;
SELECT alk_enqueue('e', NULL, '1') AS parent \gset
SELECT alk_enqueue('e', NULL, '2');
COMMIT;
SQL
echo "SELECT alk_ack(c.id, 'w') FROM alk_claim('q', 'w', 1) c;" > "$work/claim1"

# run SCRIPT CLIENTS -> tps
run() {
  pgbench -n -M prepared -T "$secs" -c "$2" -j "$2" -f "$work/$1" "$db" 2>/dev/null | awk '/^tps/ {print $3}'
}

fill() { # deps|none -> queue q: 50,000 jobs, each (with deps) followed by a dependent
  psql -X -q -v ON_ERROR_STOP=1 -d $db >/dev/null <<SQL
TRUNCATE alkstore.jobs, alkstore.job_deps;
DO \$\$
DECLARE
  parents bigint[];
BEGIN
  FOR b IN 1..50 LOOP
    parents := alk_enqueue_batch('q', NULL, (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i));
    IF '$1' = 'deps' THEN
      PERFORM alk_enqueue('q', jsonb_build_object('depends_on', jsonb_build_array(p)), '0')
         FROM unnest(parents) p;
    ELSE
      PERFORM alk_enqueue_batch('q', '{"priority": -1}', (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i));
    END IF;
  END LOOP;
END \$\$;
VACUUM ANALYZE alkstore.jobs;
SQL
}

printf '%-44s %2s  %10s  %10s   %6s\n' "ops/s" "c" "with deps" "without" "ratio"
for c in 1 8; do
  rm -f "$work"/runs_*
  for ((r = 1; r <= rounds; r++)); do
    psql -X -q -d $db -c "TRUNCATE alkstore.jobs, alkstore.job_deps" >/dev/null
    run pair_deps "$c" >> "$work/runs_pair_deps"
    psql -X -q -d $db -c "TRUNCATE alkstore.jobs, alkstore.job_deps" >/dev/null
    run pair_none "$c" >> "$work/runs_pair_none"
  done
  awk -v c="$c" -v a="$(median < "$work/runs_pair_deps")" -v n="$(median < "$work/runs_pair_none")" \
    'BEGIN { printf "%-44s %2d  %10.0f  %10.0f   %5.2fx\n", "enqueue a job and one after it (2 per tx)", c, a, n, n / a }'
  for ((r = 1; r <= rounds; r++)); do
    fill deps; run claim1 "$c" >> "$work/runs_ack_deps"
    fill none; run claim1 "$c" >> "$work/runs_ack_none"
  done
  awk -v c="$c" -v a="$(median < "$work/runs_ack_deps")" -v n="$(median < "$work/runs_ack_none")" \
    'BEGIN { printf "%-44s %2d  %10.0f  %10.0f   %5.2fx\n", "claim+ack 1/tx, each ack releasing a job", c, a, n, n / a }'
done

echo
for backlog in 100000 1000000; do
  psql -X -q -t -A -v ON_ERROR_STOP=1 -d $db <<SQL
TRUNCATE alkstore.jobs, alkstore.job_deps;
SELECT count(*) FROM (SELECT alk_enqueue_batch('other', NULL, (SELECT jsonb_agg(i) FROM generate_series(1, 10000) i))
                        FROM generate_series(1, $backlog / 10000)) b \gset
SELECT alk_enqueue('fan', NULL, '"root"') AS root \gset
SELECT cardinality(alk_enqueue_batch('fan', jsonb_build_object('depends_on', jsonb_build_array(:root)),
                                     (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i))) \gset
VACUUM ANALYZE alkstore.jobs;
SELECT count(*) FROM alk_claim('fan', 'w', 1) \gset
SELECT clock_timestamp() AS t0 \gset
SELECT alk_ack(:root, 'w') \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric * 1000, 1) AS ms \gset
SELECT format('ack of a job with 1000 dependents beside %s pending jobs: %s ms; claimable after it: %s',
              $backlog, :ms, (SELECT count(*) FROM alkstore.jobs WHERE queue = 'fan' AND state = 'pending'));
SQL
done
psql -X -q -d postgres -c "DROP DATABASE $db WITH (FORCE)"
