#!/usr/bin/env bash
# Helpers for the local PostgreSQL 15 cluster used by the test suite
# (Debian's "15/main", as root). Subcommands:
#   start     start the cluster and give root a superuser role
#   install   build the release extension into the server and restart it;
#             also the frozen install scripts (0.1.0, 0.2.0), so that the upgrade
#             tests can CREATE EXTENSION alkstore VERSION '0.1.0'; the library is
#             preloaded, with a maintenance worker for alkstore_test_worker only
#             (conf.d/alkstore.conf): the other test databases see no chore
#             they did not call

#   testdbs   (re)create the test databases: one with CREATE EXTENSION,
#             one with the plain SQL install, one served by the maintenance
#             worker; prints their URLs
#   standby   a hot standby of the cluster (pg_basebackup, streaming
#             replication through a replication slot, so that the primary
#             keeps the WAL it has not sent, across its restarts) on port
#             5433, made once and started if it is not running; prints its
#             URL for the extension's test database
#   standby-stop  stop that standby and drop its slot (benchmarks: it wakes
#             a WAL sender on every commit, which costs a 2-core machine
#             about a third of its commits per second; a slot nobody reads
#             would keep their WAL forever)
set -euo pipefail
cd "$(dirname "$0")/.."
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
as_postgres() { (cd / && sudo -u postgres "$@"); }

