#!/usr/bin/env bash
# Jobs worked per second by each system's own worker (issue 59 item 3), on
# the local cluster: ALK_BENCH_JOBS no-op jobs (default 20,000) added in
# one go, then drained by one worker process at concurrency 1, 8 and 32,
# jobs/s from the worker's start to the last job's completion, the median
# of ALK_BENCH_ROUNDS (default 3); each system in a database of its own,
# with commits waiting for the WAL flush (synchronous_commit on) and not
# (off). Columns:
#   alk          alkstore's blocking Worker (facade/benches/drain.rs), its
#                defaults (a local queue of its concurrency, contract v1.3 §P)
#   alk pace     the same with prefetch_by_pace (the local queue sized by
#                what the handlers finish in 100 ms)
#   async        alkstore's AsyncWorker (sqlx), its defaults
#   async pace   the same with prefetch_by_pace
#   floor        one thread: alk_claim 32 + alk_ack_batch (the SQL the workers are measured against)
#   gw           graphile-worker 0.18.0's run(), its defaults
#   gw batched   the same with the batching its docs describe (localQueue 500, completeJobBatchDelay 0)
# A third, SQLite ("sqlite" in ALK_BENCH_SYSTEMS): alkstore's blocking
# Worker (its defaults, and prefetch_by_pace) on a file against the loop a
# user would write by hand on a plain table (claim 32 in one UPDATE …
# RETURNING, delete them in one transaction; facade/benches/drain.rs
# sqlite-hand), both with WAL and synchronous NORMAL; the floor, one
# thread calling alk_claim 32 + alk_ack_batch; best/hand, floor/hand.
# Then a second table, the Python and Node workers the same way (one
# process each; each drain script's header says what it measures and with
# which settings):
#   alk node       alkstore's Node worker, work() (scripts/lib/drain-alkstore.js):
#                  one work() with concurrency C on one pg Client, prefetch 32
#   pg-boss        pg-boss 10.4.2 (the newest for Node 20), C work() workers,
#                  batchSize 500, pollingIntervalSeconds 0.5 (drain-pgboss.js)
#   node ratio     alk node / pg-boss
#   alk python     alkstore's Python worker, work() (drain-alkstore.py): C
#                  threads on a psycopg connection each, prefetch=32
#   procrastinate  procrastinate 3.10.0's worker, concurrency=C (drain-procrastinate.py)
#   pgqueuer       pgqueuer 1.6.0's worker, concurrency_limit=C, batch_size=C
#                  (drain-pgqueuer.py)
#   python ratio   alk python / the better of procrastinate and pgqueuer
# alkstore's packages come from target/packages (the wheel and the npm
# tarball of packages/build.sh, run here when they are missing or their
# Python or JavaScript differs from the checkout's); the peers, pinned,
# into the peers' directory, each in a directory of its own (the Python
# ones in virtual environments), with its schema installed by its own
# tool in a database of its own. A system that fails to install or to run
# is reported and left out of the rest of the run.
# Needs the cluster with alkstore installed (scripts/postgres.sh install),
# node and python3; the peers are installed by scripts/bench-peers.sh's
# directory ($ALK_PEERS_DIR). Not part of CI. docs/benchmarks.md, "Workers
# against the peers' workers".
#   scripts/bench-workers.sh   (ALK_BENCH_CONCURRENCY="8 32" ALK_BENCH_MODES=off to narrow it)
# ALK_BENCH_SYSTEMS (default "rust node python sqlite") narrows the systems:
# rust (the first table, whole), node (alk-node pg-boss), python (alk-python
# procrastinate pgqueuer), or those names one by one, sqlite (the third
# table); a table none of whose systems is named is not run (without rust
# or sqlite, no cargo build). Also
# ALK_BENCH_PACKAGES: another directory to take alkstore's wheel and tarball
# from, used as it is; ALK_BENCH_PYTHON: the Python of the virtual
# environments (default python3); ALK_BENCH_TIMEOUT: seconds a drain of the
# second table may take before it counts as failed (default 900).
# ALK_BENCH_LATENCY=RATE measures pickup latency instead of the tables
# above: each system's worker (the same drains, ALK_LATENCY=1) waits while
# one enqueuer (facade/benches/drain.rs, kind enqueue-at) adds RATE jobs a
# second for ALK_BENCH_SECONDS (default 10), one statement and one
# transaction each, the same SQL path for every system (alk_enqueue,
# graphile_worker.add_job, an INSERT into pgboss.job); each job carries the
# time its enqueue was sent, and the worker's handler the time it started:
# p50/p99 in ms per system, and alkstore's best p99 over the best peer's.
# The Python peers are not in it (their enqueue is their Python client's).
#   ALK_BENCH_LATENCY=500 ALK_BENCH_CONCURRENCY=8 ALK_BENCH_SYSTEMS="rust node alk-python" scripts/bench-workers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ALK_BENCH_JOBS:-20000}
rounds=${ALK_BENCH_ROUNDS:-3}
concurrencies=${ALK_BENCH_CONCURRENCY:-"1 8 32"}
modes=${ALK_BENCH_MODES:-"on off"}
dir=${ALK_PEERS_DIR:-$HOME/.cache/alkstore-peers}
host=${PGHOST:-/var/run/postgresql}
user=${PGUSER:-$(id -un)}
python=${ALK_BENCH_PYTHON:-python3}
latency=${ALK_BENCH_LATENCY:-} seconds=${ALK_BENCH_SECONDS:-10}
[[ -z $latency || ($latency =~ ^[1-9][0-9]*$ && $seconds =~ ^[1-9][0-9]*$) ]] ||
  { echo "bench-workers.sh: ALK_BENCH_LATENCY and ALK_BENCH_SECONDS: whole numbers above 0" >&2; exit 2; }
