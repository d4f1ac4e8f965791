// One cell of scripts/bench-workers.sh: pg-boss's own worker (work(), a
// no-op handler) drains the jobs the script added to the queue "work", and
// prints the jobs/s from the workers' start (pg-boss already started, as
// an application starts it) to the last handler's return. pg-boss 10 has
// no concurrency option: each work() call adds a polling worker that
// fetches a batch, runs the handler on it, completes the batch, so
// concurrency C is C work() calls. Settings, its documented ones for
// throughput: batchSize 500 (each worker's handler gets up to 500 jobs at
// once, completed together; the size of graphile-worker's local queue in
// drain-graphile.js; a 4th argument sets another) and
// pollingIntervalSeconds 0.5 (the least it allows; a worker waits what is
// left of it after every fetch, found or not, so C workers take at most
// C × batchSize jobs a half second); a pool of max(10, C + 2) connections
// (max; its default is 10); the rest of its defaults (maintenance on).
//   NODE_PATH=<peers>/pg-boss-<version>/node_modules node drain-pgboss.js URL JOBS CONCURRENCY [BATCH]
// Also, not timed: `... URL 0 0 install` installs its schema (start(), its
// own migration) and the queue; `... URL JOBS 0 fill` adds JOBS jobs with
// its bulk insert() (one INSERT … SELECT). With ALK_LATENCY=1: the p50 and
// p99 pickup latency in ms once JOBS jobs started (scripts/lib/latency.js).
const PgBoss = require("pg-boss");
const latency = require("./latency.js");

const QUEUE = "work";

async function main() {
  const [url, jobs, concurrency, mode = "500"] = process.argv.slice(2);
  const n = Number(jobs);
  const c = Number(concurrency);
  const boss = new PgBoss({ connectionString: url, max: Math.max(10, c + 2) });
  let failure;
  let finish = () => {};
  // An error pg-boss reports ends the drain at once, with it (it waited
  // for jobs that would never come before, until the script's timeout).
  boss.on("error", (e) => {
    failure = failure || e;
    finish(process.hrtime.bigint());
  });
  await boss.start();
  if (mode === "install") {
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false });
    return;
  }
  if (mode === "fill") {
    await boss.insert(Array.from({ length: n }, (_, i) => ({ name: QUEUE, data: { n: i + 1 } })));
    await boss.stop({ graceful: false });
    return;
  }
  const batchSize = Number(mode);
  if (![n, c, batchSize].every((v) => Number.isInteger(v) && v > 0)) {
    throw new Error("JOBS, CONCURRENCY and BATCH: whole numbers above 0");
  }
  let done = 0;
  const finished = new Promise((resolve) => (finish = resolve));
  if (failure) finish(process.hrtime.bigint());
  const seen = [];
  const handler = async (batch) => {
    if (latency.enabled) for (const job of batch) seen.push(latency.since(job.data.t));
    done += batch.length;
    if (done >= n) finish(process.hrtime.bigint());
  };
  const start = process.hrtime.bigint();
  for (let i = 0; i < c; i++) {
    await boss.work(QUEUE, { batchSize, pollingIntervalSeconds: 0.5 }, handler);
  }
  const end = await finished;
  if (failure) throw failure;
  if (done !== n) throw new Error(`the workers handled ${done} jobs, ${n} were added`);
  console.log(latency.enabled ? latency.percentiles(seen) : Math.round(n / (Number(end - start) / 1e9)));
  // Not timed: its workers stop, waited for, then its pool.
  await boss.stop({ graceful: true, wait: true, timeout: 30000 });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
