// alkstore from Node: a signup and its welcome-mail job in one transaction.
//
//   node signup.js sqlite path/to/libalkstore_sqlite.so app.db
//   node signup.js postgres postgresql:///app?host=/var/run/postgresql
//
// A worker starts first and waits for work. The program then rolls back one
// signup (its job must never run) and commits another (its job must run
// exactly once), and the worker sends the committed mail and acks it.
//
// Waiting: on PostgreSQL the worker LISTENs (alk_listen_queue) and sleeps
// until a notification arrives — no polling. On SQLite there is no server
// to push a notification, so this example checks every 50 ms; the Rust
// facade instead watches PRAGMA data_version.
'use strict';

const QUEUE = 'welcome-mails';

function sqliteEngine(lib, path) {
  const Database = require('better-sqlite3');
  const open = () => {
    const db = new Database(path, { timeout: 30000 });
    db.loadExtension(lib);
    db.pragma('journal_mode = WAL');
    return db;
  };
  return {
    open,
    one: async (db, sql, ...args) => db.prepare(sql).pluck().get(...args),
    run: async (db, sql, ...args) => db.prepare(sql).run(...args),
    begin: async (db) => db.exec('BEGIN IMMEDIATE'),
    end: async (db, commit) => db.exec(commit ? 'COMMIT' : 'ROLLBACK'),
    claim: async (db, worker) =>
      JSON.parse(db.prepare('SELECT alk_claim(?, ?, 10)').pluck().get(QUEUE, worker)),
    listen: async () => {},
    waitForWork: () => new Promise((resolve) => setTimeout(resolve, 50)),
    close: async (db) => db.close(),
  };
}

function postgresEngine(url) {
  const { Client } = require('pg');
  const placeholders = (sql) => { let i = 0; return sql.replace(/\?/g, () => `$${++i}`); };
  return {
    open: async () => { const c = new Client({ connectionString: url }); await c.connect(); return c; },
    one: async (db, sql, ...args) => Object.values((await db.query(placeholders(sql), args)).rows[0])[0],
    run: async (db, sql, ...args) => db.query(placeholders(sql), args),
    begin: async (db) => db.query('BEGIN'),
    end: async (db, commit) => db.query(commit ? 'COMMIT' : 'ROLLBACK'),
    claim: async (db, worker) =>
      (await db.query('SELECT id, payload, attempts FROM alk_claim($1, $2, 10)', [QUEUE, worker])).rows,
    // LISTENs on alkstore_jobs and registers this session as waiting.
    listen: async (db) => db.query('SELECT alk_listen_queue($1)', [QUEUE]),
    waitForWork: (db) => new Promise((resolve) => {
      const timer = setTimeout(done, 5000);
      function done() { clearTimeout(timer); db.removeListener('notification', done); resolve(); }
      db.on('notification', done);
    }),
    close: async (db) => db.end(),
  };
}

async function worker(engine) {
  const db = await engine.open();
  await engine.listen(db); // register, then claim, then wait: nothing slips through
  const run = async () => {
    for (;;) {
      const jobs = await engine.claim(db, 'mailer');
      if (jobs.length === 0) { await engine.waitForWork(db); continue; }
      for (const job of jobs) {
        const payload = typeof job.payload === 'string' ? JSON.parse(job.payload) : job.payload;
        console.log(`worker: sent welcome mail to ${payload.email} (attempt ${job.attempts})`);
        if (!(await engine.one(db, 'SELECT alk_ack(?, ?)', job.id, 'mailer'))) throw new Error('ack failed');
      }
      await engine.close(db);
      return jobs.length;
    }
  };
  return run();
}

async function signup(engine, db, email, commit) {
  await engine.begin(db);
  await engine.run(db, 'INSERT INTO signups (email) VALUES (?)', email);
  await engine.one(db, 'SELECT alk_enqueue(?, NULL, ?)', QUEUE, JSON.stringify({ email }));
  console.log(`app: signup ${email} ${commit ? 'committed' : 'rolled back'} with its welcome job`);
  await engine.end(db, commit);
}

async function main() {
  const [kind, a, b] = process.argv.slice(2);
  const engine = kind === 'sqlite' ? sqliteEngine(a, b) : postgresEngine(a);
  const app = await engine.open();
  await engine.run(app, 'CREATE TABLE IF NOT EXISTS signups (email text NOT NULL)');

  const sent = worker(engine);
  await new Promise((resolve) => setTimeout(resolve, 200)); // let the worker start waiting
  await signup(engine, app, 'ghost@example.com', false);
  await signup(engine, app, 'ada@example.com', true);
  if ((await sent) !== 1) throw new Error('the worker did not send exactly one mail');

  const stats = await engine.one(app, 'SELECT alk_queue_stats(?)', QUEUE);
  const s = typeof stats === 'string' ? JSON.parse(stats) : stats;
  console.log(`app: queue ${QUEUE}: pending ${s.pending}, running ${s.running}, dead ${s.dead}`);
  console.log(`app: signups in the table: ${await engine.one(app, 'SELECT count(*) FROM signups')}`);
  await engine.close(app);
}

main().catch((e) => { console.error(e); process.exit(1); });