pgboss_version=10.4.2 procrastinate_version=3.10.0 pgqueuer_version=1.6.0
psycopg_pin="psycopg[binary]==3.3.9" asyncpg_pin="asyncpg==0.32.0"
# (a host name before the socket directory: sqlx refuses an empty one)
url() { echo "postgresql://$user@localhost/$1?host=$host"; }
q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$@"; }
say() { echo "bench-workers.sh: $*" >&2; }

# The systems of this run: the first table ("rust") and those of the second.
second_all="alk-node pg-boss alk-python procrastinate pgqueuer"
named=""
for word in ${ALK_BENCH_SYSTEMS:-rust node python sqlite}; do
  case $word in
    rust) named="$named rust" ;;
    sqlite) named="$named sqlite" ;;
    node) named="$named alk-node pg-boss" ;;
    python) named="$named alk-python procrastinate pgqueuer" ;;
    alk-node | pg-boss | alk-python | procrastinate | pgqueuer) named="$named $word" ;;
    *) say "ALK_BENCH_SYSTEMS: no system '$word' (rust, node, python, sqlite, $second_all)"; exit 2 ;;
  esac
done
want() { [[ " $named " == *" $1 "* ]]; }
second="" # the second table's systems still in the run
for sys in $second_all; do want "$sys" && second="$second $sys"; done
in_run() { [[ " $second " == *" $1 "* ]]; }
leave_out() { # system why
  say "$1 is left out of this run: $2"
  second=$(echo " $second " | sed "s/ $1 / /")
}

mkdir -p "$dir"
dbs=""
if want rust || in_run alk-node || in_run alk-python; then dbs="$dbs bw_alk"; fi
want rust && dbs="$dbs bw_gw"
for db in $dbs; do
  q postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
done
[[ " $dbs " == *" bw_alk "* ]] && q bw_alk -c "CREATE EXTENSION alkstore"

fill_alk() { # queue
  q bw_alk -c "SELECT sum(cardinality(alk_enqueue_batch('$1', NULL,
      (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(k * 1000 + 1, k * 1000 + 1000) i))))
    FROM generate_series(0, $jobs / 1000 - 1) k" >/dev/null
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

