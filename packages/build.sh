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
out=target/packages
rm -rf "$out" && mkdir -p "$out"

# Python: setup.py builds the library into the wheel (cargo, --locked).
venv=target/packages-build-venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q "setuptools>=77" wheel
"$venv/bin/pip" wheel -q --no-deps --no-build-isolation -w "$out" packages/python
rm -rf packages/python/build packages/python/alkstore.egg-info

# Node: npm pack's prepack script builds the library into lib/.
(cd packages/node && npm pack --silent --pack-destination "../../$out" >/dev/null)
rm -rf packages/node/lib
ls "$out"
