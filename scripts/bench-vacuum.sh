#!/usr/bin/env bash
# What a VACUUM of alkstore.jobs every 5 s costs under load (issue 64
# item 15): pgbench enqueues at a fixed rate (ALK_BENCH_RATE jobs/s, default
# 600) while four clients claim and ack one job per transaction, for
# ALK_BENCH_SECONDS (default 60); beside it a loop runs the VACUUM every
# 5 s and times each. Once with plain `VACUUM alkstore.jobs`, once with
# `VACUUM (TRUNCATE false) alkstore.jobs`, once without any VACUUM loop.
# Prints each VACUUM's duration (median, max) and the jobs acked a second
# (of those enqueued in the run).
# Needs the cluster of scripts/postgres.sh with the extension installed;
# runs in a database of its own (alkstore_bench_vacuum).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${ALK_BENCH_RATE:-600}
seconds=${ALK_BENCH_SECONDS:-60}
db=alkstore_bench_vacuum
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION alkstore" >/dev/null

cat > "$work/enqueue.sql" <<'SQL'
SELECT alk_enqueue('vq', NULL, '{"n": 1}');
SQL
cat > "$work/work.sql" <<'SQL'
SELECT alk_ack(c.id, 'w') FROM alk_claim('vq', 'w', 1) c;
SQL

run() { # label vacuum-statement-or-empty
  local label=$1 vacuum=$2
  psql -X -q -d "$db" -c "SELECT alk_purge('vq', 'pending')" >/dev/null 2>&1 || true
  psql -X -q -d "$db" -c "VACUUM alkstore.jobs" >/dev/null
  pgbench -n -d "$db" -f "$work/enqueue.sql" -c 1 -R "$rate" -T "$seconds" > "$work/enq.out" 2>&1 &
  local enq=$!
  pgbench -n -d "$db" -f "$work/work.sql" -c 4 -T "$seconds" > "$work/work.out" 2>&1 &
  local wrk=$!
  : > "$work/vacuums"
  if [ -n "$vacuum" ]; then
    local until=$((SECONDS + seconds))
    while [ $SECONDS -lt "$until" ]; do
      local t0 t1
      t0=$(date +%s.%N)
      psql -X -q -d "$db" -c "$vacuum" >/dev/null
      t1=$(date +%s.%N)
      awk "BEGIN { print $t1 - $t0 }" >> "$work/vacuums"
      sleep 5
    done
  fi
  wait "$enq" "$wrk"
  # Jobs acked a second: enqueued in the run, less those left pending.
  local enqueued left acked
  enqueued=$(grep -oP 'number of transactions actually processed: \K[0-9]+' "$work/enq.out")
  left=$(psql -X -qAt -d "$db" -c "SELECT (alk_queue_stats('vq')->>'pending')::int")
  acked=$(( (enqueued - left) / seconds ))
  if [ -s "$work/vacuums" ]; then
    sort -n "$work/vacuums" > "$work/sorted"
    local n med max
    n=$(wc -l < "$work/sorted")
    med=$(sed -n "$(( (n + 1) / 2 ))p" "$work/sorted")
    max=$(tail -1 "$work/sorted")
    printf '%-40s %8s %10.3f %10.3f %12s\n' "$label" "$n" "$med" "$max" "$acked"
  else
    printf '%-40s %8s %10s %10s %12s\n' "$label" 0 - - "$acked"
  fi
}

echo "enqueue $rate jobs/s, 4 clients claim + ack, ${seconds} s each"
printf '%-40s %8s %10s %10s %12s\n' "vacuum every 5 s" "runs" "median s" "max s" "acked/s"
run "VACUUM alkstore.jobs" "VACUUM alkstore.jobs"
run "VACUUM (TRUNCATE false) alkstore.jobs" "VACUUM (TRUNCATE false) alkstore.jobs"
run "none" ""
psql -X -q -d postgres -c "DROP DATABASE $db" >/dev/null
