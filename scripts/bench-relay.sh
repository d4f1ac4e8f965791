#!/usr/bin/env bash
# Messages/s delivered by the relay to NATS JetStream and to RabbitMQ
# (publisher confirms), beside a plain client of the same library
# publishing the same messages with the same number of confirms in flight
# (the floor), in one run (issue 60; relay/benches/relay.rs). The brokers
# are started by scripts/brokers.sh; SQLite always, PostgreSQL when the
# local cluster has alkstore (scripts/postgres.sh install) or ALK_RELAY_PG
# names a database. Not part of CI. docs/benchmarks.md, "The relay".
#   scripts/bench-relay.sh   (ALK_RELAY_MESSAGES=20000 ALK_RELAY_CONCURRENCY=16)
# Beside them, the database alone (db msg/s): the same messages claimed 400
# at a time and acked in batches on a second thread, no sink: the most the
# relay can reach from that database.
set -euo pipefail
cd "$(dirname "$0")/.."
pg=${ALK_RELAY_PG:-}
if [ -z "$pg" ] && psql -X -q -At -d alkstore_test_ext -c 'SELECT 1' >/dev/null 2>&1; then
  pg="postgresql://$(id -un)@/alkstore_test_ext?host=${PGHOST:-/var/run/postgresql}"
fi
cargo bench --locked -q -p alkstore-relay --bench relay --no-run
urls=$(bash scripts/brokers.sh start)
eval "$urls"
trap 'bash scripts/brokers.sh stop' EXIT
export ALK_NATS_URL ALK_AMQP_URL
ALK_RELAY_DBS="sqlite $pg" cargo bench --locked -q -p alkstore-relay --bench relay 2>&1 | grep -v '^alkstore relay'
