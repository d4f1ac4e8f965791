// One cell of scripts/bench-workers.sh: alkstore's Node worker
// (packages/node: alkstore.work(), a no-op handler) drains the jobs the
// script added to QUEUE, and prints the jobs/s from the workers' start to
// the last handler's return. work() runs its handlers one at a time, so
// concurrency C is C work() loops in this process, each on a pg Client of
// its own (opened before the clock starts, as an application hands them
// over), named drain-0 … drain-(C-1). Settings: prefetch 32 (each claim
// takes up to 32 jobs; the default is 1), acks of handlers that return
// nothing sent together every 10 ms or 100 jobs (flushWindowMs 10,
// flushMax 100: the defaults, spelled out); chores (tick, sweep, prune) at
// their defaults.
//   NODE_PATH=<peers>/alkstore-node/node_modules node drain-alkstore.js URL JOBS CONCURRENCY [QUEUE]
// (QUEUE: default "work"; the package from target/packages/alkstore-*.tgz.)
const alkstore = require("alkstore");
const { Client } = require("pg");

async function main() {
  const [url, jobs, concurrency, queue = "work"] = process.argv.slice(2);
  const n = Number(jobs);
  const c = Number(concurrency);
  if (!(Number.isInteger(n) && n > 0 && Number.isInteger(c) && c > 0)) {
    throw new Error("JOBS and CONCURRENCY: whole numbers above 0");
  }
  const clients = [];
  for (let i = 0; i < c; i++) {
    const client = new Client({ connectionString: url });
    await client.connect();
    clients.push(client);
  }
  const stop = new AbortController();
  // Each idle loop listens for the abort: more than Node's default of 10.
  require("events").setMaxListeners(c + 10, stop.signal);
  let done = 0;
  let end;
  const handler = () => {
    if (++done === n) {
      end = process.hrtime.bigint();
      stop.abort();
    }
  };
  const start = process.hrtime.bigint();
  await Promise.all(
    clients.map((db, i) =>
      alkstore.work(db, queue, `drain-${i}`, handler, {
        signal: stop.signal,
        prefetch: 32,
        flushWindowMs: 10,
        flushMax: 100,
      }),
    ),
  );
  await Promise.all(clients.map((db) => db.end()));
  if (end === undefined) throw new Error(`the workers stopped after ${done} of ${n} jobs`);
  console.log(Math.round(n / (Number(end - start) / 1e9)));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
