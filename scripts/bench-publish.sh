#!/usr/bin/env bash
# What strict commit order (contract v1.2 §L) costs a publisher, in one run:
# pgbench cells of alk_publish with its commit ticket ("ticket", as
# installed) and without it ("no ticket": the deferred trigger disabled,
# everything else the same — the publish of before the ticket), beside the
# raw floor (an INSERT into a copy of alkstore.published) and, when the
# extension is available, PgQ's pgq.insert_event (an append to an event
# log: the same job; scripts/bench-peers.sh installs it).
#
#   scripts/bench-publish.sh [seconds-per-cell]      (default 5)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install); works in a database of its own, which no
# sequencer visits, and empties the tables before each cell.
# ALK_BENCH_ROUNDS (default 3) is how many times each system runs each
# cell, the order reversed each round; the median is shown. PGOPTIONS='-c
# synchronous_commit=off' measures the CPU each one spends, without the WAL
# flush every commit otherwise waits for.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
rounds=${ALK_BENCH_ROUNDS:-3}
db=alkstore_bench_publish
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
payload='{"order": 42, "total": 1200}'

. scripts/lib/bench-common.sh
fresh_db $db
psql -X -q -v ON_ERROR_STOP=1 -d $db -c "CREATE TABLE raw_published (LIKE alkstore.published INCLUDING ALL)"
systems=(ticket noticket raw)
if [ "$(psql -X -At -d $db -c "SELECT count(*) FROM pg_available_extensions WHERE name = 'pgq'")" = 1 ]; then
  psql -X -q -v ON_ERROR_STOP=1 -d $db -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('events')" >/dev/null
  systems+=(pgq)
fi

stmt() { # system -> one publish
  case $1 in
    ticket | noticket) echo "SELECT alk_publish('events', '$payload');" ;;
    raw) echo "INSERT INTO raw_published (stream, payload, created_at) VALUES ('events', '$payload', clock_timestamp());" ;;
    pgq) echo "SELECT pgq.insert_event('events', 'order', '$payload');" ;;
  esac
}
for sys in "${systems[@]}"; do
  stmt "$sys" > "$work/one_$sys"
  { echo "BEGIN;"; stmt "$sys"; echo "COMMIT;"; } > "$work/block_$sys"
  { echo "BEGIN;"; for _ in $(seq 10); do stmt "$sys"; done; echo "COMMIT;"; } > "$work/ten_$sys"
done

run() { # system cell clients -> transactions/s
  local t=ENABLE
  [ "$1" = noticket ] && t=DISABLE
  psql -X -q -d $db -c "TRUNCATE alkstore.published, raw_published" \
    -c "ALTER TABLE alkstore.published $t TRIGGER published_ticket"
  pgbench -n -M prepared -T "$secs" -c "$3" -j "$3" -f "$work/$2_$1" $db 2>/dev/null | awk '/^tps/ {print $3}'
}

row() { # label cell clients events-per-tx
  local label=$1 cell=$2 c=$3 k=$4 r sys order
  rm -f "$work"/runs_*
  for ((r = 1; r <= rounds; r++)); do
    order=("${systems[@]}")
    if ((r % 2 == 0)); then
      order=()
      for ((i = ${#systems[@]} - 1; i >= 0; i--)); do order+=("${systems[$i]}"); done
    fi
    for sys in "${order[@]}"; do run "$sys" "$cell" "$c" >> "$work/runs_$sys"; done
  done
  local t n w q
  t=$(median < "$work/runs_ticket"); n=$(median < "$work/runs_noticket"); w=$(median < "$work/runs_raw")
  q=$([ -f "$work/runs_pgq" ] && median < "$work/runs_pgq" || echo 0)
  awk -v l="$label" -v c="$c" -v k="$k" -v t="$t" -v n="$n" -v w="$w" -v q="$q" 'BEGIN {
    printf "%-30s %2d  %9.0f  %9.0f  %9.0f  %9s   %6.2fx  %6.2fx  %6s\n", l, c, t * k, n * k, w * k,
      (q > 0 ? sprintf("%.0f", q * k) : "-"), n / t, w / t, (q > 0 ? sprintf("%.2fx", q / t) : "-") }'
}

printf '%-30s %2s  %9s  %9s  %9s  %9s   %7s  %7s  %6s\n' "events/s" "c" "ticket" "no ticket" "raw" "pgq" \
  "no/tick" "raw/tick" "pgq/tick"
for c in 1 8; do
  row "publish 1/tx (autocommit)" one $c 1
  row "publish 1 in BEGIN...COMMIT" block $c 1
  row "publish 10/tx" ten $c 10
done
psql -X -q -d $db -c "ALTER TABLE alkstore.published ENABLE TRIGGER published_ticket"
