#!/usr/bin/env bash
# What calling through a function costs: claim + ack of one job (two
# transactions) with graphile-worker's statements and the raw SQL sent as
# they are, and the very same statements inside SECURITY DEFINER PL/pgSQL
# functions with a pinned search_path -- the form contract v1.1 §A1 gives
# every alkstore call -- beside alk_claim + alk_ack. Not part of CI.
#
#   scripts/bench-function-form.sh [seconds-per-cell]    (default 4)
#
# Needs what scripts/bench-postgres.sh needs, and the peers
# (scripts/bench-peers.sh installs them into a database of its own here).
# ALK_BENCH_ROUNDS (default 4) runs of each system, the order reversed each
# round, each cell after a VACUUM with autovacuum off; prints each system's
# median ops/s and its runs. pgbench takes PGOPTIONS, e.g.
# PGOPTIONS='-c synchronous_commit=off'. docs/benchmarks.md ("What calling
# through a function costs") has the method and a run.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-4}
rounds=${ALK_BENCH_ROUNDS:-4}
db=alkstore_bench_form
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
psql -X -q -v ON_ERROR_STOP=1 -d $db -c "CREATE EXTENSION alkstore" \
  -c "CREATE TABLE raw_jobs (LIKE alkstore.jobs INCLUDING ALL)"
scripts/bench-peers.sh postgres $db
psql -X -q -v ON_ERROR_STOP=1 -d $db -c "SELECT graphile_worker.add_job('work', '{}')" \
  -c "DELETE FROM graphile_worker._private_jobs" >/dev/null
task=$(psql -X -q -At -d $db -c "SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'work'")

# Each claim is one statement ending in a CTE c of the claimed jobs; each ack
# deletes by the id :id (in the functions, jid). The function bodies are
# these strings, so both forms run the same SQL.
. scripts/lib/bench-graphile.sh
. scripts/lib/bench-raw.sh
gw_claim_sql=$(gw_claim 1 "$task")
gw_ack="DELETE FROM graphile_worker._private_jobs AS jobs WHERE id ="
raw_claim="WITH c AS (UPDATE public.raw_jobs $raw_claim_set WHERE id = ($(raw_pick public.raw_jobs) LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id)"
raw_ack="DELETE FROM public.raw_jobs WHERE id ="

wrap() { # name claim-sql ack-sql -> the two functions
  cat <<SQL
CREATE FUNCTION public.${1}_claim() RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS \$f\$
DECLARE r bigint;
BEGIN
  $2 SELECT coalesce(max(id), 0) INTO r FROM c;
  RETURN r;
END \$f\$;
CREATE FUNCTION public.${1}_ack(jid bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS \$f\$
BEGIN
  $3 jid;
  RETURN FOUND;
END \$f\$;
SQL
}
{ wrap gw "$gw_claim_sql" "$gw_ack"; wrap raw "$raw_claim" "$raw_ack"; } | psql -X -q -v ON_ERROR_STOP=1 -d $db

printf '%s\n' "SELECT coalesce(max(id), 0) AS id FROM alk_claim('work', 'w', 1) \gset" "SELECT alk_ack(:id, 'w');" > "$work/alkstore.sql"
printf '%s\n' "$gw_claim_sql SELECT coalesce(max(id), 0) AS id FROM c \gset" "$gw_ack :id::bigint;" > "$work/graphile.sql"
printf '%s\n' "SELECT gw_claim() AS id \gset" "SELECT gw_ack(:id);" > "$work/graphile_in_functions.sql"
printf '%s\n' "$raw_claim SELECT coalesce(max(id), 0) AS id FROM c \gset" "$raw_ack :id::bigint;" > "$work/raw.sql"
printf '%s\n' "SELECT raw_claim() AS id \gset" "SELECT raw_ack(:id);" > "$work/raw_in_functions.sql"
systems=(alkstore graphile graphile_in_functions raw raw_in_functions)

psql -X -q -v ON_ERROR_STOP=1 -d $db <<'SQL'
DO $$
DECLARE t regclass;
BEGIN
  FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') LOOP
    EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)', t);
  END LOOP;
END $$;
SQL

printf '%-28s %2s %8s   %s\n' "claim + ack 1 (pairs/s)" c median runs
for c in 1 8; do
declare -A runs=()
for ((k = 0; k < rounds; k++)); do
  # Jobs for a round: each system's claims at 6,000/s at most, two systems
  # to a table (a table found empty after the round stops the script).
  n=$((secs * 6000 * 2))
  psql -X -q -v ON_ERROR_STOP=1 -d $db >/dev/null <<SQL
TRUNCATE alkstore.jobs, raw_jobs; DELETE FROM graphile_worker._private_jobs;
SELECT count(alk_enqueue_batch('work', NULL, (SELECT jsonb_agg(jsonb_build_object('n', i)) FROM generate_series(1, 1000) i)))
  FROM generate_series(1, $n / 1000);
INSERT INTO raw_jobs ($raw_cols)
  SELECT 'work', 'pending', jsonb_build_object('n', i), $raw_vals
  FROM generate_series(1, $n) i;
SELECT count(*) FROM graphile_worker.add_jobs(ARRAY(SELECT ('work', json_build_object('n', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec FROM generate_series(1, $n) i));
CHECKPOINT;
SQL
  for ((s = 0; s < ${#systems[@]}; s++)); do
    i=$((k % 2 ? ${#systems[@]} - 1 - s : s))
    psql -X -q -d $db -c VACUUM
    t=$(pgbench -n -M prepared -T "$secs" -c $c -j $c -f "$work/${systems[i]}.sql" $db 2>"$work/err" |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p') || { cat "$work/err" >&2; exit 1; }
    runs[${systems[i]}]+="${t%.*} "
  done
  left=$(psql -X -q -At -d $db -c "SELECT least((SELECT count(*) FROM alkstore.jobs WHERE state = 'pending'),
    (SELECT count(*) FROM raw_jobs WHERE state = 'pending'), (SELECT count(*) FROM graphile_worker._private_jobs WHERE locked_at IS NULL))")
  [ "$left" -gt 0 ] || { echo "bench-function-form.sh: a table ran out of jobs; shorter cells, or raise the fill" >&2; exit 1; }
done
for sys in "${systems[@]}"; do
  printf '%-28s %2s %8s   %s\n' "$sys" $c \
    "$(echo "${runs[$sys]}" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')" \
    "${runs[$sys]}"
done
done
psql -X -q -d postgres -c "DROP DATABASE $db"
