# What the pgbench scripts share (sourced): a fresh database of their own
# with the extension, and the median of numbers one per line.

# fresh_db NAME: drops and creates NAME with the extension installed.
fresh_db() {
  psql -X -q -d postgres -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
  psql -X -q -v ON_ERROR_STOP=1 -d "$1" -c "CREATE EXTENSION alkstore"
}

# median: the median of the numbers on standard input, one per line.
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# cell_table TITLE CELLS...: claim+ack 1 per transaction (the pgbench
# script $work/claim1 on database $db), each cell against "none" at 1 and
# at 8 clients: $rounds runs of $secs s each, alternating which goes first,
# medians and their ratio. The caller's `fill CELL` writes a cell's backlog
# before each run.
cell_table() {
  local title=$1 c cell sys r
  shift
  printf '%-34s %2s  %10s  %10s   %6s\n' "$title" "c" "cell" "none" "ratio"
  for c in 1 8; do
    for cell in "$@"; do
      rm -f "$work"/runs_*
      for ((r = 1; r <= rounds; r++)); do
        if ((r % 2)); then order=("$cell" none); else order=(none "$cell"); fi
        for sys in "${order[@]}"; do
          fill "$sys"
          pgbench -n -M prepared -T "$secs" -c "$c" -j "$c" -f "$work/claim1" "$db" 2>/dev/null |
            awk '/^tps/ {print $3}' >> "$work/runs_$sys"
        done
      done
      awk -v l="$cell" -v c="$c" -v a="$(median < "$work/runs_$cell")" -v n="$(median < "$work/runs_none")" \
        'BEGIN { printf "%-34s %2d  %10.0f  %10.0f   %5.2fx\n", l, c, a, n, n / a }'
    done
  done
}