drain=""
build_drain() { # facade/benches/drain.rs, built once: a source edited while this runs changes nothing measured
  [ -n "$drain" ] && return 0
  drain=$(cargo bench --locked -p alkstore --features sqlx-postgres --bench drain --no-run 2>&1 |
    grep -o 'target/release/deps/drain-[0-9a-f]*' | tail -1)
  [ -x "$drain" ] || { echo "could not build facade/benches/drain.rs" >&2; exit 1; }
}

if want rust; then
  [ -d "$dir/node_modules/graphile-worker" ] ||
    (cd "$dir" && npm install --silent --no-save --no-package-lock graphile-worker@0.18.0 >/dev/null)
  (cd "$dir" && PGHOST=$host PGUSER=$user PGDATABASE=bw_gw npx --no-install graphile-worker --schema-only >/dev/null)
  build_drain
  [ -n "$latency" ] || echo "$jobs no-op jobs per run, jobs/s, median of $rounds; $(nproc) cores"

  alk() { # kind concurrency -> jobs/s
    local queue="bw-$1-$2-$RANDOM$RANDOM"
    fill_alk "$queue"
    q bw_alk -c "VACUUM ANALYZE alkstore.jobs" 2>/dev/null
    ALK_DRAIN_URL=$(url bw_alk) ALK_DRAIN_QUEUE=$queue ALK_DRAIN_JOBS=$jobs ALK_DRAIN_CONCURRENCY=$2 \
      ALK_DRAIN_KIND=$1 "$drain" --bench | tail -1
  }
  gw() { # default|batched concurrency -> jobs/s
    q bw_gw -c "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('work', json_build_object('n', i),
        NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, $jobs) i))" >/dev/null
    q bw_gw -c "VACUUM ANALYZE graphile_worker._private_jobs"
    NODE_PATH=$dir/node_modules node scripts/lib/drain-graphile.js "$(url bw_gw)" "$jobs" "$2" "$1"
  }

  [ -n "$latency" ] || printf '%-6s %3s  %9s %9s %9s %10s %9s %9s %10s  %8s %8s\n' commit c alk "alk pace" \
    async "async pace" floor gw "gw batched" best/gw best/floor
  [ -n "$latency" ] || for mode in $modes; do
    for db in bw_alk bw_gw; do q postgres -c "ALTER DATABASE $db SET synchronous_commit = $mode"; done
    for c in $concurrencies; do
      a=""; ap=""; as=""; asp=""; f=""; g=""; gb=""
      for _ in $(seq "$rounds"); do
        a="$a $(alk blocking "$c")"
        ap="$ap $(alk blocking-pace "$c")"
        as="$as $(alk async "$c")"
        asp="$asp $(alk async-pace "$c")"
        f="$f $(alk floor 1)"
        g="$g $(gw default "$c")"
        gb="$gb $(gw batched "$c")"
      done
      a=$(echo "$a" | median); ap=$(echo "$ap" | median); as=$(echo "$as" | median)
      asp=$(echo "$asp" | median); f=$(echo "$f" | median)
      g=$(echo "$g" | median); gb=$(echo "$gb" | median)
      # alkstore's best worker against graphile-worker's best and the floor.
      ours=$(printf '%s\n' "$a" "$ap" "$as" "$asp" | sort -n | tail -1)
      best=$((g > gb ? g : gb))
      printf '%-6s %3s  %9s %9s %9s %10s %9s %9s %10s  %7.2fx %7.2fx\n' "$mode" "$c" "$a" "$ap" "$as" "$asp" \
        "$f" "$g" "$gb" "$(echo "$ours / $best" | bc -l)" "$(echo "$ours / $f" | bc -l)"
    done
  done
fi

