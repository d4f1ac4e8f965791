#!/usr/bin/env bash
# Runs the Python and Node examples on SQLite and PostgreSQL and checks their
# output against expected.txt, so the examples (and their READMEs) cannot rot.
# Builds the Python and npm packages (packages/build.sh) and runs the
# examples on them. Needs the PostgreSQL cluster running with the extension
# installed (scripts/test.sh does that first).
set -euo pipefail
cd "$(dirname "$0")/.."
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

# The packages, built from this checkout (the SQLite library inside each).
bash packages/build.sh >/dev/null
wheel=$(ls "$PWD"/target/packages/alkstore-*.whl)
tgz=$(ls "$PWD"/target/packages/alkstore-*.tgz)

# A README block marked <!-- run: NAME -->, as pasted.
readme_block() {
  awk -v tag="<!-- run: $1 -->" '$0 == tag {on = 1; next} on && /^```/ {if (started) exit; started = 1; next} on && started {print}' README.md
}

# Python: a fresh venv with the wheel (psycopg for PostgreSQL).
venv=target/examples/venv
rm -rf "$venv" && /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q "$wheel" -r examples/python/requirements.txt
check "python / sqlite" examples/python/expected.txt \
  "$venv/bin/python" examples/python/signup.py sqlite "$work/python.db"
db=$(fresh_pg python)
check "python / postgres" examples/python/expected.txt \
  "$venv/bin/python" examples/python/signup.py postgres "host=/var/run/postgresql dbname=$db"
# A handler that snoozes its job three times on a queue of one attempt
# (alk_release): it runs a fourth time and is acked.
check "python / sqlite: snooze" examples/python/snooze.expected.txt \
  "$venv/bin/python" examples/python/snooze.py sqlite "$work/snooze.db"
db=$(fresh_pg python_snooze)
check "python / postgres: snooze" examples/python/snooze.expected.txt \
  "$venv/bin/python" examples/python/snooze.py postgres "host=/var/run/postgresql dbname=$db"

# alkstore.work's own checks (packages/python/tests/check_work.py).
printf 'non-JSON result: handled 1, runs 1, acked True, warned True\nschedule: fired while work() ran: True\n%s\n%s\n%s\n%s\n' \
  'long handler: runs 1, attempts [1], lost claims 0, pending, running: (0, 0)' \
  'batches: each of 300 once: True, fewer ack calls than jobs: True, pending, running: (0, 0)' \
  'prefetched past the visibility timeout: runs [(0, 1), (1, 1), (2, 1), (3, 1)], lost claims 0, pending, running: (0, 0)' \
  'stopped: given back 9, attempts [1], pending, running: (0, 9)' > "$work/check-work-sqlite.expected"
printf '%s\n' 'ack behind a long handler: sent while it ran: True' \
  'a stuck handler: the others ran elsewhere [(1, 1), (2, 1), (3, 1)], within 3 s: True' \
  'concurrency 4: most at once 4, each of 8 once: True, handled 10, pending, running: (0, 0)' >> "$work/check-work-sqlite.expected"
check "python / sqlite: work() checks" "$work/check-work-sqlite.expected" \
  "$venv/bin/python" packages/python/tests/check_work.py sqlite "$work/check-work.db"
cp "$work/check-work-sqlite.expected" "$work/check-work-pg.expected"
printf '%s\n' 'reconnect: handled after its connection was killed: True, reconnects 1' \
  'notifications piled up while busy: claims after it at most 3: True' \
  "killed at stop, concurrency 2: ['returned'], runs again: [2]" \
  'ack waiting at a reconnect: runs [1], acked True, reconnects 1' \
  'host clock behind: runs [1], lost claims 0' \
  'not autocommit: refused (True); pending, running: (1, 0)' >> "$work/check-work-pg.expected"
db=$(fresh_pg python_checks)
check "python / postgres: work() checks" "$work/check-work-pg.expected" \
  "$venv/bin/python" packages/python/tests/check_work.py postgres "host=/var/run/postgresql dbname=$db"

