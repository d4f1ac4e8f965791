#!/usr/bin/env bash
# Starts (or stops) one of each broker the relay delivers to, on loopback
# ports of their own, for the relay's examples and benchmark; their data
# under /tmp/alkstore-brokers. `start` prints the URLs as shell variables:
#   eval "$(bash scripts/brokers.sh start)"
# The relay's tests start servers of their own and need none of this.
set -euo pipefail
dir=/tmp/alkstore-brokers
REDIS_PORT=${ALK_REDIS_PORT:-16379}
NATS_PORT=${ALK_NATS_PORT:-14222}
AMQP_PORT=${ALK_AMQP_PORT:-15672}

wait_port() {
  for _ in $(seq 1 240); do
    (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.5
  done
  echo "brokers: nothing listens on port $1 after 120 s ($2)" >&2
  exit 1
}

# What RabbitMQ said, when it did not come up: its console and its node log.
rabbit_said() {
  echo "--- $dir/rabbitmq.log" >&2
  tail -n 30 "$dir/rabbitmq.log" >&2 || true
  for f in "$dir"/rabbitmq/log/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
  done
  true
}

# Starts the node and waits until it listens on its AMQP port. A node that
# exits first (a port taken, a node of the same name) is started once more
# with a fresh directory; what it printed goes to stderr either way.
start_rabbit() {
  local try pid
  for try in 1 2; do
    rm -rf "$dir/rabbitmq"
    mkdir -p "$dir/rabbitmq"
    echo '[].' > "$dir/rabbitmq/plugins"
    # The script beside the broker runs as the caller (the one in /usr/sbin
    # switches to the rabbitmq user, who cannot write here).
    pid=$( rabbit_env; nohup /usr/lib/rabbitmq/bin/rabbitmq-server > "$dir/rabbitmq.log" 2>&1 & echo $! )
    for _ in $(seq 1 360); do
      (echo > "/dev/tcp/127.0.0.1/$AMQP_PORT") 2>/dev/null && return 0
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    echo "brokers: rabbitmq-server (try $try) is not listening on port $AMQP_PORT" >&2
    rabbit_said
    # Gone before the next try takes its name and ports: asked, then made.
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    pkill -KILL -f "RABBITMQ_NODENAME|-sname alkbrokers|alkbrokers@localhost" 2>/dev/null || true
    sleep 1
  done
  exit 1
}

# The node's Erlang distribution port sits next to its AMQP port: below the
# range the kernel hands out to outgoing connections (32768 and up) and
# outside rabbitmqctl's own 35672-35682.
rabbit_env() {
  export RABBITMQ_NODENAME=alkbrokers@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT=$AMQP_PORT RABBITMQ_DIST_PORT=$((AMQP_PORT + 1)) \
    RABBITMQ_MNESIA_BASE=$dir/rabbitmq/mnesia RABBITMQ_LOG_BASE=$dir/rabbitmq/log \
    RABBITMQ_ENABLED_PLUGINS_FILE=$dir/rabbitmq/plugins RABBITMQ_PID_FILE=$dir/rabbitmq/pid \
    ERL_CRASH_DUMP=$dir/erl_crash.dump HOME=$dir/rabbitmq
}

case "${1:-}" in
  start)
    mkdir -p "$dir/nats"
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" >/dev/null
    nohup nats-server -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$dir/nats" -P "$dir/nats.pid" \
      > "$dir/nats.log" 2>&1 &
    wait_port "$REDIS_PORT" redis-server
    wait_port "$NATS_PORT" nats-server
    start_rabbit
    echo "ALK_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
    echo "ALK_NATS_URL=nats://127.0.0.1:$NATS_PORT"
    echo "ALK_AMQP_URL=amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"
    ;;
  stop)
    [ -f "$dir/redis.pid" ] && kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
    [ -f "$dir/nats.pid" ] && kill "$(cat "$dir/nats.pid")" 2>/dev/null || true
    ( rabbit_env; /usr/lib/rabbitmq/bin/rabbitmqctl -q stop >/dev/null 2>&1 ) || true
    # The port mapper the node started; it refuses while any node is registered.
    epmd -kill >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
