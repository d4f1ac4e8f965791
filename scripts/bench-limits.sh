#!/usr/bin/env bash
# What flow control (contract v1.2 §I) costs a claim, in one run: pgbench
# cells of claim+ack 1 per transaction on a backlog of 100,000 pending jobs
# spread over 10,000 limit keys, as a busy service enqueues them (every
# key's first job, then every key's second, …), with each kind of limit
# against the same backlog without limits ("none"):
#   max_running   max_running 1000 (never reached: the cost of counting)
#   rate          rate_max 1,000,000 per second (never reached)
#   keys full     key_max_running 1, 100 of the 10,000 keys at their limit
#                 (one job each held running by another worker)
#   busy first    key_max_running 1, one key at its limit whose 10,000
#                 jobs come first in claim order, then 10,000 of other keys
#
#   scripts/bench-limits.sh [seconds-per-cell]      (default 5)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install); works in a database of its own and
# fills the backlog again before each cell. ALK_BENCH_ROUNDS (default 3)
# runs each cell that many times, alternating with "none"; medians shown.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${ALK_BENCH_ROUNDS:-3}
db=alkstore_bench_limits
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. scripts/lib/bench-common.sh
fresh_db $db
echo "SELECT alk_ack(c.id, 'w') FROM alk_claim('q', 'w', 1) c;" > "$work/claim1"

fill() { # cell -> the backlog of queue q, with that cell's limits
  local limits jobs
  case $1 in
    none) limits='{}' ;;
    max_running) limits='{"max_running": 1000}' ;;
    rate) limits='{"rate_max": 1000000, "rate_per_s": 1}' ;;
    keys_full | busy_first) limits='{"key_max_running": 1}' ;;
  esac
  # Rows written directly (alk_enqueue's own cost is not measured here).
  jobs="INSERT INTO alkstore.jobs (queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms,
          backoff_base_ms, backoff_max_ms, run_at, created_at, limit_key)
        SELECT 'q', 'pending', jsonb_build_object('n', i), 0, 0, 5, 60000, 5000, 3600000,
               now() - interval '1 hour' + i * interval '1 microsecond', now(), k
          FROM"
  psql -X -q -v ON_ERROR_STOP=1 -d $db >/dev/null <<SQL
TRUNCATE alkstore.jobs, alkstore.queue_limits, alkstore.claim_times, alkstore.parked, alkstore.parked_keys;
SELECT alk_queue_configure('q', '{"max_running": null, "rate_max": null, "rate_per_s": null, "key_max_running": null}');
SELECT alk_queue_configure('q', '$limits');
$(if [ "$1" = busy_first ]; then
  echo "$jobs (SELECT i, 'busy' AS k FROM generate_series(1, 10000) i
                UNION ALL SELECT i, 'k' || (i % 10000) FROM generate_series(10001, 20000) i) s;"
else
  echo "$jobs (SELECT i, 'k' || (i % 10000) AS k FROM generate_series(1, 100000) i) s;"
fi)
-- The keys at their limit: one job each, held by another worker for an hour.
UPDATE alkstore.jobs SET state = 'running', attempts = 1, claimed_by = 'holder',
       claim_expires_at = now() + interval '1 hour'
 WHERE id IN (SELECT min(id) FROM alkstore.jobs
               WHERE '$1' IN ('keys_full', 'busy_first')
                 AND (limit_key = 'busy' OR ('$1' = 'keys_full' AND limit_key ~ '^k[0-9]{1,2}$'))
               GROUP BY limit_key);
VACUUM ANALYZE alkstore.jobs;
SQL
}

cell_table "claim+ack 1/tx (ops/s)" max_running rate keys_full busy_first
psql -X -q -d postgres -c "DROP DATABASE $db WITH (FORCE)"
