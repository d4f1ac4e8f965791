// A handler that asks to run again later ("snooze"), without spending an
// attempt or recording an error (alk_release, contract v1.3 §Q).
//
//   node snooze.js sqlite app.db
//   node snooze.js postgres postgresql:///app?host=/var/run/postgresql
//
// The queue allows a single attempt. The handler snoozes its job three
// times (a tenth of a second each), and is done with it the fourth time:
// the job runs four times, each time as its first attempt, and is acked.
'use strict';

const alkstore = require('alkstore');

const QUEUE = 'reports';

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
  await one('SELECT alk_queue_configure($1, $2::jsonb)', 'SELECT alk_queue_configure(?, ?)',
    [QUEUE, '{"max_attempts": 1}']);
  const jobId = await alkstore.enqueue(db, QUEUE, { report: 'q3' });
  const controller = new AbortController();
  const attempts = [];
  const handled = await alkstore.work(db, QUEUE, 'builder', async (job) => {
    attempts.push(job.attempts);
    if (attempts.length < 4) {
      console.log(`run ${attempts.length}: not ready, snoozing (attempt ${job.attempts})`);
      return alkstore.snooze(0.1);
    }
    console.log(`run ${attempts.length}: built ${job.payload.report} (attempt ${job.attempts})`);
    controller.abort();
    return undefined;
  }, { signal: controller.signal, idleMs: 100 });
  const job = await one('SELECT alk_get_job($1)', 'SELECT alk_get_job(?)', [jobId]);
  console.log(`handled ${handled}; job acked: ${job === null ? 'True' : 'False'}`);
  if (kind !== 'sqlite') await db.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