# The README's round trip with a Python whose sqlite3 cannot load extensions
# (pyenv's: not Debian's), through apsw; and that sqlite3 there is refused
# with the way out in the message.
nolo=target/examples/venv-apsw
rm -rf "$nolo" && python3 -m venv "$nolo"
"$nolo/bin/pip" install -q "$wheel" apsw
readme_block python-roundtrip > "$work/roundtrip.py"
printf "{'to': 'ada@example.com'} True\n" > "$work/roundtrip.expected"
check "python / README round trip (apsw, $("$nolo/bin/python" -c 'import sys; print(sys.executable)'))" \
  "$work/roundtrip.expected" bash -c "cd '$work' && '$PWD/$nolo/bin/python' roundtrip.py"
printf 'refused: pip install apsw\n' > "$work/refused.expected"
check "python / sqlite3 without extension loading is refused" "$work/refused.expected" \
  "$nolo/bin/python" -c "
import sqlite3, alkstore
if hasattr(sqlite3.connect(':memory:'), 'enable_load_extension'):
    print('refused: pip install apsw')  # this Python can load them: nothing to refuse
else:
    try:
        alkstore.load(sqlite3.connect(':memory:'))
    except alkstore.AlkstoreError as e:
        print('refused: pip install apsw' if 'pip install apsw' in str(e) else e)"

printf 'package 0.2.0, library 0.2.0; refused: the alkstore library is 0.2.0, this package is 9.9.9\n' \
  | sed "s/0\.2\.0/$(sed -n 's/^version = "\(.*\)"/\1/p' packages/python/pyproject.toml)/g" > "$work/version.expected"
check "python / version() reports both and refuses another library" "$work/version.expected" \
  "$nolo/bin/python" -c "
import alkstore
v = alkstore.version()
alkstore.__version__ = '9.9.9'  # as if the package were another release
try:
    alkstore.version()
