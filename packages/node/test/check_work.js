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
  const timer = setTimeout(() => ticked.abort(), 10000);
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
  if (kind !== 'sqlite') await db.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
