#!/usr/bin/env bash
# A queue under MVCC pressure (issue 35, item 3): alkstore and pgmq in one
# run, at one fixed offered load, each through clean → stress → recovery
# for four stresses: a transaction holding an XID (idle_in_tx), four
# REPEATABLE READ readers scanning the queue's table (active_readers), a
# worker dying with its jobs in hand (worker_crash), and a server restart
# (restart). What is measured and printed: facade/benches/pressure.rs.
#
#   scripts/bench-pressure.sh            (about 35 minutes with the defaults)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install); installs pgmq 1.1.4 with
# scripts/bench-peers.sh into a database of its own. The restart stress
# restarts the cluster (ALK_PRESSURE_RESTART, default
# `pg_ctlcluster 15 main restart`): stop scripts/postgres.sh's standby first
# (`scripts/postgres.sh standby-stop`). Settings: ALK_PRESSURE_* in the
# bench's header (rate 1200 jobs/s, 2 workers, phases 60/120/60 s);
# ALK_PRESSURE_SCENARIOS=idle_in_tx_enqueued runs a fifth stress, not in the
# default set: the XID held by a transaction that enqueued a job first.
set -euo pipefail
cd "$(dirname "$0")/.."
db=alkstore_bench_pressure
. scripts/lib/bench-common.sh
fresh_db $db
scripts/bench-peers.sh postgres $db
psql -X -q -c "SHOW autovacuum_naptime" -c "SHOW synchronous_commit" -d $db -At |
  paste -sd' ' | sed 's/^/autovacuum_naptime, synchronous_commit: /'
url="postgresql://$(id -un)@/$db?host=/var/run/postgresql"
ALK_PRESSURE_URL=${ALK_PRESSURE_URL:-$url} \
  cargo bench -q -p alkstore --bench pressure