except alkstore.AlkstoreError as e:
    print(f\"package {v['package']}, library {v['library']}; refused: {str(e).split(':')[0]}\")"

# The packages as their own tools build them (no packages/build.sh): pip
# installs ./packages/python, and an sdist made by `python -m build`, into
# clean venvs; cargo builds the library inside each (the sdist from the Rust
# sources it carries). Debian's Python: its sqlite3 loads extensions.
cat > "$work/installed.py" <<'PY'
import json, sqlite3, alkstore
c = sqlite3.connect(':memory:')
alkstore.load(c)
c.execute("SELECT alk_enqueue('mail', NULL, ?)", (json.dumps({'to': 'ada@example.com'}),))
job = json.loads(c.execute("SELECT alk_claim('mail', 'w', 1)").fetchone()[0])[0]
print(job['payload'], c.execute("SELECT alk_ack(?, 'w')", (job['id'],)).fetchone()[0] == 1)
PY
pipdir=target/examples/venv-pip
rm -rf "$pipdir" && /usr/bin/python3 -m venv "$pipdir"
"$pipdir/bin/pip" install -q ./packages/python
check "python / pip install ./packages/python, round trip" "$work/roundtrip.expected" \
  "$pipdir/bin/python" "$work/installed.py"
sdistdir=target/examples/venv-sdist
rm -rf "$sdistdir" && /usr/bin/python3 -m venv "$sdistdir"
"$sdistdir/bin/pip" install -q build
"$sdistdir/bin/python" -m build -q --sdist --outdir "$work/sdist" packages/python >/dev/null
rm -rf packages/python/rust packages/python/build packages/python/*.egg-info
"$sdistdir/bin/pip" install -q "$work"/sdist/alkstore-*.tar.gz
check "python / python -m build --sdist, pip install the sdist, round trip" "$work/roundtrip.expected" \
  "$sdistdir/bin/python" "$work/installed.py"

# Node: the example project's locked dependencies (better-sqlite3 builds
# from source here, minutes: only when the lock changed), then the package.
(cd examples/node && { cmp -s package-lock.json node_modules/.alkstore-installed-lock ||
  { npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.alkstore-installed-lock; }; } &&
  npm install --no-save --no-audit --no-fund --loglevel=error "$tgz")
check "node / sqlite" examples/node/expected.txt node examples/node/signup.js sqlite "$work/node.db"
db=$(fresh_pg node)
check "node / postgres" examples/node/expected.txt \
  node examples/node/signup.js postgres "postgresql://$(id -un)@/$db?host=/var/run/postgresql"
check "node / sqlite: snooze" examples/node/snooze.expected.txt node examples/node/snooze.js sqlite "$work/snooze-node.db"
db=$(fresh_pg node_snooze)
check "node / postgres: snooze" examples/node/snooze.expected.txt \
  node examples/node/snooze.js postgres "postgresql://$(id -un)@/$db?host=/var/run/postgresql"
# alkstore.work's own checks (packages/node/test/check_work.js), with the
# example project's pg and better-sqlite3.
cp packages/node/test/check_work.js examples/node/check_work.js
printf '%s\n' 'non-JSON result: handled 1, runs 1, acked true, warned true' \
  'schedule: fired while work() ran: true' 'idle: abort listeners at most 1: true' \
  'long handler: runs 1, attempts [1], lost claims 0, pending, running: 0, 0' \
  'batches: each of 300 once: true, fewer ack calls than jobs: true, pending, running: 0, 0' \
  'prefetched past the visibility timeout: runs [[0,1],[1,1],[2,1],[3,1]], lost claims 0, pending, running: 0, 0' \
  'stopped: given back 9, attempts [1], pending, running: 0, 9' \
  'ack behind a long handler: sent while it ran: true' \
  'a stuck handler: the others ran elsewhere [[1,1],[2,1],[3,1]], within 3 s: true' \
  'concurrency 4: most at once 4, each of 8 once: true, handled 8, pending, running: 0, 0' > "$work/check-work-node.expected"
check "node / sqlite: work() checks" "$work/check-work-node.expected" \
  node --no-warnings examples/node/check_work.js sqlite "$work/check-work-node.db"
cp "$work/check-work-node.expected" "$work/check-work-node-pg.expected"
printf '%s\n' 'ack waiting at a reconnect: runs [1], acked true, reconnects 1' \
  'host clock behind: runs [1], lost claims 0' \
  'reconnect: handled after its connection was killed: true, reconnects 1' \
  'a job enqueued while the loop claims: picked up within 500 ms (of 10, at most one late): true' \
  'reconnect, 4 in flight: runs [[0,1],[0,2],[1,1],[1,2],[2,1],[3,1],[4,1],[5,1],[6,1],[7,1]], reconnects 1, pending, running: 0, 0' >> "$work/check-work-node-pg.expected"
db=$(fresh_pg node_checks)
check "node / postgres: work() checks" "$work/check-work-node-pg.expected" \
  node --no-warnings examples/node/check_work.js postgres "postgresql://$(id -un)@/$db?host=/var/run/postgresql"
rm -f examples/node/check_work.js
readme_block node-roundtrip > "$work/roundtrip.js"
printf "{ to: 'ada@example.com' } true\n" > "$work/roundtrip-node.expected"
check "node / README round trip" "$work/roundtrip-node.expected" \
  bash -c "cd '$work' && NODE_PATH='$PWD/examples/node/node_modules' node roundtrip.js"

# The README's route, npm install ./packages/node better-sqlite3, into a
# project of its own: the install script builds the library (better-sqlite3
# from the example project's copy: no download). alkstore is a symlink
# there, and alkstore.version() requires better-sqlite3 from the
# application (issue 64 item 13: it failed with MODULE_NOT_FOUND).
rm -rf packages/node/lib
mkdir -p "$work/node-app"
repo=$PWD
(cd "$work/node-app" && npm init -y >/dev/null &&
  npm install --no-audit --no-fund --loglevel=error "$repo/packages/node" \
    "$repo/examples/node/node_modules/better-sqlite3" 2>&1 | grep -v install-scripts || true)
cat > "$work/node-app/installed.js" <<'JS'
const Database = require('better-sqlite3');
const alkstore = require('alkstore');
const db = alkstore.load(new Database(':memory:'));
db.prepare("SELECT alk_enqueue('mail', NULL, ?)").pluck().get(JSON.stringify({ to: 'ada@example.com' }));
const job = JSON.parse(db.prepare("SELECT alk_claim('mail', 'w', 1)").pluck().get())[0];
console.log(job.payload, db.prepare("SELECT alk_ack(?, 'w')").pluck().get(job.id) === 1);
alkstore.version().then((v) => console.log('version', v.package === v.library));
JS
printf "%s\nversion true\n" "$(cat "$work/roundtrip-node.expected")" > "$work/installed-node.expected"
check "node / npm install ./packages/node better-sqlite3, round trip" "$work/installed-node.expected" \
  bash -c "cd '$work/node-app' && node installed.js"
rm -rf packages/node/lib

echo "examples: $passed passed, $failed failed"
[ "$failed" = 0 ]
