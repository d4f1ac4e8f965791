#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian 12 machine, as root.
# Idempotent: anything already present is left alone, so a second run is fast.
set -euo pipefail

need_apt=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# The SQLite engine's shell and Python round trips use Debian's clients.
# The examples use Debian's python3 (venv) and Node.js with npm.
for pkg in sqlite3 python3 python3-venv libsqlite3-dev; do
  have "$pkg" || need_apt+=("$pkg")
done

if [ "${ALK_SKIP_POSTGRES:-0}" != 1 ]; then
  # PostgreSQL 15 server plus what pgrx builds against. The dev headers are
  # pinned to the installed server's version: an unpinned install would
  # upgrade the server underneath the running cluster.
  have postgresql-15 || need_apt+=(postgresql-15)
  # pgbouncer: the suites also run through it in transaction-pooling mode.
  # postgresql-15-cron: the pg_cron recipe for alk_maintain is tested.
  for pkg in libclang-dev clang pkg-config sudo pgbouncer postgresql-15-cron; do
    have "$pkg" || need_apt+=("$pkg")
  done
fi

command -v npm >/dev/null || need_apt+=(nodejs npm)

# The web dashboard's browser tests: headless chromium over WebDriver.
# The relay's tests start real brokers of their own: Redis, NATS
# (JetStream) and a RabbitMQ node; the packages' services are never started.
for pkg in chromium chromium-driver redis-server nats-server rabbitmq-server; do
  have "$pkg" || need_apt+=("$pkg")
done

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ "${ALK_SKIP_POSTGRES:-0}" != 1 ]; then
  server=$(dpkg-query -W -f='${Version}' postgresql-15)
  if [ "$(dpkg-query -W -f='${Version}' postgresql-server-dev-15 2>/dev/null || true)" != "$server" ]; then
    echo "setup: apt-get install postgresql-server-dev-15=$server"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-server-dev-15=$server" >/dev/null
  fi
  if ! cargo pgrx --version 2>/dev/null | grep -q "0.18.1"; then
    echo "setup: cargo install cargo-pgrx 0.18.1 (a few minutes)"
    cargo install cargo-pgrx --version =0.18.1 --locked --quiet
  fi
  if ! grep -qs 'pg15' "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    echo "setup: cargo pgrx init --pg15"
    cargo pgrx init --pg15 /usr/lib/postgresql/15/bin/pg_config >/dev/null
  fi
fi
echo "setup: done"