# The second table: the Python and Node workers, alkstore's and the peers'.
# Each setup returns non-zero (its system then left out) rather than exit.
packages=${ALK_BENCH_PACKAGES:-target/packages}
tgz="" whl=""
find_packages() {
  tgz=$(ls "$packages"/alkstore-*.tgz 2>/dev/null | tail -1)
  whl=$(ls "$packages"/alkstore-*.whl 2>/dev/null | tail -1)
}
packages_current() { # the packages hold the checkout's JavaScript and Python
  [ -n "$tgz" ] && [ -n "$whl" ] &&
    tar -xzOf "$tgz" package/index.js | cmp -s - packages/node/index.js &&
    "$python" -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read("alkstore/__init__.py"))' \
      "$whl" | cmp -s - packages/python/alkstore/__init__.py
}
alk_packages() {
  find_packages
  packages_current && return 0
  if [ -n "${ALK_BENCH_PACKAGES:-}" ]; then
    [ -n "$tgz" ] && [ -n "$whl" ] || { say "no alkstore-*.tgz and alkstore-*.whl in $packages"; return 1; }
    say "the packages in $packages differ from the checkout's packages/: measured as they are"
    return 0
  fi
  say "target/packages is missing or older than packages/: bash packages/build.sh"
  bash packages/build.sh >&2 || { say "packages/build.sh failed"; return 1; }
  find_packages
  packages_current || { say "packages/build.sh made no packages matching the checkout"; return 1; }
}
stamp() { sha256sum "$1" | cut -c1-64; }
node_dir() { # directory packages... : a directory of its own (npm prunes what a --no-save install did not name)
  local d=$1
  shift
  rm -rf "$d" && mkdir -p "$d" && echo '{"private": true}' > "$d/package.json" &&
    (cd "$d" && npm install --silent --no-save --no-package-lock "$@" >/dev/null)
}
venv() { # directory requirements...
  local d=$1
  shift
  rm -rf "$d" && "$python" -m venv "$d" && "$d/bin/pip" install -q --disable-pip-version-check "$@" >&2
}
setup_alk_node() {
  local d=$dir/alkstore-node s
  s=$(stamp "$tgz")
  [ "$(cat "$d/.installed" 2>/dev/null)" = "$s" ] && return 0
  node_dir "$d" "$(realpath "$tgz")" pg@8 && echo "$s" > "$d/.installed"
}
setup_alk_python() {
  local d=$dir/py-alkstore s
  s=$(stamp "$whl")
  [ "$(cat "$d/.installed" 2>/dev/null)" = "$s" ] && return 0
  venv "$d" "$(realpath "$whl")" "$psycopg_pin" && echo "$s" > "$d/.installed"
}
setup_pgboss() {
  local d=$dir/pg-boss-$pgboss_version
  [ -e "$d/.installed" ] || { node_dir "$d" "pg-boss@$pgboss_version" && touch "$d/.installed"; } || return 1
  q postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS bw_pgboss" \
    -c "CREATE DATABASE bw_pgboss" &&
    NODE_PATH=$d/node_modules node scripts/lib/drain-pgboss.js "$(url bw_pgboss)" 0 0 install
}
setup_procrastinate() {
  local d=$dir/py-procrastinate-$procrastinate_version
  [ -e "$d/.installed" ] ||
    { venv "$d" "procrastinate==$procrastinate_version" "$psycopg_pin" && touch "$d/.installed"; } || return 1
  q postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS bw_proc" \
    -c "CREATE DATABASE bw_proc" &&
    "$d/bin/python" scripts/lib/drain-procrastinate.py "$(url bw_proc)" 0 0 install
}
setup_pgqueuer() {
  local d=$dir/py-pgqueuer-$pgqueuer_version
  [ -e "$d/.installed" ] ||
    { venv "$d" "pgqueuer[asyncpg]==$pgqueuer_version" "$asyncpg_pin" && touch "$d/.installed"; } || return 1
  q postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS bw_pgq" \
    -c "CREATE DATABASE bw_pgq" &&
    "$d/bin/python" scripts/lib/drain-pgqueuer.py "$(url bw_pgq)" 0 0 install
}
if in_run alk-node || in_run alk-python; then
  if ! alk_packages; then
    for sys in alk-node alk-python; do in_run $sys && leave_out $sys "no alkstore packages"; done
  fi
