# Sourced by the benchmarks that run graphile-worker beside alkstore
# (bench-postgres.sh, bench-function-form.sh, bench-instructions.sh): one
# copy of the claim its worker sends (graphile-worker 0.18.0,
# dist/sql/getJobs.js with its default named-queue strategy). The
# statement ends in a CTE c of the claimed jobs; the caller adds the SELECT
# from c.

gw_claim() { # batch-size task-id -> graphile-worker's claim of that many jobs
  local pick="j"
  [ "$1" = 1 ] || pick="j_raw"
  printf '%s' "WITH $pick AS (SELECT jobs.job_queue_id, jobs.priority, jobs.run_at, jobs.id FROM graphile_worker._private_jobs AS jobs WHERE jobs.is_available = true AND run_at <= now() AND task_id = ANY(ARRAY[$2]::int[]) AND (jobs.job_queue_id IS NULL OR jobs.job_queue_id IN (SELECT id FROM graphile_worker._private_job_queues AS job_queues WHERE job_queues.is_available = true FOR UPDATE SKIP LOCKED)) ORDER BY priority ASC, run_at ASC LIMIT $1 FOR UPDATE SKIP LOCKED)"
  [ "$1" = 1 ] || printf '%s' ", j AS (SELECT DISTINCT ON (job_queue_id, CASE WHEN job_queue_id IS NULL THEN id END) job_queue_id, priority, run_at, id FROM j_raw ORDER BY job_queue_id, CASE WHEN job_queue_id IS NULL THEN id END, priority ASC, run_at ASC)"
  printf '%s' ", q AS (UPDATE graphile_worker._private_job_queues AS job_queues SET locked_by = 'w', locked_at = now() FROM j WHERE job_queues.id = j.job_queue_id), c AS (UPDATE graphile_worker._private_jobs AS jobs SET attempts = jobs.attempts + 1, locked_by = 'w', locked_at = now() FROM j WHERE jobs.id = j.id RETURNING jobs.*)"
}
