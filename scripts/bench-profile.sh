#!/usr/bin/env bash
# Where the server's CPU goes at eight clients: `perf record` of the whole
# machine while pgbench runs one operation through alkstore and through its
# closest peer, then the share of samples under the functions that tell the
# two apart (the PL/pgSQL layer, the statements it runs, the claim's index
# scan, executor start-up, index inserts, commit).
#
#   scripts/bench-profile.sh [seconds]    (default 5; needs perf and root)
#
# ALK_PROFILE_OP: claim (default) — claim + ack of one job, two
# transactions as a worker runs them, beside graphile-worker's own
# statements (the peer fastest at it); enqueue — one alk_enqueue per
# transaction beside pgmq's send (the job queue) and PgQ's insert_event (an
# event log's append: what a row without per-job state costs).
#
# Needs the cluster running with the extension installed and no standby
# streaming (scripts/postgres.sh standby-stop). Commits do not wait for the
# disk (synchronous_commit=off): the CPU each system spends.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
db=alkstore_profile
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v perf >/dev/null || { echo "bench-profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }

. scripts/lib/bench-common.sh # fresh_db
fresh_db $db
scripts/bench-peers.sh postgres $db >/dev/null
jobs=$((secs * 2 * 8000)) # more than either claims in the run
psql -X -q -v ON_ERROR_STOP=1 -d $db <<SQL >/dev/null
SELECT count(alk_enqueue_batch('work', NULL, (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i)))
  FROM generate_series(1, $jobs / 1000);
SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('work', json_build_object('n', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, $jobs) i));
SELECT pgmq.create('enq'), pgq.create_queue('enq');
VACUUM ANALYZE alkstore.jobs; VACUUM ANALYZE graphile_worker._private_jobs; CHECKPOINT;
SQL
. scripts/lib/bench-graphile.sh # gw_claim
task=$(psql -X -q -At -d $db -c "SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'work'")
payload='{"user": 42, "plan": "pro"}'
printf '%s\n' "SELECT coalesce(max(id), 0) AS id FROM alk_claim('work', 'w', 1) \gset
SELECT alk_ack(:id, 'w');" > "$work/alkstore-claim.sql"
printf '%s\n' "$(gw_claim 1 "$task") SELECT coalesce(max(id), 0) AS id FROM c \gset
DELETE FROM graphile_worker._private_jobs AS jobs WHERE id = :id::bigint;" > "$work/graphile-claim.sql"
printf '%s\n' "SELECT alk_enqueue('enq', NULL, '$payload');" > "$work/alkstore-enqueue.sql"
printf '%s\n' "SELECT pgmq.send('enq', '$payload');" > "$work/pgmq-enqueue.sql"
printf '%s\n' "SELECT pgq.insert_event('enq', 'job', '$payload');" > "$work/pgq-enqueue.sql"

# Children's share (each function with everything it calls) of the
# samples of postgres processes.
shown='PortalRun|fmgr_security_definer|plpgsql_exec_function|SPI_execute_plan_extended|btgettuple|_bt_first'
shown+='|standard_ExecutorStart|ExecInitNode|GetCachedPlan|CommitTransactionCommand|ExecInsertIndexTuples|AtEOXact_GUC'
shown+='|ExecInsert|heap_insert|ExecMakeTableFunctionResult|ExecEvalFunc|RecordTransactionCommit|XLogInsert'
op=${ALK_PROFILE_OP:-claim}
case $op in
  claim) systems=(alkstore graphile) ;;
  enqueue) systems=(alkstore pgmq pgq) ;;
  *) echo "bench-profile.sh: ALK_PROFILE_OP is claim or enqueue" >&2; exit 1 ;;
esac
for sys in "${systems[@]}"; do
  PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -T $((secs + 2)) -c 8 -j 8 -f "$work/$sys-$op.sql" $db \
    > "$work/$sys.out" 2>&1 &
  sleep 1
  perf record -F 997 -a -g -o "$work/$sys.data" -- sleep "$secs" >/dev/null 2>&1
  wait
  echo "$sys: $(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$work/$sys.out") transactions/s ($op)"
  perf report -i "$work/$sys.data" --children --comm postgres --sort dso,symbol -g none --stdio 2>/dev/null |
    awk -v re="^($shown)\$" '$4 == "[.]" && $5 ~ re { printf "  %-28s %s\n", $5, $1 }'
done
psql -X -q -d postgres -c "DROP DATABASE $db"
