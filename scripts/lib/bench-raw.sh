# Sourced by the benchmarks that run the raw SQL floor beside alkstore
# (bench-postgres.sh, bench-instructions.sh, bench-function-form.sh): one
# copy of the statements an application could write by hand on raw_jobs, a
# copy of alkstore.jobs with its indexes.

# A pending job's columns, and the values after queue, state and payload.
raw_cols="queue, state, payload, priority, attempts, max_attempts, visibility_timeout_ms, backoff_base_ms, backoff_max_ms, run_at, created_at"
raw_vals="0, 0, 5, 60000, 5000, 3600000, clock_timestamp(), clock_timestamp()"
# The claim's SET, as alk_claim's.
raw_claim_set="SET state = 'running', attempts = attempts + 1, claimed_by = 'w', claim_expires_at = clock_timestamp() + interval '60 s'"

raw_pick() { # table -> the ids of queue work's runnable jobs in claim order (no LIMIT)
  # The claim index is keyed by the name's hash (schema.sql), as alkstore's claims use it.
  printf '%s' "SELECT id FROM $1 WHERE hashtextextended(queue, 0) = hashtextextended('work', 0) AND queue = 'work' AND state = 'pending' AND run_at <= clock_timestamp() ORDER BY priority DESC, run_at, id"
}
