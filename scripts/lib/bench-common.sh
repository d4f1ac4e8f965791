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
