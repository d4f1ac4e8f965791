#!/usr/bin/env bash
# Jobs worked per second by each system's own worker (issue 59 item 3), on
# the local cluster: ALK_BENCH_JOBS no-op jobs (default 20,000) added in
# one go, then drained by one worker process at concurrency 1, 8 and 32,
# jobs/s from the worker's start to the last job's completion, the median
# of ALK_BENCH_ROUNDS (default 3); each system in a database of its own,
# with commits waiting for the WAL flush (synchronous_commit on) and not
# (off). Columns:
#   alk          alkstore's blocking Worker (facade/benches/drain.rs), its
#                defaults (a local queue of its concurrency, contract v1.3 §P)
#   alk pace     the same with prefetch_by_pace (the local queue sized by
#                what the handlers finish in 100 ms)
#   async        alkstore's AsyncWorker (sqlx), its defaults
#   async pace   the same with prefetch_by_pace
#   floor        one thread: alk_claim 32 + alk_ack_batch (the SQL the workers are measured against)
#   gw           graphile-worker 0.18.0's run(), its defaults
#   gw batched   the same with the batching its docs describe (localQueue 500, completeJobBatchDelay 0)
# Needs the cluster with alkstore installed (scripts/postgres.sh install) and
# node; the peers are installed by scripts/bench-peers.sh's directory
# ($ALK_PEERS_DIR). Not part of CI. docs/benchmarks.md, "Workers against
# the peers' workers".
#   scripts/bench-workers.sh   (ALK_BENCH_CONCURRENCY="8 32" ALK_BENCH_MODES=off to narrow it)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ALK_BENCH_JOBS:-20000}
rounds=${ALK_BENCH_ROUNDS:-3}
concurrencies=${ALK_BENCH_CONCURRENCY:-"1 8 32"}
modes=${ALK_BENCH_MODES:-"on off"}
dir=${ALK_PEERS_DIR:-$HOME/.cache/alkstore-peers}
host=${PGHOST:-/var/run/postgresql}
user=${PGUSER:-$(id -un)}
# (a host name before the socket directory: sqlx refuses an empty one)
url() { echo "postgresql://$user@localhost/$1?host=$host"; }
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$@"; }

mkdir -p "$dir"
[ -d "$dir/node_modules/graphile-worker" ] ||
  (cd "$dir" && npm install --silent --no-save --no-package-lock graphile-worker@0.18.0 >/dev/null)

for db in bw_alk bw_gw; do
  q postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done
q bw_alk -c "CREATE EXTENSION alkstore"
(cd "$dir" && PGHOST=$host PGUSER=$user PGDATABASE=bw_gw npx --no-install graphile-worker --schema-only >/dev/null)
# Built once: a source edited while this runs changes nothing measured.
drain=$(cargo bench --locked -p alkstore --features sqlx-postgres --bench drain --no-run 2>&1 |
  grep -o 'target/release/deps/drain-[0-9a-f]*' | tail -1)
[ -x "$drain" ] || { echo "could not build facade/benches/drain.rs" >&2; exit 1; }

fill_alk() { # queue
  q bw_alk -c "SELECT sum(cardinality(alk_enqueue_batch('$1', NULL,
      (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(k * 1000 + 1, k * 1000 + 1000) i))))
    FROM generate_series(0, $jobs / 1000 - 1) k" >/dev/null
}
alk() { # kind concurrency -> jobs/s
  local queue="bw-$1-$2-$RANDOM$RANDOM"
  fill_alk "$queue"
  q bw_alk -c "VACUUM ANALYZE alkstore.jobs" 2>/dev/null
  ALK_DRAIN_URL=$(url bw_alk) ALK_DRAIN_QUEUE=$queue ALK_DRAIN_JOBS=$jobs ALK_DRAIN_CONCURRENCY=$2 \
    ALK_DRAIN_KIND=$1 "$drain" --bench | tail -1
}
gw() { # default|batched concurrency -> jobs/s
  q bw_gw -c "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('work', json_build_object('n', i),
      NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, $jobs) i))" >/dev/null
  q bw_gw -c "VACUUM ANALYZE graphile_worker._private_jobs"
  NODE_PATH=$dir/node_modules node scripts/lib/drain-graphile.js "$(url bw_gw)" "$jobs" "$2" "$1"
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "$jobs no-op jobs per run, jobs/s, median of $rounds; $(nproc) cores"
printf '%-6s %3s  %9s %9s %9s %10s %9s %9s %10s  %8s %8s\n' commit c alk "alk pace" async "async pace" \
  floor gw "gw batched" best/gw best/floor
for mode in $modes; do
  for db in bw_alk bw_gw; do q postgres -c "ALTER DATABASE $db SET synchronous_commit = $mode"; done
  for c in $concurrencies; do
    a=""; ap=""; as=""; asp=""; f=""; g=""; gb=""
    for _ in $(seq "$rounds"); do
      a="$a $(alk blocking "$c")"
      ap="$ap $(alk blocking-pace "$c")"
      as="$as $(alk async "$c")"
      asp="$asp $(alk async-pace "$c")"
      f="$f $(alk floor 1)"
      g="$g $(gw default "$c")"
      gb="$gb $(gw batched "$c")"
    done
    a=$(echo "$a" | median); ap=$(echo "$ap" | median); as=$(echo "$as" | median)
    asp=$(echo "$asp" | median); f=$(echo "$f" | median)
    g=$(echo "$g" | median); gb=$(echo "$gb" | median)
    # alkstore's best worker against graphile-worker's best and the floor.
    ours=$(printf '%s\n' "$a" "$ap" "$as" "$asp" | sort -n | tail -1)
    best=$((g > gb ? g : gb))
    printf '%-6s %3s  %9s %9s %9s %10s %9s %9s %10s  %7.2fx %7.2fx\n' "$mode" "$c" "$a" "$ap" "$as" "$asp" \
      "$f" "$g" "$gb" "$(echo "$ours / $best" | bc -l)" "$(echo "$ours / $f" | bc -l)"
  done
done
for db in bw_alk bw_gw; do q postgres -c "DROP DATABASE $db"; done
