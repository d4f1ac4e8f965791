#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (run as root):
#   scripts/test.sh
# It installs what it needs (scripts/setup.sh), then runs every suite
# against real databases. ALK_SKIP_POSTGRES=1 runs the SQLite half only.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# One build from scratch: incremental state would only take disk (gigabytes).
export CARGO_INCREMENTAL=0

# Keep a copy of everything printed, to total the test counts at the end.
log=$(mktemp)
exec > >(tee "$log") 2>&1
summary() {
  local passed failed
  passed=$(grep -oE 'test result: ok\. [0-9]+ passed|(examples|isolation): [0-9]+ passed' "$log" |
    awk '{s += ($1 == "examples:" || $1 == "isolation:") ? $2 : $4} END {print s + 0}')
  failed=$(grep -o '[0-9]* failed;' "$log" | awk '{s += $1} END {print s + 0}')
  echo
  echo "took $((SECONDS / 60)) min $((SECONDS % 60)) s"
  echo "$passed passed, $failed failed"
}

# Each step says when it began (minutes:seconds since the start), so a
# slow step shows in CI's output.
step() { printf '\n=== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

step "setup"
df -h . | tail -1 | awk '{print "disk before: " $4 " free"}'
bash scripts/setup.sh

step "format"
cargo fmt --all --check

step "generated files are current (sql/postgres/manifest.toml): constants, grants, the claim, the extension's sources and update scripts"
cargo xtask verify

step "lint: clippy on every other crate and target, warnings are errors"
cargo clippy --locked --workspace --exclude alkstore-pg --all-targets -- -D warnings
cargo clippy --locked -p alkstore --all-targets --all-features -- -D warnings
RUSTDOCFLAGS=-Dwarnings cargo doc --locked -q --no-deps -p alkstore --all-features

step "the Rust facade's drivers as features: each async one builds without the blocking drivers"
for f in sqlx-postgres sqlx-sqlite tokio-postgres; do
  cargo check --locked -q -p alkstore --no-default-features --features "$f"
  if cargo tree --locked -q -p alkstore --no-default-features --features "$f" -e normal | grep -E '^.* (rusqlite|postgres|r2d2) v'; then
    echo "feature $f pulls a blocking driver"; exit 1
  fi
done

step "applications outside the workspace, with no [patch]: alkstore's default features (rusqlite) and sqlx-sqlite with sqlx; one SQLite each, and they run"
for app in rust-rusqlite rust-sqlx-sqlite; do
  CARGO_TARGET_DIR="$PWD/target/$app" \
    cargo run --locked -q --manifest-path "examples/$app/Cargo.toml" | tee "$log.$app"
  grep -q '^welcomed "ada@example.com" (acked: true)$' "$log.$app"
  grep -q '^pending after: 0$' "$log.$app"
done

step "the crates package and build as crates.io would publish them"
# Verification unpacks and builds the packaged crates as registry crates,
# which cargo never unpacks or rebuilds again for the same version: drop what
# an earlier run left, or it checks the facade against an older core.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/alkstore-core-* \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/alkstore-sqlite-*
cargo clean --locked -q -p alkstore-core -p alkstore-sqlite -p alkstore
cargo publish --locked --workspace --dry-run --allow-dirty 2>&1 | tee "$log.publish" | grep -E '^ *(Packaged|Verifying)'

step "core and SQLite engine: unit, integration and doc tests"
cargo test --locked -p alkstore-core -p alkstore-sqlite -p xtask

step "quick start (README): cargo run -p alkstore --example quickstart"
cargo run --locked -q -p alkstore --example quickstart | tee "$log.quickstart"
grep -q '^receipts sent: 1; orders in the table: 1$' "$log.quickstart"

step "job features (docs/features.md): cargo run -p alkstore --example job_features"
check_features() {
  tee "$log.features" &&
    grep -q '^idempotent: true$' "$log.features" &&
    grep -q '^claimed while paused: 0$' "$log.features" &&
    grep -q '^job [0-9]* is "completed" with result {"done":{"charge":1200}}$' "$log.features"
}
cargo run --locked -q -p alkstore --example job_features | check_features

step "schedules (docs/features.md): cargo run -p alkstore --example schedules"
cargo run --locked -q -p alkstore --example schedules | tee "$log.schedules"
grep -q '^ran job [0-9]* with {"report":"sales"}$' "$log.schedules"

step "workflows (README): cargo run -p alkstore --example workflow"
cargo run --locked -q -p alkstore --example workflow | tee "$log.workflow"
diff -u facade/examples/workflow.expected.txt "$log.workflow"

step "SQLite engine: the release library in the sqlite3 shell and Python"
cargo build --locked --release -p alkstore-sqlite
ALKSTORE_SQLITE_LIB="$PWD/target/release/libalkstore_sqlite.so" \
  cargo test --locked -p alkstore-sqlite --test shell

step "SQLite engine: benchmark smoke run (figures: cargo bench -p alkstore-sqlite)"
ALK_BENCH_QUICK=1 cargo bench --locked -p alkstore-sqlite --bench sqlite

if [ "${ALK_SKIP_POSTGRES:-0}" = 1 ]; then
  step "cross-engine suite, the Rust facade and the web dashboard (SQLite only: ALK_SKIP_POSTGRES=1)"
  cargo test --locked -p alkstore-tests -p alkstore
  ALKSTORE_REQUIRE_BROWSER=1 cargo test --locked -p alkstore-web
  echo; echo "all SQLite suites passed (PostgreSQL skipped)"
  summary
  exit 0
fi

# pgrx's tests install a debug build of the extension into the server's
# directories and run their own throwaway cluster; so they come first, and
# the release build is installed (and the cluster restarted) after them.
step "PostgreSQL extension: in-server tests (cargo pgrx test)"
pgdata=/tmp/alkstore-pgrx-tests
rm -rf "$pgdata" && mkdir -p "$pgdata" && chown postgres "$pgdata"
cargo pgrx test -p alkstore-pg pg15 --runas postgres --pgdata "$pgdata/data"

step "lint: clippy on the PostgreSQL crate, every target, warnings are errors"
cargo clippy --locked -p alkstore-pg --all-targets -- -D warnings

step "PostgreSQL: the release extension in the cluster, the test databases, a hot standby, PgBouncer"
bash scripts/postgres.sh start
bash scripts/postgres.sh install
eval "$(bash scripts/postgres.sh testdbs)"
eval "$(bash scripts/postgres.sh standby)"
eval "$(bash scripts/pgbouncer.sh start)"
# The facade's fault test restarts the cluster under load with this, and
# its outage test stops it for 15 s with these.
export ALKSTORE_PG_RESTART='pg_ctlcluster 15 main restart'
export ALKSTORE_PG_STOP='pg_ctlcluster 15 main stop' ALKSTORE_PG_START='pg_ctlcluster 15 main start'
export ALKSTORE_PG_URL ALKSTORE_PG_PLAIN_URL ALKSTORE_PG_WORKER_URL ALKSTORE_PG_BOUNCER_URL ALKSTORE_PG_TLS_URL ALKSTORE_PG_TLS_CERT ALKSTORE_PG_STANDBY_URL ALKSTORE_REQUIRE_PG=1

step "cross-engine suite: SQLite, PostgreSQL extension, plain SQL install, through PgBouncer; upgrades from 0.1.0"
cargo test --locked -p alkstore-tests

step "PostgreSQL races as pg_isolation_regress specs (tests/isolation)"
bash scripts/isolation.sh

step "the Rust facade on SQLite, PostgreSQL and PostgreSQL through PgBouncer: contract, wake-ups, workers, crashes, load, restarts; the async store and worker, the async handles on sqlx (PostgreSQL, SQLite) and tokio-postgres"
cargo test --locked -p alkstore --all-features

step "the alkstore command-line tool and its Prometheus exporter on SQLite and PostgreSQL"
cargo test --locked -p alkstore-cli

step "the web dashboard (alkstore web): its JSON API on SQLite and both PostgreSQL installs, and headless chromium driving the pages (screenshots: ALK_SCREENSHOTS=docs/screenshots)"
ALKSTORE_REQUIRE_BROWSER=1 cargo test --locked -p alkstore-web

step "the relay (alkstore relay) to webhooks, Redis Streams, NATS JetStream and RabbitMQ on SQLite and PostgreSQL, against redis-server, nats-server and RabbitMQ processes the tests start on loopback ports"
# Eight test threads, not one per core: the relay's tests mostly wait (a
# killed relay's claims expire after 60 s, a broker stays down 10 s), and
# two at a time made this step take 7 minutes instead of 3.
ALKSTORE_REQUIRE_RELAY=1 cargo test --locked -p alkstore-relay -- --test-threads=8

step "the relay's example against each sink (docs/relay.md): a webhook, Redis, NATS JetStream and RabbitMQ started by scripts/brokers.sh"
# An assignment, so that a broker that does not start ends the run here.
urls=$(bash scripts/brokers.sh start)
eval "$urls"
for sink in http://127.0.0.1:0/hook "$ALK_REDIS_URL" "$ALK_NATS_URL" "$ALK_AMQP_URL"; do
  cargo run --locked -q -p alkstore-relay --example relay -- "$sink" | tee "$log.relay"
  diff -u relay/examples/relay.expected.txt "$log.relay"
done
bash scripts/brokers.sh stop

step "job features, schedules and workflow examples on PostgreSQL"
cargo run --locked -q -p alkstore --example job_features "$ALKSTORE_PG_URL" | check_features
cargo run --locked -q -p alkstore --example schedules "$ALKSTORE_PG_URL" | tee "$log.schedules"
grep -q '^ran job [0-9]* with {"report":"sales"}$' "$log.schedules"
cargo run --locked -q -p alkstore --example workflow "$ALKSTORE_PG_URL" | tee "$log.workflow"
diff -u facade/examples/workflow.expected.txt "$log.workflow"

step "async Rust (docs/rust.md): cargo run -p alkstore --features sqlx-postgres --example async_sqlx"
# sqlx wants a host in its URL, even when ?host= names the socket directory.
cargo run --locked -q -p alkstore --features sqlx-postgres --example async_sqlx -- \
  "${ALKSTORE_PG_URL/@\//@localhost/}" | tee "$log.async"
grep -q '^signed up with welcome job [0-9]*$' "$log.async"
grep -q '^welcomed "ada-[0-9]*@example.com"$' "$log.async"
grep -q '^signup welcomed: true$' "$log.async"

step "examples: Python and Node programs on SQLite and PostgreSQL"
bash examples/run.sh

echo
du -sh target | awk '{print "target/: " $1}'
df -h . | tail -1 | awk '{print "disk after: " $4 " free"}'
echo "all suites passed"
summary