fi
in_run alk-node && { setup_alk_node || leave_out alk-node "alkstore's npm package did not install"; }
in_run alk-python && { setup_alk_python || leave_out alk-python "alkstore's wheel did not install"; }
in_run pg-boss && { setup_pgboss || leave_out pg-boss "pg-boss $pgboss_version did not install"; }
in_run procrastinate &&
  { setup_procrastinate || leave_out procrastinate "procrastinate $procrastinate_version did not install"; }
in_run pgqueuer && { setup_pgqueuer || leave_out pgqueuer "pgqueuer $pgqueuer_version did not install"; }

# One drain of SYSTEM at CONCURRENCY -> jobs/s; fills (not timed) first.
# A drain still running after $ALK_BENCH_TIMEOUT s fails (its system left out).
cell() { # system concurrency
  local queue run t=(timeout "${ALK_BENCH_TIMEOUT:-900}")
  case $1 in
    alk-node | alk-python)
      queue="bw-$1-$2-$RANDOM$RANDOM"
      fill_alk "$queue" && q bw_alk -c "VACUUM ANALYZE alkstore.jobs" 2>/dev/null || return 1
      if [ "$1" = alk-node ]; then
        run=(env "NODE_PATH=$dir/alkstore-node/node_modules" node scripts/lib/drain-alkstore.js)
      else
        run=("$dir/py-alkstore/bin/python" scripts/lib/drain-alkstore.py)
      fi
      "${t[@]}" "${run[@]}" "$(url bw_alk)" "$jobs" "$2" "$queue" ;;
    pg-boss)
      run=(env "NODE_PATH=$dir/pg-boss-$pgboss_version/node_modules" node scripts/lib/drain-pgboss.js)
      "${t[@]}" "${run[@]}" "$(url bw_pgboss)" "$jobs" 0 fill && q bw_pgboss -c "VACUUM ANALYZE pgboss.job" &&
        "${t[@]}" "${run[@]}" "$(url bw_pgboss)" "$jobs" "$2" ;;
    procrastinate)
      run=("$dir/py-procrastinate-$procrastinate_version/bin/python" scripts/lib/drain-procrastinate.py)
      "${t[@]}" "${run[@]}" "$(url bw_proc)" "$jobs" 0 fill && q bw_proc -c "VACUUM ANALYZE procrastinate_jobs" &&
        "${t[@]}" "${run[@]}" "$(url bw_proc)" "$jobs" "$2" ;;
    pgqueuer)
      run=("$dir/py-pgqueuer-$pgqueuer_version/bin/python" scripts/lib/drain-pgqueuer.py)
      "${t[@]}" "${run[@]}" "$(url bw_pgq)" "$jobs" 0 fill && q bw_pgq -c "VACUUM ANALYZE pgqueuer" &&
        "${t[@]}" "${run[@]}" "$(url bw_pgq)" "$jobs" "$2" ;;
  esac
}
ratio() { # a b -> "a / b" as 1.23x, or - when either is missing
  if [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ]; then
    printf '%.2fx' "$(echo "$1 / $2" | bc -l)"
  else
    echo -
  fi
}
if [ -n "${second// /}" ] && [ -z "$latency" ]; then
  want rust && echo
  echo "Python and Node workers: $jobs no-op jobs per run, jobs/s, median of $rounds; $(nproc) cores"
  printf '%-6s %3s  %9s %9s %10s  %10s %13s %9s %12s\n' commit c "alk node" pg-boss "node ratio" \
    "alk python" procrastinate pgqueuer "python ratio"
  declare -A runs value
  for mode in $modes; do
    for db in bw_alk bw_pgboss bw_proc bw_pgq; do
      [ -n "$(q postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" ] &&
        q postgres -c "ALTER DATABASE $db SET synchronous_commit = $mode"
    done
    for c in $concurrencies; do
      runs=()
      for _ in $(seq "$rounds"); do
        for sys in $second_all; do
          in_run "$sys" || continue
          if r=$(cell "$sys" "$c") && [[ $r =~ ^[0-9]+$ ]]; then
            runs[$sys]="${runs[$sys]:-} $r"
          else
            leave_out "$sys" "its drain failed at commit $mode, concurrency $c (above)"
          fi
        done
      done
      for sys in $second_all; do
        if in_run "$sys"; then value[$sys]=$(echo "${runs[$sys]}" | median); else value[$sys]=-; fi
      done
      py_best=- # the better Python peer
      for sys in procrastinate pgqueuer; do
        v=${value[$sys]}
        [ "$v" = - ] && continue
        if [ "$py_best" = - ] || [ "$v" -gt "$py_best" ]; then py_best=$v; fi
      done
      printf '%-6s %3s  %9s %9s %10s  %10s %13s %9s %12s\n' "$mode" "$c" "${value[alk-node]}" \
        "${value[pg-boss]}" "$(ratio "${value[alk-node]}" "${value[pg-boss]}")" "${value[alk-python]}" \
        "${value[procrastinate]}" "${value[pgqueuer]}" "$(ratio "${value[alk-python]}" "$py_best")"
    done
  done
