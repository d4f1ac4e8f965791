// One cell of scripts/bench-workers.sh: graphile-worker's own worker
// (run(), a no-op task) drains the jobs the script added, and prints the
// jobs/s from run()'s start to the last job's completion. Settings:
// default (each slot fetches its job, completes it alone) or batched (the
// batching its docs describe: a local queue of 500 fetched at once,
// completions gathered for one tick).
//   NODE_PATH=<peers>/node_modules node drain-graphile.js URL JOBS CONCURRENCY default|batched
// With ALK_LATENCY=1: the p50 and p99 pickup latency in ms once JOBS
// jobs started (scripts/lib/latency.js).
const { run } = require("graphile-worker");
const latency = require("./latency.js");

async function main() {
  const [url, jobs, concurrency, mode] = process.argv.slice(2);
  const n = Number(jobs);
  const c = Number(concurrency);
  let done = 0;
  const seen = [];
  let finish;
  const finished = new Promise((resolve) => (finish = resolve));
  const worker =
    mode === "batched" ? { localQueue: { size: 500 }, completeJobBatchDelay: 0 } : {};
  const start = process.hrtime.bigint();
  const runner = await run({
    connectionString: url,
    concurrency: c,
    maxPoolSize: Math.max(10, c + 2),
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new (require("graphile-worker").Logger)(() => () => {}),
    preset: { worker },
    taskList: {
      work: async (payload) => {
        if (latency.enabled) seen.push(latency.since(payload.t));
        if (++done === n) finish(process.hrtime.bigint());
      },
    },
  });
  const end = await finished;
  await runner.stop();
  if (latency.enabled) return console.log(latency.percentiles(seen));
  console.log(Math.round(n / (Number(end - start) / 1e9)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
