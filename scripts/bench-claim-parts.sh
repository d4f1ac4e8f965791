#!/usr/bin/env bash
# What the parts of a claim + ack of one job cost inside the server: the
# statements alkstore runs (sql/postgres/templates: the probe, the claim's
# UPDATE, the ack's DELETE) in a PL/pgSQL loop, so that no round trip,
# commit or call overhead is counted, in three variants taken in turns:
#   as built       probe, claim, ack
#   no ahead probe the probe without its look for due scheduled jobs
#   no probe       claim and ack alone
# Microseconds per claim + ack, medians of the rounds, and each variant's
# share of the built one. (A variant without a probe is no alternative: a
# claim must take expired claims and due scheduled jobs in claim order,
# contract v1 "Claim order" and v1.2 §H; it shows what the probe costs.)
#
#   scripts/bench-claim-parts.sh                  (ALK_BENCH_ROUNDS, default 20)
#
# Needs the cluster with the extension installed (scripts/postgres.sh start
# && scripts/postgres.sh install); works in a database of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ALK_BENCH_ROUNDS:-20}
loops=50
# 30,000 due jobs, or more when the rounds need them.
batches=$(( rounds * loops * 3 / 1000 + 1 > 30 ? rounds * loops * 3 / 1000 + 1 : 30 ))
db=alkstore_bench_parts
. scripts/lib/bench-common.sh
fresh_db $db
t=sql/postgres/templates
probe=$(cat $t/claim_probe.sql)
# The probe's last column (due scheduled jobs) replaced by false.
no_ahead=$(perl -0pe 's/,\s*\(SELECT e\.run_at.*\z/, false/s' $t/claim_probe.sql)
update=$(cat $t/claim_update.sql)
ack=$(cat $t/ack_delete.sql)

# variant NAME PROBE: a function running LOOPS claim + acks of queue q; the
# templates' variables (q, w, n, now, chosen, jid) are its own; settings
# as alk_claim's (generic plans, planned by index).
variant() {
  cat <<SQL
CREATE FUNCTION pg_temp.part_$1(q text, loops integer) RETURNS double precision
LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS \$body\$
DECLARE
  w text := 'w'; n integer := 1; now timestamptz; chosen bigint[]; jid bigint;
  f1 boolean; f2 boolean; f3 boolean; f4 boolean;
  rq text; rg text; rl boolean; rd boolean; rk text;
  t0 timestamptz := clock_timestamp();
BEGIN
  FOR i IN 1..loops LOOP
    now := clock_timestamp();
    ${2:+$2 INTO f1, f2, f3, f4;}
$update
    RETURNING j.id INTO jid;
$ack
    INTO rq, rg, rl, rd, rk;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / loops;
END \$body\$;
SQL
}

{
  variant built "$probe"
  variant no_ahead "$no_ahead"
  variant no_probe ""
  echo "SELECT alk_enqueue_batch('q', '{}', (SELECT jsonb_agg(i) FROM generate_series(1, 1000) i))
          FROM generate_series(1, $batches);"
  echo "VACUUM ANALYZE alkstore.jobs;"
  echo "CREATE TEMP TABLE r (v text, us double precision);"
  for _ in $(seq 1 "$rounds"); do
    for v in built no_ahead no_probe; do
      echo "INSERT INTO r SELECT '$v', pg_temp.part_$v('q', $loops);"
    done
  done
  echo "WITH m AS (SELECT v, percentile_cont(0.5) WITHIN GROUP (ORDER BY us) AS us FROM r GROUP BY v)
        SELECT rpad(m.v, 12) || lpad(round(m.us::numeric, 1)::text, 10) || ' us'
               || lpad(round((m.us / b.us)::numeric, 2)::text, 8)
          FROM m, m b WHERE b.v = 'built' ORDER BY m.us DESC;"
} | psql -X -q -At -v ON_ERROR_STOP=1 -d $db | {
  echo "claim + ack of one job, in the server (median of $rounds rounds of $loops)"
  echo "variant            us/job   share"
  grep ' us '
}
