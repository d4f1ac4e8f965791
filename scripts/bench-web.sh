#!/usr/bin/env bash
# The web dashboard on a queue of 1,000,000 pending jobs: how long each page
# and API call takes (the median of 5 requests after one warm-up), and how
# long one `alk_queues()` reading takes — what the sampler backs off from.
#
#   scripts/bench-web.sh [jobs]      (default 1000000)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install) and curl; works in a database of its own
# and serves the release `alkstore web` on 127.0.0.1:8089.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1000000}
db=alkstore_bench_web
work=$(mktemp -d)
. scripts/lib/bench-common.sh
fresh_db $db
psql -X -q -v ON_ERROR_STOP=1 -o /dev/null -d $db <<SQL
DO \$\$ BEGIN
  FOR i IN 1..($jobs / 1000) LOOP
    PERFORM alk_enqueue_batch('big', NULL, (SELECT jsonb_agg(jsonb_build_object('account', g % 1000, 'n', g))
                                              FROM generate_series(1, 1000) g));
  END LOOP;
END \$\$;
-- a few dead jobs for the dead-letter page
SELECT alk_enqueue('mail', '{"max_attempts": 1}', jsonb_build_object('n', g)) FROM generate_series(1, 20) g;
SELECT alk_fail(c.id, 'w', 'no') FROM alk_claim('mail', 'w', 20) c;
VACUUM ANALYZE;
SQL
cargo build --locked -q --release -p alkstore-cli
target/release/alkstore --url "postgresql:///$db?host=/var/run/postgresql" web --listen 127.0.0.1:8089 2>/dev/null &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
until curl -s -o /dev/null http://127.0.0.1:8089/; do sleep 0.2; done

printf '%-58s %9s\n' "request ($jobs pending jobs in one queue)" "median ms"
for path in / /queues/big '/queues/big?state=pending' '/queues/big?state=pending&after_id=900000' \
  '/queues/big?state=dead' '/queues/big?state=pending&filter=account%3D5' /dead /jobs/500000 /health \
  '/api/queues/big/jobs?state=pending&limit=100' /api/jobs/500000 /api/queues; do
  curl -s -o /dev/null "http://127.0.0.1:8089$path"
  for _ in 1 2 3 4 5; do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:8089$path"
  done | median | awk -v p="$path" '{printf "%-58s %9.1f\n", p, $1 * 1000}'
done
ms=$(psql -X -q -At -d $db -c '\timing on' -c 'SELECT alk_queues() IS NOT NULL' | awk '/^Time/ {print $2}')
echo "one alk_queues() reading: $ms ms (the sampler waits 10x that between readings)"
