#!/usr/bin/env bash
# The races of tests/isolation/specs as pg_isolation_regress specs, against
# the local cluster with the installed extension (scripts/postgres.sh).
# Each spec interleaves sessions step by step; the output, waits included,
# must match tests/isolation/expected/. Prints "isolation: N passed, M failed".
#   scripts/isolation.sh [spec …]      (default: every spec)
#   ALK_BLESS=1 scripts/isolation.sh   (write the outputs as expected: review them!)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=/usr/lib/postgresql/15/lib/pgxs/src/test/isolation
db=alkstore_isolation
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION alkstore"
# The rotation of the job table's slots (rotate.sql) only where a spec turns
# it on: in the others, an alk_sweep would wait for their open transactions'
# locks on the slots, which is not the race they are about.
psql -X -q -d postgres -c "ALTER DATABASE $db SET alkstore.rotation = off"
specs=("$@")
[ ${#specs[@]} -gt 0 ] || mapfile -t specs < <(ls tests/isolation/specs | sed 's/\.spec$//')
out=$(mktemp -d)
status=0
"$bin/pg_isolation_regress" --use-existing --host=/var/run/postgresql --user="$(id -un)" \
  --dbname="$db" --inputdir=tests/isolation --outputdir="$out" "${specs[@]}" |
  tee "$out/run.log" || status=$?
if [ "${ALK_BLESS:-0}" = 1 ]; then
  cp "$out"/results/*.out tests/isolation/expected/
fi
[ $status = 0 ] || cat "$out/regression.diffs" 2>/dev/null || true
passed=$(grep -cE '^(ok|test) .* ok( |$)|\.\.\. ok' "$out/run.log" || true)
failed=$(grep -cE 'FAILED|failed \(' "$out/run.log" || true)
echo "isolation: $passed passed, $failed failed"
exit $status
