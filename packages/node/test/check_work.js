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
    await other.end();
    await db.end();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
