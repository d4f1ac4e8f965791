// Checks of alkstore.work on a real database (examples/run.sh runs them on
// SQLite through better-sqlite3 and on PostgreSQL through pg):
//
//   node check_work.js sqlite PATH
//   node check_work.js postgres postgresql:///db?host=…
//
// Prints one line per check; examples/run.sh compares them with what it
// expects.
'use strict';

const { getEventListeners } = require('events');
const alkstore = require('alkstore');

async function connect(kind, target) {
  if (kind === 'sqlite') {
    const Database = require('better-sqlite3');
    const db = alkstore.load(new Database(target, { timeout: 30000 }));
    db.pragma('journal_mode = WAL');
    return db;
  }
  const { Client } = require('pg');
  const db = new Client({ connectionString: target });
  await db.connect();
  return db;
}

async function main() {
  const [kind, target] = process.argv.slice(2);
  const db = await connect(kind, target);
  const one = async (pgSql, sqliteSql, args) => (kind === 'sqlite'
    ? db.prepare(sqliteSql).pluck().get(...args)
    : Object.values((await db.query(pgSql, args)).rows[0])[0]);

  // A result JSON cannot hold: acked without it, with a warning, run once.
  const warnings = [];
  process.on('warning', (w) => warnings.push(w.message));
  const jobId = await alkstore.enqueue(db, 'checks-result', { n: 1 });
  let runs = 0;
  const controller = new AbortController();
  const handled = await alkstore.work(db, 'checks-result', 'w', async () => {
    runs += 1;
    controller.abort();
    return { big: 10n };
  }, { signal: controller.signal, idleMs: 50 });
  await new Promise((r) => setImmediate(r));
  const job = await one('SELECT alk_get_job($1)', 'SELECT alk_get_job(?)', [jobId]);
  const warned = warnings.some((m) => m.includes('not JSON'));
  console.log(`non-JSON result: handled ${handled}, runs ${runs}, acked ${job === null}, warned ${warned}`);

  // Chores: a schedule due every second fires while work() runs, with
  // nobody else ticking (issue 64 item 5).
  await one('SELECT alk_schedule($1, $2, $3::jsonb, $4::jsonb)', 'SELECT alk_schedule(?, ?, ?, ?)',
    [`checks-tick-${kind}`, 'checks-ticked', '{"every_s": 1}', '{"from": "schedule"}']);
  const ticked = new AbortController();
  const timer = setTimeout(() => ticked.abort(), 30000); // ticks every 5 s, later on a loaded machine
  let got = null;
  await alkstore.work(db, 'checks-ticked', 'w', async (job) => {
    got = job.payload;
    ticked.abort();
  }, { signal: ticked.signal, idleMs: 200 });
  clearTimeout(timer);
  console.log(`schedule: fired while work() ran: ${got !== null && got.from === 'schedule'}`);

  // An idle worker waits again and again: no listener is left behind.
  const idle = new AbortController();
  const worker = alkstore.work(db, 'checks-idle', 'w', async () => undefined, { signal: idle.signal, idleMs: 20 });
  await new Promise((r) => setTimeout(r, 1500));
  const listeners = getEventListeners(idle.signal, 'abort').length;
  idle.abort();
  await worker;
  console.log(`idle: abort listeners at most 1: ${listeners <= 1}`);

  // A handler three times longer than the visibility timeout, with a second
  // worker on its own connection waiting for the same queue: heartbeats keep
  // the job claimed, so it runs once (issue 64 item 2).
  await one('SELECT alk_queue_configure($1, $2::jsonb)', 'SELECT alk_queue_configure(?, ?)',
    ['checks-long', '{"visibility_timeout_s": 1, "max_attempts": 5}']);
  await alkstore.enqueue(db, 'checks-long', { n: 1 });
  const other = await connect(kind, target);
  const long = new AbortController();
  const attempts = [];
  const stats = [{}, {}];
  const guard = setTimeout(() => long.abort(), 30000);
  const handler = async (job) => {
    attempts.push(job.attempts);
    await new Promise((r) => setTimeout(r, 3000));
    setTimeout(() => long.abort(), 2500);
  };
  await Promise.all([db, other].map((conn, i) => alkstore.work(conn, 'checks-long', `w${i}`, handler,
    { signal: long.signal, idleMs: 100, stats: stats[i] })));
  clearTimeout(guard);
  const st = await one('SELECT alk_queue_stats($1)', 'SELECT alk_queue_stats(?)', ['checks-long']);
  const counts = typeof st === 'string' ? JSON.parse(st) : st;
  const lost = stats[0].lostClaims + stats[1].lostClaims;
  console.log(`long handler: runs ${attempts.length}, attempts [${attempts}], lost claims ${lost}, `
    + `pending, running: ${counts.pending}, ${counts.running}`);
  const pending = async (queue) => {
    const raw = await one('SELECT alk_queue_stats($1)', 'SELECT alk_queue_stats(?)', [queue]);
    const c = typeof raw === 'string' ? JSON.parse(raw) : raw;
    return `${c.pending}, ${c.running}`;
  };
  const configure = (queue, opts) => one('SELECT alk_queue_configure($1, $2::jsonb)',
    'SELECT alk_queue_configure(?, ?)', [queue, JSON.stringify(opts)]);

  // Batching (contract v1.3 §P): 300 jobs, 16 claimed at a time, acks sent
  // together; each runs once, and far fewer ack calls than jobs, but at
  // least 3 (100 at most in one): they go while the worker is busy too,
  // though its handlers never wait.
  for (let n = 0; n < 300; n += 1) await alkstore.enqueue(db, 'checks-batch', { n });
  {
    const seen = [];
    const st = {};
    const stop = new AbortController();
    const limit = setTimeout(() => stop.abort(), 60000);
    await alkstore.work(db, 'checks-batch', 'w', async (job) => {
      seen.push(job.payload.n);
      if (seen.length === 300) stop.abort();
    }, { signal: stop.signal, idleMs: 100, prefetch: 16, flushWindowMs: 200, stats: st });
    clearTimeout(limit);
    const once = JSON.stringify([...seen].sort((a, b) => a - b)) === JSON.stringify([...Array(300).keys()]);
    console.log(`batches: each of 300 once: ${once}, fewer ack calls than jobs: ${st.ackFlushes >= 3 && st.ackFlushes < 100}, `
      + `pending, running: ${await pending('checks-batch')}`);
  }

  // Prefetched jobs wait behind slow handlers past the visibility timeout
  // (2 s; the last waits 3 s): the beats keep them claimed, so none runs
  // twice or spends a second attempt, though a second worker waits for the
  // same queue.
  await configure('checks-held', { visibility_timeout_s: 2, max_attempts: 5 });
  for (let n = 0; n < 4; n += 1) await alkstore.enqueue(db, 'checks-held', { n });
  {
    const runs = [];
    const st = [{}, {}];
    const stop = new AbortController();
    const limit = setTimeout(() => stop.abort(), 30000);
    const slow = async (job) => {
      runs.push([job.payload.n, job.attempts]);
      if (runs.length === 4) setTimeout(() => stop.abort(), 1000);
      await new Promise((r) => setTimeout(r, 1000));
    };
    const second = await connect(kind, target);
    await Promise.all([db, second].map((conn, i) => alkstore.work(conn, 'checks-held', `w${i}`, slow,
      { signal: stop.signal, idleMs: 100, stats: st[i], prefetch: 4, prefetchTtlMs: 30000 })));
    clearTimeout(limit);
    if (kind === 'sqlite') second.close(); else await second.end();
    runs.sort((a, b) => a[0] - b[0]);
    console.log(`prefetched past the visibility timeout: runs ${JSON.stringify(runs)}, `
      + `lost claims ${st[0].lostClaims + st[1].lostClaims}, pending, running: ${await pending('checks-held')}`);
  }

  // A stopping worker gives back what it prefetched and did not start, at
  // once and without spending an attempt: another worker claims them now.
  for (let n = 0; n < 10; n += 1) await alkstore.enqueue(db, 'checks-giveback', { n });
  {
    const stop = new AbortController();
    await alkstore.work(db, 'checks-giveback', 'w', async () => stop.abort(),
      { signal: stop.signal, idleMs: 100, prefetch: 10 });
    const left = await alkstore.claim(db, 'checks-giveback', 'other', 20);
    console.log(`stopped: given back ${left.length}, attempts [${[...new Set(left.map((j) => j.attempts))]}], `
      + `pending, running: ${await pending('checks-giveback')}`);
  }

  // The ack of a job done waits no longer than the flush window, even while
  // the next job's handler runs (it waited for that handler to return).
  {
    const first = await alkstore.enqueue(db, 'checks-ack-latency', { n: 0 });
    await alkstore.enqueue(db, 'checks-ack-latency', { n: 1 });
    const stop = new AbortController();
    let sentMeanwhile = null;
    await alkstore.work(db, 'checks-ack-latency', 'w', async (job) => {
      if (job.payload.n === 0) return;
      await new Promise((r) => setTimeout(r, 1500));
      sentMeanwhile = (await one('SELECT alk_get_job($1)', 'SELECT alk_get_job(?)', [first])) === null;
      stop.abort();
    }, { signal: stop.signal, idleMs: 100 });
    console.log(`ack behind a long handler: sent while it ran: ${sentMeanwhile}`);
  }

  // A handler stuck on its job does not hold the jobs prefetched behind it:
  // each is given back once its time to live (500 ms) passes, and a second
  // worker runs them (they waited for the stuck handler before).
  for (let n = 0; n < 4; n += 1) await alkstore.enqueue(db, 'checks-stuck', { n });
  {
    const stop = new AbortController();
    const limit = setTimeout(() => stop.abort(), 30000);
    const elsewhere = [];
    let startedAt = 0;
    let within = false;
    const stuck = alkstore.work(db, 'checks-stuck', 'w0', async () => {
      startedAt = performance.now();
      await new Promise((r) => setTimeout(r, 6000));
    }, { signal: stop.signal, idleMs: 100, prefetch: 4, prefetchTtlMs: 500 });
    const until = performance.now() + 20000;
    while (!startedAt && performance.now() < until) await new Promise((r) => setTimeout(r, 20));
    const second = await connect(kind, target);
    const other = alkstore.work(second, 'checks-stuck', 'w1', async (job) => {
      elsewhere.push([job.payload.n, job.attempts]);
      if (elsewhere.length === 3) {
        within = performance.now() - startedAt < 3000;
        stop.abort();
      }
    }, { signal: stop.signal, idleMs: 100 });
    await Promise.all([stuck, other]);
    clearTimeout(limit);
    if (kind === 'sqlite') second.close(); else await second.end();
    elsewhere.sort((a, b) => a[0] - b[0]);
    console.log(`a stuck handler: the others ran elsewhere ${JSON.stringify(elsewhere)}, within 3 s: ${within}`);
  }

  // concurrency 4: four handlers at once, each of 8 jobs once; the last to
  // start stops the worker, and the handlers in flight then finish (and are
  // acked) before work() resolves.
  for (let n = 0; n < 8; n += 1) await alkstore.enqueue(db, 'checks-concurrency', { n });
  {
    const stop = new AbortController();
    const guard = setTimeout(() => stop.abort(), 30000);
    let now = 0;
    let most = 0;
    let started = 0;
    const seen = [];
    const handled = await alkstore.work(db, 'checks-concurrency', 'w', async (job) => {
      now += 1;
      most = Math.max(most, now);
      started += 1;
      if (started === 8) stop.abort();
      await new Promise((r) => setTimeout(r, 200));
      seen.push(job.payload.n);
      now -= 1;
    }, { signal: stop.signal, idleMs: 100, concurrency: 4 });
    clearTimeout(guard);
    const once = JSON.stringify(seen.sort()) === JSON.stringify([0, 1, 2, 3, 4, 5, 6, 7]);
    console.log(`concurrency 4: most at once ${most}, each of 8 once: ${once}, handled ${handled}, `
      + `pending, running: ${await pending('checks-concurrency')}`);
  }

  if (kind !== 'sqlite') {
    // An ack waiting in the flush window when the connection is killed is
    // sent on the new connection: the job runs once (it ran again, at
    // attempt 2, once its claim expired, when the waiting acks were dropped).
    await configure('checks-ack-reconnect', { visibility_timeout_s: 1, max_attempts: 5 });
    const wconn = await connect(kind, target);
    const pid = (await wconn.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    const jobId2 = await alkstore.enqueue(db, 'checks-ack-reconnect', { n: 1 });
    const stop = new AbortController();
    const runs = [];
    const st = {};
    const running = alkstore.work(wconn, 'checks-ack-reconnect', 'w', async (job) => {
      runs.push(job.attempts);
      await db.query('SELECT pg_terminate_backend($1)', [pid]);
    }, { signal: stop.signal, idleMs: 100, flushWindowMs: 60000, flushMax: 1000, stats: st });
    const end = Date.now() + 20000;
    while (Date.now() < end
           && !((st.reconnects || 0) >= 1 && (await one('SELECT alk_get_job($1)', null, [jobId2])) === null)) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 3000)); // a claim dropped would have expired and run again
    stop.abort();
    await running;
    const gone = (await one('SELECT alk_get_job($1)', null, [jobId2])) === null;
    console.log(`ack waiting at a reconnect: runs [${runs}], acked ${gone}, reconnects ${st.reconnects || 0}`);

    // A host whose clock runs 2 minutes behind the server's: the beats
    // follow the time the server says a claim has left, so a handler three
    // times longer than the visibility timeout still runs once.
    await configure('checks-skew', { visibility_timeout_s: 1, max_attempts: 5 });
    await alkstore.enqueue(db, 'checks-skew', { n: 1 });
    const realNow = Date.now;
    Date.now = () => realNow() - 120000;
    const other2 = await connect(kind, target);
    const skew = new AbortController();
    const skewRuns = [];
    const skewStats = [{}, {}];
    const guard3 = setTimeout(() => skew.abort(), 30000);
    await Promise.all([db, other2].map((conn, i) => alkstore.work(conn, 'checks-skew', `w${i}`, async (job) => {
      skewRuns.push(job.attempts);
      await new Promise((r) => setTimeout(r, 3000));
      setTimeout(() => skew.abort(), 2500);
    }, { signal: skew.signal, idleMs: 100, stats: skewStats[i] })));
    clearTimeout(guard3);
    Date.now = realNow;
    await other2.end();
    console.log(`host clock behind: runs [${skewRuns}], lost claims ${skewStats[0].lostClaims + skewStats[1].lostClaims}`);
  }

  if (kind !== 'sqlite') {
    // Its connection killed under it (issue 64 item 11: the process died of
    // an unhandled 'error' event): work() connects again and goes on.
    const wconn = await connect(kind, target);
    const pid = (await wconn.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    const again = new AbortController();
    const got = [];
    const st = {};
    const guard2 = setTimeout(() => again.abort(), 60000);
    const running = alkstore.work(wconn, 'checks-reconnect', 'w', async (job) => { got.push(job.payload.n); },
      { signal: again.signal, idleMs: 200, stats: st });
    const until = async (cond, ms) => {
      const end = Date.now() + ms;
      while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    };
    await alkstore.enqueue(db, 'checks-reconnect', { n: 1 });
    await until(() => got.length === 1, 20000);
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    await alkstore.enqueue(db, 'checks-reconnect', { n: 2 });
    await until(() => got.length === 2, 30000);
    again.abort();
    await running;
    clearTimeout(guard2);
    console.log(`reconnect: handled after its connection was killed: ${JSON.stringify(got) === '[1,2]'}, `
      + `reconnects ${st.reconnects || 0}`);

    // A job enqueued while the loop claims or renews its LISTEN after the
    // one before: its notification comes while nobody listens, and pg
    // drops it. It is picked up at once, not at the next wake-up (1 s
    // later, for 29 of 30 such jobs before).
    {
      const wp = await connect(kind, target);
      const stopP = new AbortController();
      const picked = new Map();
      const sent = new Map();
      const runningP = alkstore.work(wp, 'checks-pairs', 'w', async (job) => {
        picked.set(job.payload.n, performance.now());
        if (job.payload.n % 2 === 0) {
          setImmediate(async () => {
            await alkstore.enqueue(db, 'checks-pairs', { n: job.payload.n + 1 });
            sent.set(job.payload.n + 1, performance.now());
          });
        }
      }, { signal: stopP.signal, idleMs: 5000, tickEveryMs: null, sweepEveryMs: null, pruneEveryMs: null });
      let late = 0;
      for (let n = 0; n < 20; n += 2) {
        await alkstore.enqueue(db, 'checks-pairs', { n });
        const t0 = performance.now();
        while (!(picked.has(n + 1) && sent.has(n + 1)) && performance.now() - t0 < 5000) {
          await new Promise((r) => setTimeout(r, 1));
        }
        if (!picked.has(n + 1) || picked.get(n + 1) - sent.get(n + 1) > 500) late += 1;
        await new Promise((r) => setTimeout(r, 50));
      }
      stopP.abort();
      await runningP;
      await wp.end();
      console.log(`a job enqueued while the loop claims: picked up within 500 ms (of 10, at most one late): ${late <= 1}`);
    }

    // The same with four handlers in flight when the connection is killed:
    // they finish, their acks go through the keeper's connection, work()
    // connects again and handles the rest. The first two throw: their
    // retries, on the lost connection or the new one, run them again at
    // attempt 2; every other job runs once.
    await configure('checks-reconnect-4', { visibility_timeout_s: 2, max_attempts: 5, backoff_base_s: 0 });
    for (let n = 0; n < 8; n += 1) await alkstore.enqueue(db, 'checks-reconnect-4', { n });
    const wconn4 = await connect(kind, target);
    const pid4 = (await wconn4.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    const four = new AbortController();
    const guard4 = setTimeout(() => four.abort(), 60000);
    const runs4 = [];
    const st4 = {};
    let killed = false;
    const running4 = alkstore.work(wconn4, 'checks-reconnect-4', 'w', async (job) => {
      runs4.push([job.payload.n, job.attempts]);
      if (!killed) {
        killed = true;
        await db.query('SELECT pg_terminate_backend($1)', [pid4]);
      }
      await new Promise((r) => setTimeout(r, 300));
      if (runs4.length >= 10) setTimeout(() => four.abort(), 3000); // a claim dropped would expire and run again
      if (job.payload.n < 2 && job.attempts === 1) throw new Error('after the kill');
    }, { signal: four.signal, idleMs: 100, concurrency: 4, stats: st4 });
    await running4;
    clearTimeout(guard4);
    runs4.sort((a, b) => a[0] - b[0]);
    console.log(`reconnect, 4 in flight: runs ${JSON.stringify(runs4)}, reconnects ${st4.reconnects || 0}, `
      + `pending, running: ${await pending('checks-reconnect-4')}`);
    await other.end();
    await db.end();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
