#!/usr/bin/env bash
# Jobs scheduled ahead (contract v1.2 §H), in one run: pgbench cells of
# claim+ack 1 per transaction on a backlog of 100,000 due jobs at priority 0
#   ahead      behind 100,000 jobs at priority 10 scheduled a day ahead
#   came due   the same 100,000 came due at once, before any sweep (claims
#              take them directly, in claim order)
# each against the same due backlog alone ("none"); then the longest of the
# alk_sweep calls that make the 100,000 pending.
#
#   scripts/bench-ahead.sh [seconds-per-cell]      (default 5)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install); works in a database of its own and fills
# the backlog again before each cell. ALK_BENCH_ROUNDS (default 3) runs each
# cell that many times, alternating with "none"; medians shown.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${ALK_BENCH_ROUNDS:-3}
db=alkstore_bench_ahead
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. scripts/lib/bench-common.sh
fresh_db $db
echo "SELECT alk_ack(c.id, 'w') FROM alk_claim('q', 'w', 1) c;" > "$work/claim1"

fill() { # cell -> queue q's backlog for that cell
  psql -X -q -v ON_ERROR_STOP=1 -d $db >/dev/null <<SQL
TRUNCATE alkstore.jobs;
SELECT alk_enqueue_batch('q', '{"priority": 0}', (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i))
  FROM generate_series(1, 100);
SELECT alk_enqueue_batch('q', '{"priority": 10, "delay_s": 86400}',
                         (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i))
  FROM generate_series(1, 100) WHERE '$1' <> 'none';
UPDATE alkstore.jobs SET run_at = now() - interval '1 second' WHERE '$1' = 'came_due' AND priority = 10;
VACUUM ANALYZE alkstore.jobs;
SQL
}

cell_table "claim+ack 1/tx (ops/s)" ahead came_due
fill came_due
psql -X -q -t -A -d $db <<'SQL'
DO $$
DECLARE
  t0 timestamptz;
  longest interval := '0';
  calls integer := 0;
BEGIN
  WHILE EXISTS (SELECT FROM alkstore.jobs WHERE state = 'scheduled') LOOP
    t0 := clock_timestamp();
    PERFORM alk_sweep('q');
    longest := greatest(longest, clock_timestamp() - t0);
    calls := calls + 1;
  END LOOP;
  RAISE NOTICE '100000 came due at once: % alk_sweep calls made them pending, the longest % ms',
    calls, round(extract(epoch FROM longest)::numeric * 1000, 1);
END $$;
SQL
psql -X -q -d postgres -c "DROP DATABASE $db WITH (FORCE)"
