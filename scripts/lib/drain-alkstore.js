// One cell of scripts/bench-workers.sh: alkstore's Node worker
// (packages/node: alkstore.work(), a no-op handler) drains the jobs the
// script added to QUEUE, and prints the jobs/s from the worker's start to
// the last handler's return. Concurrency C is one work() with `concurrency:
// C` (C handlers in flight at once, one claim loop, one keeper) on one pg
// Client (opened before the clock starts, as an application hands it over),
// named drain. Settings: prefetch 32 (each claim takes up to 32 jobs, or as
// many as handlers are free; the default is 1), acks of handlers that
// return nothing sent together every 10 ms or 100 jobs (flushWindowMs 10,
// flushMax 100: the defaults, spelled out); chores (tick, sweep, prune) at
// their defaults.
//   NODE_PATH=<peers>/alkstore-node/node_modules node drain-alkstore.js URL JOBS CONCURRENCY [QUEUE]
// (QUEUE: default "work"; the package from target/packages/alkstore-*.tgz.)
// With ALK_LATENCY=1 (the latency mode): each job's pickup latency, the `t`
// in its payload (epoch µs, the enqueuer's clock on this host) to its
// handler's start; prints the p50 and p99 in ms once JOBS jobs started.
const alkstore = require("alkstore");
const { Client } = require("pg");
const latency = require("./latency.js");

async function main() {
  const [url, jobs, concurrency, queue = "work"] = process.argv.slice(2);
  const n = Number(jobs);
  const c = Number(concurrency);
  if (!(Number.isInteger(n) && n > 0 && Number.isInteger(c) && c > 0)) {
    throw new Error("JOBS and CONCURRENCY: whole numbers above 0");
  }
  const db = new Client({ connectionString: url });
  await db.connect();
  const stop = new AbortController();
  let done = 0;
  let end;
  const seen = [];
  const handler = (job) => {
    if (latency.enabled) seen.push(latency.since(job.payload.t));
    if (++done === n) {
      end = process.hrtime.bigint();
      stop.abort();
    }
  };
  const start = process.hrtime.bigint();
  await alkstore.work(db, queue, "drain", handler, {
    signal: stop.signal,
    concurrency: c,
    prefetch: 32,
    flushWindowMs: 10,
    flushMax: 100,
  });
  await db.end();
  if (end === undefined) throw new Error(`the workers stopped after ${done} of ${n} jobs`);
  if (latency.enabled) return console.log(latency.percentiles(seen));
  console.log(Math.round(n / (Number(end - start) / 1e9)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
