#!/usr/bin/env bash
# What the partitioned job table (schema.sql, rotate.sql) costs alkstore's
# own calls when nothing holds vacuum back: the plain SQL install of a
# revision before it and of this tree, each in a database of its own,
# driven by the same pgbench cells in turns (ALK_RESHAPE_ROUNDS, default 3,
# the order reversed each round; the median is shown). ALK_RESHAPE_CELLS
# picks cells (default: all four).
#
#   scripts/bench-reshape.sh [seconds-per-cell] [revision]   (5, 36f79bc)
#
# Cells: enqueue 1 and 100 per transaction, claim + ack 1 and 32, at 1 and
# 8 clients (-M prepared). PGOPTIONS='-c synchronous_commit=off' measures
# CPU rather than WAL flushes. Needs the cluster of scripts/postgres.sh, no
# standby streaming from it (scripts/postgres.sh standby-stop).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rev=${2:-36f79bc}
rounds=${ALK_RESHAPE_ROUNDS:-3}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

git worktree add -q --detach "$work/old" "$rev"
old_sql=$(cd "$work/old" && CARGO_TARGET_DIR=/tmp/alkstore-bench-reshape-target cargo xtask plain-sql 2>/dev/null | tail -1)
case $old_sql in /*) ;; *) old_sql="$work/old/$old_sql" ;; esac
new_sql=$(cargo xtask plain-sql 2>/dev/null | tail -1)
for db in alk_reshape_old alk_reshape_new; do
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done
psql -X -q -v ON_ERROR_STOP=1 -d alk_reshape_old -f "$old_sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d alk_reshape_new -f "$new_sql" >/dev/null

payload='{"user": 42, "email": "user42@example.com", "plan": "pro"}'
batch="[$(for i in $(seq 1 100); do printf '%s{"user": %d}' "$([ "$i" = 1 ] || echo ,)" "$i"; done)]"
printf '%s\n' "SELECT alk_enqueue('enq', NULL, '$payload');" > "$work/enqueue1.sql"
printf '%s\n' "SELECT alk_enqueue_batch('batch', NULL, '$batch');" > "$work/enqueue100.sql"
printf '%s\n' "SELECT alk_ack(c.id, 'w') FROM alk_claim('work', 'w', 1) c;" > "$work/claim1.sql"
printf '%s\n' "SELECT alk_ack_batch(array_agg(c.id), 'w') FROM alk_claim('work', 'w', 32) c;" > "$work/claim32.sql"

# Jobs for a claim cell: more than 8 clients claim in the time.
fill() {
  psql -X -q -d "$1" -c "TRUNCATE alkstore.jobs" \
    -c "SELECT count(*) FROM (SELECT alk_enqueue_batch('work', NULL, (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i)) FROM generate_series(1, $2)) x" \
    -c "VACUUM ANALYZE alkstore.jobs" >/dev/null
}
tps() { # db cell clients
  pgbench -n -M prepared -T "$secs" -c "$3" -j "$3" -f "$work/$2.sql" "$1" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "alkstore's calls, plain SQL install: $rev (one table) vs this tree (partitioned), ops/s, median of $rounds"
printf '  %-14s %8s %12s %12s %8s\n' cell clients "$rev" "this tree" ratio
for cell in ${ALK_RESHAPE_CELLS:-enqueue1 enqueue100 claim1 claim32}; do
  for c in 1 8; do
    : > "$work/old.txt"; : > "$work/new.txt"
    for r in $(seq 1 "$rounds"); do
      order="old new"; [ $((r % 2)) = 0 ] && order="new old"
      for which in $order; do
        db=alk_reshape_$which
        case $cell in
          claim1)  fill $db $((secs * 12)) ;;
          claim32) fill $db $((secs * 60)) ;;
          *)       psql -X -q -d $db -c "TRUNCATE alkstore.jobs" >/dev/null ;;
        esac
        tps $db $cell $c >> "$work/$which.txt"
      done
    done
    o=$(median < "$work/old.txt"); n=$(median < "$work/new.txt")
    printf '  %-14s %8s %12.0f %12.0f %8.2f\n' $cell $c "$o" "$n" "$(echo "$n / $o" | bc -l)"
  done
done
for db in alk_reshape_old alk_reshape_new; do psql -X -q -d postgres -c "DROP DATABASE $db"; done