fi
# The third table: SQLite, the blocking Worker against the loop a user
# would write by hand on a plain table (drain.rs, kinds sqlite,
# sqlite-pace, sqlite-hand), each on a fresh file in a scratch directory.
if want sqlite && [ -z "$latency" ]; then
  build_drain
  scratch=$(mktemp -d)
  sq() { # kind concurrency -> jobs/s
    ALK_DRAIN_URL=$scratch ALK_DRAIN_JOBS=$jobs ALK_DRAIN_CONCURRENCY=$2 ALK_DRAIN_KIND=$1 "$drain" --bench | tail -1
    rm -f "$scratch"/*
  }
  echo
  echo "SQLite: $jobs no-op jobs per run, jobs/s, median of $rounds; $(nproc) cores"
  printf '%3s  %9s %9s %9s %9s  %8s %10s\n' c alk "alk pace" floor hand best/hand floor/hand
  for c in $concurrencies; do
    a="" ap="" f="" h=""
    for _ in $(seq "$rounds"); do
      a="$a $(sq sqlite "$c")"
      ap="$ap $(sq sqlite-pace "$c")"
      f="$f $(sq sqlite-floor 1)"
      h="$h $(sq sqlite-hand "$c")"
    done
    a=$(echo "$a" | median); ap=$(echo "$ap" | median); f=$(echo "$f" | median); h=$(echo "$h" | median)
    printf '%3s  %9s %9s %9s %9s  %7.2fx %9.2fx\n' "$c" "$a" "$ap" "$f" "$h" \
      "$(echo "$((a > ap ? a : ap)) / $h" | bc -l)" "$(echo "$f / $h" | bc -l)"
  done
  rm -rf "$scratch"
fi

# The latency mode: each system's worker waits for jobs that one enqueuer
# (drain.rs, kind enqueue-at: one statement per job, each its own
# transaction, the same for every system) adds at a fixed rate.
if [ -n "$latency" ]; then
  build_drain
  n=$((latency * seconds))
  lat_systems=""
  if want rust; then lat_systems="alk async gw gw-batched"; fi
  for sys in alk-node pg-boss alk-python; do in_run $sys && lat_systems="$lat_systems $sys"; done
  lat_cell() { # system concurrency -> "p50 p99" (ms)
    local queue="bw-lat-$RANDOM$RANDOM" db=bw_alk sql consumer pid out
    sql="SELECT alk_enqueue('$queue', NULL, jsonb_build_object('t', \$1::bigint))"
    case $1 in
      alk | async)
        local kind=latency
        if [ "$1" = async ]; then kind=latency-async; fi
        consumer=(env "ALK_DRAIN_URL=$(url bw_alk)" "ALK_DRAIN_QUEUE=$queue" "ALK_DRAIN_JOBS=$n"
          "ALK_DRAIN_CONCURRENCY=$2" "ALK_DRAIN_KIND=$kind" "$drain" --bench) ;;
      gw | gw-batched)
        db=bw_gw sql="SELECT graphile_worker.add_job('work', json_build_object('t', \$1::bigint))"
        consumer=(env ALK_LATENCY=1 "NODE_PATH=$dir/node_modules" node scripts/lib/drain-graphile.js
          "$(url bw_gw)" "$n" "$2" "$([ "$1" = gw ] && echo default || echo batched)") ;;
      alk-node)
        consumer=(env ALK_LATENCY=1 "NODE_PATH=$dir/alkstore-node/node_modules" node scripts/lib/drain-alkstore.js
          "$(url bw_alk)" "$n" "$2" "$queue") ;;
      alk-python)
        consumer=(env ALK_LATENCY=1 "$dir/py-alkstore/bin/python" scripts/lib/drain-alkstore.py
          "$(url bw_alk)" "$n" "$2" "$queue") ;;
      pg-boss)
        db=bw_pgboss sql="INSERT INTO pgboss.job (name, data) VALUES ('work', jsonb_build_object('t', \$1::bigint))"
        consumer=(env ALK_LATENCY=1 "NODE_PATH=$dir/pg-boss-$pgboss_version/node_modules" node
          scripts/lib/drain-pgboss.js "$(url bw_pgboss)" "$n" "$2") ;;
    esac
    # Jobs a failed cell left (graphile-worker's and pg-boss's queue is
    # always "work") would reach this one's worker with an old t.
    case $db in
      bw_gw) q bw_gw -c "DELETE FROM graphile_worker._private_jobs" ;;
      bw_pgboss) q bw_pgboss -c "DELETE FROM pgboss.job WHERE name = 'work'" ;;
    esac
    out=$(mktemp)
    timeout "$((seconds + 120))" "${consumer[@]}" > "$out" &
    pid=$!
    sleep 5 # its start: connections, LISTEN, its first look for work
    if ALK_DRAIN_URL=$(url $db) ALK_DRAIN_SQL=$sql ALK_DRAIN_JOBS=$n ALK_DRAIN_RATE=$latency \
      ALK_DRAIN_KIND=enqueue-at "$drain" --bench > "$out.behind" && wait "$pid"; then
      echo "$(tail -1 "$out") $(cat "$out.behind")"
    else
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      echo "- - -"
    fi
    rm -f "$out" "$out.behind"
  }
  echo "Pickup latency: $latency jobs/s for $seconds s, each job its own enqueue; p50/p99 in ms (enqueue sent to handler start); $(nproc) cores"
  printf '%-6s %3s' commit c
  for sys in $lat_systems; do printf ' %15s' "$sys"; done
  printf '  %s\n' "alk p99 / best peer's"
  for mode in $modes; do
    for db in bw_alk bw_gw bw_pgboss; do
      [ -n "$(q postgres -c "SELECT 1 FROM pg_database WHERE datname = '$db'")" ] &&
        q postgres -c "ALTER DATABASE $db SET synchronous_commit = $mode"
    done
    for c in $concurrencies; do
      printf '%-6s %3s' "$mode" "$c"
      ours="" theirs=""
      for sys in $lat_systems; do
        read -r p50 p99 behind < <(lat_cell "$sys" "$c")
        # An enqueuer that fell behind its schedule did not hold the rate.
        if [ "$p50" != - ] && [ "$(echo "$behind > 100" | bc)" = 1 ]; then say "$sys: the enqueuer fell $behind ms behind"; fi
        printf ' %15s' "$p50/$p99"
        [ "$p99" = - ] && continue
        case $sys in
          alk | async | alk-node | alk-python)
            if [ -z "$ours" ] || [ "$(echo "$p99 < $ours" | bc)" = 1 ]; then ours=$p99; fi ;;
          *) if [ -z "$theirs" ] || [ "$(echo "$p99 < $theirs" | bc)" = 1 ]; then theirs=$p99; fi ;;
        esac
      done
      if [ -n "$ours" ] && [ -n "$theirs" ]; then printf '  %.2fx\n' "$(echo "$ours / $theirs" | bc -l)"; else echo "  -"; fi
    done
  done
fi

for db in bw_alk bw_gw bw_pgboss bw_proc bw_pgq; do
  q postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db"
done
