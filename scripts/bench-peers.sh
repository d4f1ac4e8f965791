#!/usr/bin/env bash
# The peers the benchmarks compare alkstore with, at pinned versions. Not
# part of CI.
#
#   scripts/bench-peers.sh postgres <database>
#       installs into that database (for scripts/bench-postgres.sh):
#       pgmq 1.1.4             its SQL-only install, shipped in the `pgmq` PyPI package
#       graphile-worker 0.18.0 npm; its own CLI installs its schema
#       PgQ 3.5                Debian postgresql-15-pgq3 (CREATE EXTENSION pgq)
#   scripts/bench-peers.sh honker
#       builds honker-extension 0.5.0 (crates.io) and prints the path of its
#       loadable library, for ALK_BENCH_HONKER in the SQLite bench:
#       ALK_BENCH_HONKER=$(scripts/bench-peers.sh honker) cargo bench -p alkstore-sqlite --bench sqlite
#
# Downloads and builds are kept in $ALK_PEERS_DIR (default ~/.cache/alkstore-peers).
set -euo pipefail
usage="usage: scripts/bench-peers.sh postgres <database> | honker"
dir=${ALK_PEERS_DIR:-$HOME/.cache/alkstore-peers}
mkdir -p "$dir"

if [ "${1:-}" = honker ]; then
  src=$dir/honker-extension-0.5.0
  if [ ! -f "$src/target/release/libhonker_ext.so" ]; then
    # The crate is a cdylib only: fetch its source through a throwaway
    # manifest, then build it with its own Cargo.lock.
    mkdir -p "$dir/fetch/src" && touch "$dir/fetch/src/lib.rs"
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nhonker-extension = "=0.5.0"\n' \
      > "$dir/fetch/Cargo.toml"
    cargo fetch --quiet --manifest-path "$dir/fetch/Cargo.toml"
    rm -rf "$src" && cp -r "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/honker-extension-0.5.0 "$src"
    cargo build --quiet --release --locked --manifest-path "$src/Cargo.toml" >&2
  fi
  echo "$src/target/release/libhonker_ext.so"
  exit 0
fi
[ "${1:-}" = postgres ] || { echo "$usage" >&2; exit 2; }
db=${2:?$usage}
sudo=$([ "$(id -u)" = 0 ] || echo sudo)

if [ ! -f "$dir/pgmq/sql/pgmq.sql" ]; then
  pip download --quiet --no-deps --dest "$dir" pgmq==1.1.4
  python3 -m zipfile -e "$dir"/pgmq-1.1.4-py3-none-any.whl "$dir"
fi
if [ ! -d "$dir/node_modules/graphile-worker" ]; then
  (cd "$dir" && npm install --silent --no-save --no-package-lock graphile-worker@0.18.0 >/dev/null)
fi
if [ ! -f "$(pg_config --sharedir)/extension/pgq.control" ]; then
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15-pgq3 >/dev/null
fi

psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$dir/pgmq/sql/pgmq.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION IF NOT EXISTS pgq"
# graphile-worker's CLI reads libpq's environment; the socket directory is the
# one psql uses here.
(cd "$dir" && PGHOST=${PGHOST:-/var/run/postgresql} PGUSER=${PGUSER:-$(id -un)} PGDATABASE=$db \
  npx --no-install graphile-worker --schema-only >/dev/null)