case "${1:-}" in
  start)
    pg_ctlcluster 15 main start 2>/dev/null || true
    for _ in $(seq 1 30); do pg_isready -q && break; sleep 1; done
    pg_isready
    as_postgres psql -X -q -tc "SELECT 1 FROM pg_roles WHERE rolname = 'root'" | grep -q 1 ||
      as_postgres createuser --superuser root
    psql -X -q -d postgres -tc "SELECT 1 FROM pg_database WHERE datname = 'root'" | grep -q 1 ||
      createdb root
    ;;
  install)
    cargo xtask verify
    cargo pgrx install -p alkstore-pg --pg-config "$PG_CONFIG" --release
    for f in sql/frozen/*/alkstore--[0-9]*[0-9].sql; do
      install -m 644 "$f" "$("$PG_CONFIG" --sharedir)/extension/"
    done
    # Written after the library is in place: the server refuses to start
    # when a preload library is missing.
    cat > /etc/postgresql/15/main/conf.d/alkstore.conf <<'CONF'
shared_preload_libraries = 'alkstore,pg_cron'
# pg_cron runs its jobs in background workers (no password needed to
# connect): tests/tests/maintain.rs runs alk_maintain from it as the
# operating docs' recipe does. Room for them beside alkstore's workers; the
# standby needs at least as many (its settings below).
cron.database_name = 'postgres'
cron.use_background_workers = on
max_worker_processes = 16
alkstore.maintenance_databases = 'alkstore_test_worker'
# Chores every 100 ms; streams only when a commit wakes the worker (the
# fallback interval is long, so a missed wake-up fails the tests).
alkstore.sweep_interval_ms = 100
alkstore.schedule_interval_ms = 100
alkstore.prune_interval_ms = 100
alkstore.sequence_interval_ms = 30000
# No worker started on use (the default): the test databases other than
# alkstore_test_worker must stay without one; tests/tests/maintenance.rs
# turns it on for a database of its own.
alkstore.maintenance_on_use = off
CONF
    # Backends that loaded an older alkstore.so must not keep running.
    pg_ctlcluster 15 main restart
    for _ in $(seq 1 30); do pg_isready -q && break; sleep 1; done
    ;;
  testdbs)
    plain=$(cargo xtask plain-sql)
    for db in alkstore_test_ext alkstore_test_plain alkstore_test_worker; do
      psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
    done
    psql -X -q -v ON_ERROR_STOP=1 -d alkstore_test_ext -c "CREATE EXTENSION alkstore"
    psql -X -q -v ON_ERROR_STOP=1 -d alkstore_test_worker -c "CREATE EXTENSION alkstore"
    psql -X -q -v ON_ERROR_STOP=1 -d alkstore_test_plain -f "$plain"
    echo "ALKSTORE_PG_URL='postgresql://$(id -un)@/alkstore_test_ext?host=/var/run/postgresql'"
    echo "ALKSTORE_PG_PLAIN_URL='postgresql://$(id -un)@/alkstore_test_plain?host=/var/run/postgresql'"
    echo "ALKSTORE_PG_WORKER_URL='postgresql://$(id -un)@/alkstore_test_worker?host=/var/run/postgresql'"
    # Over TCP, for the TLS tests: the cluster's own certificate (Debian's
    # snakeoil, ssl = on), and a password for the test role (pg_hba asks for
    # one on TCP).
    psql -X -q -d postgres -c "ALTER ROLE $(id -un) PASSWORD 'alkstore-tests'"
    echo "ALKSTORE_PG_TLS_URL='postgresql://$(id -un):alkstore-tests@127.0.0.1:5432/alkstore_test_ext'"
    echo "ALKSTORE_PG_TLS_CERT='$(psql -X -q -At -d postgres -c 'SHOW ssl_cert_file')'"
    ;;
  standby)
    dir=/var/lib/postgresql/alkstore-standby
    pg_ctl=/usr/lib/postgresql/15/bin/pg_ctl
    slot=alkstore_test_standby
    # Streaming through its slot, and received what the primary has written:
    # a receiver that starts and fails at once (the primary recycled the WAL
    # it needs, or the slot is gone) shows as streaming for a moment.
    streaming() {
      local lsn
      lsn=$(psql -X -q -At -d postgres -c "SELECT pg_current_wal_lsn()")
      for _ in $(seq 1 40); do
        psql -X -q -At -p 5433 -d postgres -c \
          "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'
                                                      AND pg_last_wal_receive_lsn() >= '$lsn'" 2>/dev/null |
          grep -qx 1 &&
          psql -X -q -At -d postgres -c \
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot' AND active" |
          grep -qx 1 && return 0
        sleep 0.25
      done
      return 1
    }
    if [ -f "$dir/standby.signal" ]; then
      pg_isready -q -p 5433 || as_postgres $pg_ctl -D "$dir" -l "$dir.log" -w start >/dev/null || true
      # One that fell too far behind (the primary recycled its WAL) is made again.
      streaming || { as_postgres $pg_ctl -D "$dir" -m immediate stop >/dev/null 2>&1 || true; as_postgres rm -rf "$dir"; }
    fi
    if [ ! -f "$dir/standby.signal" ]; then
      as_postgres rm -rf "$dir"
      # -C -S: the primary keeps every segment the standby has not received,
      # so a restart of the primary (the suites make some) or a burst of WAL
      # while the standby reconnects never leaves it behind for good.
      psql -X -q -At -d postgres -c \
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null
      as_postgres pg_basebackup -D "$dir" -R -X stream -c fast -C -S "$slot"
      # Debian keeps the primary's settings in /etc: the standby's own.
      as_postgres sh -c "cat > '$dir/postgresql.conf'" <<CONF
port = 5433
unix_socket_directories = '/var/run/postgresql'
hba_file = '/etc/postgresql/15/main/pg_hba.conf'
hot_standby = on
max_worker_processes = 16
CONF
      as_postgres $pg_ctl -D "$dir" -l "$dir.log" -w start >/dev/null
      streaming || { echo "the standby does not stream: $dir.log" >&2; exit 1; }
    fi
    echo "ALKSTORE_PG_STANDBY_URL='postgresql://$(id -un)@/alkstore_test_ext?host=/var/run/postgresql&port=5433'"
    ;;
  standby-stop)
    dir=/var/lib/postgresql/alkstore-standby
    if pg_isready -q -p 5433; then
      as_postgres /usr/lib/postgresql/15/bin/pg_ctl -D "$dir" -m fast -w stop >/dev/null
    fi
    # Its slot goes too: the next "standby" finds it missing and makes a new
    # copy.
    psql -X -q -At -d postgres -c \
      "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
        WHERE slot_name = 'alkstore_test_standby' AND NOT active" >/dev/null
    ;;
  *)
    echo "usage: scripts/postgres.sh start|install|testdbs|standby|standby-stop" >&2
    exit 2
    ;;
esac
