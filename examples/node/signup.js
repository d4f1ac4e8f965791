// alkstore from Node: a signup and its welcome-mail job in one transaction.
//
//   node signup.js sqlite app.db
//   node signup.js postgres postgresql:///app?host=/var/run/postgresql
//
// Uses the `alkstore` package (npm install alkstore: the SQLite extension
// is inside it). A worker starts first and waits for work. The program then
// rolls back one signup (its job must never run) and commits another (its
// job must run exactly once), and the worker sends the committed mail and
// acks it. alkstore.work waits without polling: LISTEN on PostgreSQL, a
// watch on PRAGMA data_version on SQLite.
'use strict';

const alkstore = require('alkstore');

const QUEUE = 'welcome-mails';

async function connect(kind, target) {
  if (kind === 'sqlite') {
    const Database = require('better-sqlite3');
    const db = alkstore.load(new Database(target, { timeout: 30000 })); // the bundled extension
    db.pragma('journal_mode = WAL');
    return db;
  }
  const { Client } = require('pg');
  const db = new Client({ connectionString: target });
  await db.connect();
  return db;
}

const sql = (kind, text) => (kind === 'sqlite' ? text : text.replace(/\?/g, ((i) => () => `$${++i}`)(0)));
const exec = async (kind, db, text, args = []) =>
  (kind === 'sqlite' ? db.prepare(text).run(...args) : db.query(sql(kind, text), args));
const one = async (kind, db, text, args = []) =>
  (kind === 'sqlite' ? db.prepare(text).pluck().get(...args)
    : Object.values((await db.query(sql(kind, text), args)).rows[0])[0]);

async function signup(kind, db, email, commit) {
  await exec(kind, db, kind === 'sqlite' ? 'BEGIN IMMEDIATE' : 'BEGIN');
  await exec(kind, db, 'INSERT INTO signups (email) VALUES (?)', [email]);
  await alkstore.enqueue(db, QUEUE, { email });
  console.log(`app: signup ${email} ${commit ? 'committed' : 'rolled back'} with its welcome job`);
  await exec(kind, db, commit ? 'COMMIT' : 'ROLLBACK');
}

async function main() {
  const [kind, target] = process.argv.slice(2);
  const app = await connect(kind, target);
  await exec(kind, app, 'CREATE TABLE IF NOT EXISTS signups (email text NOT NULL)');

  const workerDb = await connect(kind, target);
  const stop = new AbortController();
  let sent = 0;
  const worker = alkstore.work(workerDb, QUEUE, 'mailer', (job) => {
    console.log(`worker: sent welcome mail to ${job.payload.email} (attempt ${job.attempts})`);
    sent += 1;
    stop.abort(); // one mail is all this example sends
  }, { signal: stop.signal });
  await new Promise((resolve) => setTimeout(resolve, 200)); // let the worker start waiting
  await signup(kind, app, 'ghost@example.com', false);
  await signup(kind, app, 'ada@example.com', true);
  await worker;
  if (sent !== 1) throw new Error('the worker did not send exactly one mail');

  const stats = await one(kind, app, 'SELECT alk_queue_stats(?)', [QUEUE]);
  const s = typeof stats === 'string' ? JSON.parse(stats) : stats;
  console.log(`app: queue ${QUEUE}: pending ${s.pending}, running ${s.running}, dead ${s.dead}`);
  console.log(`app: signups in the table: ${await one(kind, app, 'SELECT count(*) FROM signups')}`);
  for (const db of [app, workerDb]) await (kind === 'sqlite' ? db.close() : db.end());
}

main().catch((e) => { console.error(e); process.exit(1); });
