#!/usr/bin/env bash
# A local PgBouncer in transaction-pooling mode in front of the test cluster
# (Debian's pgbouncer, port 6432), for the suites that run through a pooler.
#   start   (re)start it; prints ALKSTORE_PG_BOUNCER_URL for the extension's test database
#   stop    stop it
# Transaction pooling hands each transaction to any server connection: what
# a session keeps (LISTEN, SET, prepared statements) does not survive.
set -euo pipefail
dir=/tmp/alkstore-pgbouncer
port=6432
as_postgres() { (cd / && sudo -u postgres "$@"); }

stop() {
  if [ -f "$dir/pgbouncer.pid" ]; then
    kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do [ -f "$dir/pgbouncer.pid" ] || break; sleep 0.1; done
  fi
}

case "${1:-}" in
  start)
    stop
    # Debian's own pgbouncer service, if its package started one, holds the port.
    service pgbouncer stop >/dev/null 2>&1 || true
    mkdir -p "$dir"
    # Clients may name any role; PgBouncer logs in to the server as
    # postgres over the socket (peer authentication: it runs as postgres).
    cat > "$dir/pgbouncer.ini" <<INI
[databases]
* = host=/var/run/postgresql port=5432 user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    printf '"%s" ""\n' "$(id -un)" postgres > "$dir/users.txt"
    chown -R postgres "$dir"
    as_postgres pgbouncer -d -q "$dir/pgbouncer.ini"
    for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p $port && break; sleep 0.1; done
    pg_isready -q -h 127.0.0.1 -p $port
    echo "ALKSTORE_PG_BOUNCER_URL='postgresql://$(id -un)@127.0.0.1:$port/alkstore_test_ext'"
    ;;
  stop) stop ;;
  *)
    echo "usage: scripts/pgbouncer.sh start|stop" >&2
    exit 2
    ;;
esac
