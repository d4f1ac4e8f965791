// Builds the SQLite extension (the Rust crate alkstore-sqlite) into lib/ with
// cargo: at `npm install ./packages/node` (the install script: only when
// lib/ has no library yet) and before `npm pack` (prepack, with --force:
// the tarball carries a fresh library, so installing it needs no Rust).
// The sources are the repository's this directory sits in (../../).
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const name = { darwin: 'libalkstore_sqlite.dylib', win32: 'alkstore_sqlite.dll' }[process.platform]
  || 'libalkstore_sqlite.so';
const lib = path.join(__dirname, 'lib', name);
if (fs.existsSync(lib) && !process.argv.includes('--force')) process.exit(0);

const root = path.resolve(__dirname, '..', '..');
if (!fs.existsSync(path.join(root, 'Cargo.toml')) || !fs.existsSync(path.join(root, 'sqlite_ext'))) {
  console.error(`alkstore: ${lib} is missing and there are no Rust sources at ${root} to build it from`);
  process.exit(1);
}
const target = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
try {
  execFileSync('cargo', ['build', '--release', '--locked', '-p', 'alkstore-sqlite',
    '--manifest-path', path.join(root, 'Cargo.toml')],
  { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, CARGO_TARGET_DIR: target } });
} catch (e) {
  console.error(`alkstore: building the SQLite extension needs Rust's cargo (https://rustup.rs): ${e.message}`);
  process.exit(1);
}
fs.mkdirSync(path.dirname(lib), { recursive: true });
fs.copyFileSync(path.join(target, 'release', name), lib);
