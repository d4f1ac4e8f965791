#!/usr/bin/env bash
# Builds the Python wheel and the npm package from this checkout, with the
# release SQLite library inside each, into target/packages/:
#   alkstore-<version>-py3-none-<platform>.whl   alkstore-<version>.tgz
# Their versions follow the workspace's (Cargo.toml); a mismatch fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
for file in packages/python/pyproject.toml packages/node/package.json; do
  grep -q "\"$version\"" "$file" || { echo "$file is not version $version" >&2; exit 1; }
done
cargo build --locked --release -q -p alkstore-sqlite
out=target/packages
rm -rf "$out" && mkdir -p "$out"

# Python: the library goes into the package directory, then a wheel.
cp target/release/libalkstore_sqlite.so packages/python/alkstore/
venv=target/packages-build-venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q setuptools wheel
"$venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$out" packages/python
rm -rf packages/python/build packages/python/alkstore.egg-info packages/python/alkstore/libalkstore_sqlite.so

# Node: the library under lib/, then npm pack.
mkdir -p packages/node/lib
cp target/release/libalkstore_sqlite.so packages/node/lib/
(cd packages/node && npm pack --silent --pack-destination "../../$out" >/dev/null)
rm -rf packages/node/lib
ls "$out"
