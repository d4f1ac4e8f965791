#!/usr/bin/env bash
# Runs the Python and Node examples on SQLite and PostgreSQL and checks their
# output against expected.txt, so the examples (and their READMEs) cannot rot.
# Needs: the release SQLite library built, the PostgreSQL cluster running
# with the extension installed (scripts/test.sh does both first).
set -euo pipefail
cd "$(dirname "$0")/.."
lib="$PWD/target/release/libalkstore_sqlite.so"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

check() { # name expected-file command...
  local name=$1 want=$2
  shift 2
  if "$@" > "$work/out" 2>&1 && diff -u "$want" "$work/out"; then
    echo "example ok: $name"
    passed=$((passed + 1))
  else
    echo "example FAILED: $name"; cat "$work/out"
    failed=$((failed + 1))
  fi
}

fresh_pg() { # a new database with the extension; prints its name
  local db="alkstore_example_$1"
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION alkstore" >/dev/null
  echo "$db"
}

# Python: Debian's python3 (its sqlite3 module can load extensions) in a venv.
venv=target/examples/venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q -r examples/python/requirements.txt
check "python / sqlite" examples/python/expected.txt \
  "$venv/bin/python" examples/python/signup.py sqlite "$lib" "$work/python.db"
db=$(fresh_pg python)
check "python / postgres" examples/python/expected.txt \
  "$venv/bin/python" examples/python/signup.py postgres "host=/var/run/postgresql dbname=$db"

# Node: the locked dependencies (better-sqlite3 builds from source here).
# (npm ci rebuilds better-sqlite3 from source, minutes: only when the lock changed.)
(cd examples/node && { cmp -s package-lock.json node_modules/.alkstore-installed-lock ||
  { npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.alkstore-installed-lock; }; })
check "node / sqlite" examples/node/expected.txt node examples/node/signup.js sqlite "$lib" "$work/node.db"
db=$(fresh_pg node)
check "node / postgres" examples/node/expected.txt \
  node examples/node/signup.js postgres "postgresql://$(id -un)@/$db?host=/var/run/postgresql"

echo "examples: $passed passed, $failed failed"
[ "$failed" = 0 ]
