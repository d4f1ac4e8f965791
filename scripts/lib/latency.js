// The latency mode of scripts/bench-workers.sh (ALK_LATENCY=1), for the
// Node drain scripts: a job's pickup latency is the time from the `t` in
// its payload (epoch µs, written by the enqueuer on this host just before
// its enqueue) to its handler's start.
"use strict";

/** Whether this drain measures latency rather than jobs/s. */
const enabled = process.env.ALK_LATENCY === "1";

/** Microseconds from `t` (epoch µs) to now. */
const since = (t) => (performance.timeOrigin + performance.now()) * 1000 - Number(t);

/** The p50 and p99 of latencies in µs, in ms: "1.23 4.56". */
function percentiles(us) {
  us.sort((a, b) => a - b);
  const at = (p) => (us[Math.min(Math.max(Math.ceil(us.length * p), 1), us.length) - 1] / 1000).toFixed(2);
  return `${at(0.5)} ${at(0.99)}`;
}

module.exports = { enabled, since, percentiles };
