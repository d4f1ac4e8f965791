#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (run as root):
#   scripts/test.sh
# It installs what it needs (scripts/setup.sh), then runs every suite
# against real databases. ALK_SKIP_POSTGRES=1 runs the SQLite half only.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n=== %s\n' "$*"; }

step "setup"
bash scripts/setup.sh

step "format"
cargo fmt --all --check

step "core and SQLite engine: unit, integration and doc tests"
cargo test --locked -p alkstore-core -p alkstore-sqlite

step "SQLite engine: the release library in the sqlite3 shell and Python"
cargo build --locked --release -p alkstore-sqlite
ALKSTORE_SQLITE_LIB="$PWD/target/release/libalkstore_sqlite.so" \
  cargo test --locked -p alkstore-sqlite --test shell

step "SQLite engine: benchmark smoke run (figures: cargo bench -p alkstore-sqlite)"
ALK_BENCH_QUICK=1 cargo bench --locked -p alkstore-sqlite --bench sqlite

echo
echo "all suites passed"
