// alkstore for Node: the SQLite extension inside the package, and a thin
// helper layer over the alk_* SQL functions on SQLite (better-sqlite3) and
// PostgreSQL (pg). Every helper is one SQL call on *your* connection,
// inside *your* transaction; the logic stays in the functions.
//
//   const Database = require('better-sqlite3');
//   const alkstore = require('alkstore');
//   const db = alkstore.load(new Database('app.db'));
//   const id = await alkstore.enqueue(db, 'emails', { to: 'ada@example.com' });
//   const [job] = await alkstore.claim(db, 'emails', 'worker-1');
//   await alkstore.ack(db, job.id, 'worker-1');
'use strict';

const fs = require('fs');
const path = require('path');

const VERSION = require('./package.json').version;

class AlkstoreError extends Error {}

/** The path of the SQLite extension in this package. */
function loadablePath() {
  const name = { darwin: 'libalkstore_sqlite.dylib', win32: 'alkstore_sqlite.dll' }[process.platform]
    || 'libalkstore_sqlite.so';
  const file = path.join(__dirname, 'lib', name);
  if (!fs.existsSync(file)) throw new AlkstoreError(`the SQLite extension is missing from the package: ${file}`);
  return file;
}

const isPostgres = (db) => typeof db.query === 'function' && typeof db.prepare !== 'function';

function check(libraryVersion) {
  if (libraryVersion !== VERSION) {
    throw new AlkstoreError(`the alkstore library is ${libraryVersion}, this package is ${VERSION}: install matching versions`);
  }
}

/** Loads the extension into a better-sqlite3 database, checks its version; returns the database. */
function load(db) {
  db.loadExtension(loadablePath());
  check(JSON.parse(db.prepare('SELECT alk_version()').pluck().get()).version);
  return db;
}

/** A module of the application's (better-sqlite3): from here first, then from
 * where the application runs. Installed from a directory (`npm install
 * ./packages/node`), this package is a symlink, and Node resolves its
 * requires from the link's target, which has no node_modules of its own. */
function appRequire(name) {
  try {
    return require(name);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    const paths = [process.cwd(), ...(require.main ? require.main.paths : [])];
    return require(require.resolve(name, { paths }));
  }
}

/** {package, library, schema}: this package's version and the connection's alkstore
 * (with none: the bundled SQLite library's). Refuses a library of another version. */
async function version(db) {
  let v;
  if (db === undefined) {
    const Database = appRequire('better-sqlite3');
    const probe = load(new Database(':memory:'));
    v = JSON.parse(probe.prepare('SELECT alk_version()').pluck().get());
    probe.close();
  } else {
    v = JSON.parse(await one(db, 'SELECT alk_version()::text', 'SELECT alk_version()'));
  }
  check(v.version);
  return { package: VERSION, library: v.version, schema: v.schema };
}

// ---- one SQL call each ----

async function one(db, pgSql, sqliteSql, args = []) {
  if (isPostgres(db)) {
    const res = await db.query(pgSql, args);
    return res.rows.length ? Object.values(res.rows[0])[0] : null;
  }
  return db.prepare(sqliteSql).pluck().get(...args);
}

const json = (v) => (v === undefined || v === null ? null : JSON.stringify(v));

/** Enqueues a job in the connection's current transaction; returns its id. */
async function enqueue(db, queue, payload, opts) {
  const id = await one(db, 'SELECT alk_enqueue($1, $2::jsonb, $3::jsonb)', 'SELECT alk_enqueue(?, ?, ?)',
    [queue, opts ? json(opts) : null, json(payload)]);
  return Number(id);
}

/** Claims up to maxJobs jobs: {id, queue, payload, attempts, max_attempts, claim_expires_at}. */
async function claim(db, queue, worker, maxJobs = 1) {
  if (isPostgres(db)) {
    const res = await db.query(
      'SELECT id::float8 AS id, queue, payload, attempts, max_attempts, claim_expires_at::text FROM alk_claim($1, $2, $3)',
      [queue, worker, maxJobs]);
    return res.rows;
  }
  return JSON.parse(db.prepare('SELECT alk_claim(?, ?, ?)').pluck().get(queue, worker, maxJobs));
}

/** Acks a held job (with a result, kept while the queue retains completed jobs). */
async function ack(db, jobId, worker, result) {
  const r = await one(db, 'SELECT alk_ack($1, $2, $3::jsonb)', 'SELECT alk_ack(?, ?, ?)', [jobId, worker, json(result)]);
  return r === true || r === 1;
}

/** Acks many held jobs in one call (alk_ack_batch, no results); resolves to
 * how many this worker held. */
async function ackBatch(db, jobIds, worker) {
  const n = isPostgres(db)
    ? await one(db, 'SELECT alk_ack_batch($1::bigint[], $2)', null, [jobIds, worker])
    : await one(db, null, 'SELECT alk_ack_batch(?, ?)', [JSON.stringify(jobIds), worker]);
  return Number(n);
}

/** Gives a held job back: 'pending', 'dead' or null (not held). */
async function retry(db, jobId, worker, error, delayS = null) {
  return one(db, 'SELECT alk_retry($1, $2, $3, $4)', 'SELECT alk_retry(?, ?, ?, ?)', [jobId, worker, error, delayS]);
}

/** Dead-letters a held job. */
async function fail(db, jobId, worker, error) {
  const r = await one(db, 'SELECT alk_fail($1, $2, $3)', 'SELECT alk_fail(?, ?, ?)', [jobId, worker, error]);
  return r === true || r === 1;
}

/** Extends a held job's claim (by the queue's visibility timeout, or extendS
 * seconds); true if this worker still held it. */
async function heartbeat(db, jobId, worker, extendS = null) {
  const r = await one(db, 'SELECT alk_heartbeat($1, $2, $3)', 'SELECT alk_heartbeat(?, ?, ?)', [jobId, worker, extendS]);
  return r === true || r === 1;
}

/** Gives a held job back without spending an attempt (alk_release): pending
 * again after delayS seconds (null: at once). True if this worker held an
 * unexpired claim on it. */
async function release(db, jobId, worker, delayS = null) {
  const r = await one(db, 'SELECT alk_release($1, $2, $3)', 'SELECT alk_release(?, ?, ?)', [jobId, worker, delayS]);
  return r === true || r === 1;
}

/** release for many jobs; resolves to how many this worker held. */
async function releaseBatch(db, jobIds, worker, delayS = null) {
  const n = isPostgres(db)
    ? await one(db, 'SELECT alk_release_batch($1::bigint[], $2, $3)', null, [jobIds, worker, delayS])
    : await one(db, null, 'SELECT alk_release_batch(?, ?, ?)', [JSON.stringify(jobIds), worker, delayS]);
  return Number(n);
}

/** What a work() handler returns to run its job again after `seconds`, without
 * spending an attempt or recording an error (alk_release). */
class Snooze {
  constructor(seconds) {
    const s = Number(seconds);
    if (!Number.isFinite(s) || s < 0) {
      throw new RangeError(`a snooze lasts a finite number of seconds, at least 0, got ${seconds}`);
    }
    this.seconds = s;
  }
}

/** `return alkstore.snooze(30)` from a work() handler: see Snooze. */
const snooze = (seconds) => new Snooze(seconds);

/** A handler's result as it can be kept: one JSON cannot hold (a BigInt, a
 * cycle) is dropped with a warning — the job succeeded, and is acked rather
 * than retried for it. */
function keepable(result, jobId) {
  try {
    JSON.stringify(result);
    return result;
  } catch (e) {
    process.emitWarning(`alkstore: job ${jobId}: its handler's result is not JSON (${e.message}); acked without it`);
    return undefined;
  }
}

/** Milliseconds until a claim expires by this host's clock (claim_expires_at:
 * RFC 3339 from SQLite, which keeps time by this host's clock too); 60 s if it
 * cannot be read. */
function msLeft(expiresAt) {
  let text = String(expiresAt || '').replace(' ', 'T');
  if (/[+-]\d\d$/.test(text)) text += ':00';
  const at = Date.parse(text);
  return Number.isNaN(at) ? 60000 : at - Date.now();
}

/** claim() for work(): each job with the milliseconds its claim has left. On
 * PostgreSQL the server says how long (its clock, not this host's: a host
 * whose clock runs behind would beat too seldom, and the job would run twice). */
async function claimHeld(db, queue, worker, maxJobs) {
  if (!isPostgres(db)) return (await claim(db, queue, worker, maxJobs)).map((job) => [job, msLeft(job.claim_expires_at)]);
  const res = await db.query(
    'SELECT id::float8 AS id, queue, payload, attempts, max_attempts, claim_expires_at::text, '
    + '(extract(epoch FROM claim_expires_at - clock_timestamp()) * 1000)::float8 AS left_ms '
    + 'FROM alk_claim($1, $2, $3)',
    [queue, worker, maxJobs]);
  return res.rows.map(({ left_ms: left, ...job }) => [job, left]);
}

/** Opens another connection to the worker's database, for its keeper: a pg
 * Client from the same parameters, or the same SQLite file (its absolute
 * path, as SQLite reports it) with the extension loaded. null for an SQLite
 * database in memory (no other connection can reach it): the keeper shares
 * the worker's then. An SQLite keeper waits at most 50 ms for a lock: its
 * wait blocks the event loop, and with it a handler that holds the lock. */
async function sideConnection(db, pg) {
  if (pg) {
    const side = new db.constructor(db.connectionParameters);
    side.on('error', () => { side.broken = true; });
    await side.connect();
    return side;
  }
  const main = db.pragma('database_list').find((d) => d.name === 'main');
  if (!main || !main.file) return null;
  return load(new db.constructor(main.file, { timeout: 50, fileMustExist: true }));
}

/**
 * What a worker holds besides the job its handler runs, kept by timers on a
 * connection of its own (contract v1.3 §P): every held job — prefetched and
 * not started, running, or with its ack waiting — is extended every third of
 * the time its claim had left when claimed (at least 50 ms); the acks waiting
 * are sent together (alk_ack_batch) once flushMax wait or the first has waited
 * flushWindowMs, even while a handler runs; a prefetched job not started
 * within its time to live is given back (alk_release_batch) as soon as it
 * passes. Its own connection keeps these out of any transaction a handler
 * opens on the worker's. Timers run whenever the event loop is free (a
 * handler that awaits); one operation at a time.
 */
class Keeper {
  constructor(pg, fallback, worker, { flushWindowMs, flushMax, stats, onLost }) {
    this.pg = pg;
    this.fallback = fallback; // () => the worker's connection
    this.side = undefined; // its own; null: none can be opened (SQLite in memory)
    this.worker = worker;
    this.flushWindowMs = flushWindowMs;
    this.flushMax = flushMax;
    this.stats = stats;
    this.onLost = onLost;
    this.held = new Map(); // id → {every, next, lease, until}: a new object for each hold
    this.lost = new Set();
    this.prefetched = []; // claimed, not started: {job, h, giveBackAt}
    this.acks = []; // handled, their acks waiting: {id, h}
    this.firstAckAt = 0;
    this.retryAt = 0; // after a failed flush or give-back
    this.timer = null;
    this.chain = Promise.resolve();
    this.stopped = false;
  }

  /** Its own connection, or the worker's when none can be opened (a
   * connection that parameters alone cannot make: a session setting, a
   * custom stream) or the database is in memory. */
  async conn() {
    if (this.side === undefined || (this.side && this.side.broken)) {
      const old = this.side;
      if (old) old.end().catch(() => {});
      try {
        this.side = await sideConnection(this.fallback(), this.pg);
      } catch (e) {
        this.side = null;
        process.emitWarning(`alkstore: work() could not open a connection of its own for its heartbeats and acks `
          + `(${e.message}); they go through yours`);
      }
    }
    return this.side || this.fallback();
  }

  /** Starts holding a claimed job that `left` ms of claim remain on: queued
   * to start unless it is already held here (claimed again by this worker
   * while its ack waits: that ack is this claim's too). */
  add(job, left, ttlMs) {
    const now = performance.now();
    if (this.held.has(job.id)) return;
    const every = Math.max(left / 3, 50);
    const h = { every, next: now + every, lease: left, until: now + left };
    this.held.set(job.id, h);
    this.lost.delete(job.id);
    this.prefetched.push({ job, h, giveBackAt: now + (ttlMs !== null ? ttlMs : Math.max(left / 2, 50)) });
    this.arm();
  }

  /** The next prefetched job to start, or null. A job whose claim went
   * (a beat found it gone, or no beat got through while it could lapse) is
   * not started: another worker may run it. */
  next() {
    while (this.prefetched.length) {
      const { job, h } = this.prefetched.shift();
      if (this.lost.has(job.id) || performance.now() >= h.until) {
        this.held.delete(job.id);
        this.lost.delete(job.id);
        this.onLost(`job ${job.id}: its claim was`, 'start', 1);
        continue;
      }
      return { job, h };
    }
    return null;
  }

  /** Stops holding a job settled alone; whether its claim was found gone. */
  release(id) {
    this.held.delete(id);
    return this.lost.delete(id);
  }

  /** Queues a handled job's ack. */
  ack(id, h) {
    if (!this.acks.length) this.firstAckAt = performance.now();
    this.acks.push({ id, h });
    this.arm();
  }

  arm() {
    if (this.stopped) return;
    clearTimeout(this.timer);
    let at = Infinity;
    for (const h of this.held.values()) at = Math.min(at, h.next);
    if (this.acks.length) {
      at = Math.min(at, this.acks.length >= this.flushMax ? 0 : this.firstAckAt + this.flushWindowMs);
    }
    for (const p of this.prefetched) at = Math.min(at, p.giveBackAt);
    if (at === Infinity) return;
    at = Math.max(at, this.retryAt);
    // (setTimeout takes at most 2^31 - 1 ms)
    this.timer = setTimeout(() => this.run(() => this.due()), Math.min(Math.max(at - performance.now(), 0), 2 ** 31 - 1));
  }

  /** Runs `fn` after the keeper's operation under way (one at a time). */
  run(fn) {
    const p = this.chain.then(fn);
    this.chain = p.catch(() => {}).then(() => this.arm());
    return p;
  }

  async due() {
    if (this.stopped) return;
    const now = performance.now();
    if (now < this.retryAt) return;
    const conn = await this.conn();
    if (!this.pg && conn === this.fallback() && conn.inTransaction) {
      // Sharing the worker's SQLite connection: not inside a handler's transaction.
      this.retryAt = now + 50;
      return;
    }
    try {
      const stale = this.prefetched.filter((p) => p.giveBackAt <= now);
      if (stale.length) await this.giveBack(stale);
      while (this.acks.length && (this.acks.length >= this.flushMax || now - this.firstAckAt >= this.flushWindowMs)) {
        await this.flushNow();
      }
      await this.beat();
    } catch (e) {
      // Tried again in a second (on a new connection, if this one was lost).
      this.retryAt = performance.now() + 1000;
      if (this.side) this.side.broken = this.pg;
      process.emitWarning(`alkstore: the worker's keeper failed (${e.message}); it tries again in 1 s`);
    }
  }

  async beat() {
    const now = performance.now();
    const due = [...this.held].filter(([, h]) => h.next <= now);
    if (!due.length) return;
    for (const [, h] of due) h.next = now + h.every;
    const conn = await this.conn();
    const ids = due.map(([id]) => id);
    let held;
    if (isPostgres(conn)) {
      const res = await conn.query('SELECT alk_heartbeat(i, $2) AS held FROM unnest($1::bigint[]) WITH ORDINALITY u(i, n) ORDER BY n',
        [ids, this.worker]);
      held = res.rows.map((r) => r.held);
    } else {
      const st = conn.prepare('SELECT alk_heartbeat(?, ?)').pluck();
      held = ids.map((id) => st.get(id, this.worker) === 1);
    }
    due.forEach(([id, h], i) => {
      // Not a hold made since (given back and claimed again).
      if (this.held.get(id) !== h) return;
      if (held[i]) h.until = now + h.lease;
      else this.lost.add(id);
    });
  }

  async flushNow() {
    if (!this.acks.length) return;
    const batch = this.acks.splice(0, this.flushMax);
    const ids = batch.map((a) => a.id);
    // The beats stop first: one that met the committed ack would take the job for lost.
    for (const id of ids) this.held.delete(id);
    let n;
    try {
      n = Number(await ackBatch(await this.conn(), ids, this.worker));
    } catch (e) {
      // Kept, and held meanwhile: sent again.
      for (const { id, h } of batch) {
        h.next = 0;
        this.held.set(id, h);
      }
      this.acks.unshift(...batch);
      throw e;
    }
    this.stats.ackFlushes += 1;
    if (this.acks.length) this.firstAckAt = performance.now();
    for (const id of ids) this.lost.delete(id);
    if (n < ids.length) this.onLost(`${ids.length - n} of jobs ${ids}: their claims were`, 'ack', ids.length - n);
  }

  async giveBack(entries) {
    if (!entries.length) return;
    const gone = new Set(entries);
    this.prefetched = this.prefetched.filter((p) => !gone.has(p));
    const ids = entries.map((p) => p.job.id);
    for (const id of ids) this.held.delete(id);
    try {
      await releaseBatch(await this.conn(), ids, this.worker);
    } catch (e) {
      // Still held: back in line (given back at the next try, or started).
      for (const p of entries) this.held.set(p.job.id, p.h);
      this.prefetched.unshift(...entries);
      throw e;
    }
    for (const id of ids) this.lost.delete(id);
  }

  /** Sends the acks waiting now (before the worker waits for work). */
  flush() {
    return this.run(async () => {
      while (this.acks.length) await this.flushNow();
    }).catch((e) => {
      this.retryAt = performance.now() + 1000;
      if (this.side) this.side.broken = this.pg;
      process.emitWarning(`alkstore: the worker's acks could not be sent (${e.message}); tried again in 1 s`);
    });
  }

  /** At the worker's end: acks what it finished, gives back what it did not
   * start (each tried on its own), stops, closes its connection. */
  async close() {
    await this.run(async () => {
      this.retryAt = 0;
      for (const [what, step] of [['ack', async () => { while (this.acks.length) await this.flushNow(); }],
        ['give back', () => this.giveBack(this.prefetched.slice())]]) {
        try {
          await step();
        } catch (e) {
          process.emitWarning(`alkstore: work() could not ${what} what it held at its end (${e.message}); `
            + 'those jobs run again once their claims expire');
        }
      }
    });
    this.stopped = true;
    clearTimeout(this.timer);
    await this.chain;
    if (this.side && this.pg) await this.side.end().catch(() => {});
    else if (this.side) this.side.close();
  }
}

const wholeUpTo1000 = (v, name) => {
  if (!Number.isInteger(v) || v < 1 || v > 1000) throw new RangeError(`${name} must be a whole number from 1 to 1000, got ${v}`);
};

/**
 * Runs handler(job) for each job of queue until signal aborts: acks on
 * return (a return value other than undefined or null is kept as the result),
 * retries with the queue's backoff on a throw; a returned snooze(seconds)
 * gives the job back to run again after that long without spending an
 * attempt.
 *
 * Up to `concurrency` handlers (1 to 1,000; default 1) run at once, started
 * as jobs arrive, fed by one claim loop, one keeper and your connection: on
 * PostgreSQL they share your Client, whose queries pg runs one after another,
 * so a handler that opens a transaction must take a connection of its own
 * (a pg Pool's) when concurrency is above 1. At stop, the handlers in flight
 * finish before work() acks, gives back and resolves.
 *
 * Batching (contract v1.3 §P): each claim takes up to `prefetch` jobs (1 to
 * 1,000; default 1), or as many as handlers are free if more; a job not started within
 * `prefetchTtlMs` of its claim (default: half the time its claim had then) is
 * given back as soon as that passes, without spending an attempt, for another
 * worker to run. Jobs whose handler returned undefined or null are acked
 * together (alk_ack_batch) once `flushMax` (1 to 1,000; default 100) wait or
 * the first has waited `flushWindowMs` (default 10; even while the next
 * handler awaits), and before work() waits
 * for work or resolves; `flushWindowMs: 0` acks each job as its handler
 * returns. A stopping work() acks what it finished and gives back what it
 * prefetched and did not start. A process killed with acks waiting loses
 * only those acks: the jobs run again once their claims expire.
 *
 * While a job is held — prefetched, running, or waiting for its ack —
 * heartbeats keep it claimed (every third of its visibility timeout, by the
 * time PostgreSQL says a claim has left, not this host's clock). The
 * heartbeats, the acks sent together and the give-backs go through a
 * connection work() opens for them for as long as it runs (a pg Client from
 * the same parameters, the same SQLite file), so they stay out of a
 * transaction a handler opens on yours; an SQLite database in memory, or one
 * a second connection cannot be opened to from those parameters, shares
 * yours (on SQLite they then wait for the handler's transaction to end).
 * They run on timers whenever the event loop is free (a handler that awaits,
 * and between jobs; one that blocks the loop blocks them too). A claim found lost is a warning
 * and counts in stats.lostClaims (stats: an object you pass; also
 * stats.handled and stats.ackFlushes, the batched acks sent). On PostgreSQL a
 * lost connection (a restart, a killed backend) does not end the process:
 * work() connects a new Client from the same parameters (the one you passed
 * stays closed) with a pause that doubles up to 5 s, counted in
 * stats.reconnects; the jobs it holds stay held (an ack with a result, a
 * retry or a snooze lost with the connection is not: that job runs again).
 * Waits
 * without busy polling: on PostgreSQL by LISTEN (alk_listen_queue); on SQLite
 * by watching PRAGMA data_version. Between jobs it ticks schedules every
 * tickEveryMs, sweeps its queue every sweepEveryMs and prunes every
 * pruneEveryMs (the Rust worker's defaults; null: never). Resolves to the
 * number of jobs handled.
 */
async function work(db, queue, worker, handler, {
  signal, idleMs = 5000, tickEveryMs = 5000, sweepEveryMs = 1000, pruneEveryMs = 60000, stats = {},
  prefetch = 1, flushWindowMs = 10, flushMax = 100, prefetchTtlMs = null, concurrency = 1,
} = {}) {
  wholeUpTo1000(concurrency, 'concurrency');
  wholeUpTo1000(prefetch, 'prefetch');
  wholeUpTo1000(flushMax, 'flushMax');
  if (typeof flushWindowMs !== 'number' || !Number.isFinite(flushWindowMs) || flushWindowMs < 0) {
    throw new RangeError(`flushWindowMs must be a finite number of milliseconds, at least 0, got ${flushWindowMs}`);
  }
  if (prefetchTtlMs !== null
      && (typeof prefetchTtlMs !== 'number' || !Number.isFinite(prefetchTtlMs) || prefetchTtlMs <= 0)) {
    throw new RangeError(`prefetchTtlMs must be a finite number of milliseconds above 0, or null, got ${prefetchTtlMs}`);
  }
  const pg = isPostgres(db);
  let handled = 0;
  stats.handled = stats.handled || 0;
  stats.lostClaims = stats.lostClaims || 0;
  stats.ackFlushes = stats.ackFlushes || 0;
  const onLost = (what, how, n) => {
    stats.lostClaims += n;
    process.emitWarning(`alkstore: ${what} lost before the ${how} (it ran past its visibility timeout without `
      + 'a heartbeat reaching the database, or was cancelled); it may run again or have run elsewhere');
  };
  const keeper = new Keeper(pg, () => db, worker, { flushWindowMs, flushMax, stats, onLost });
  // A job settled alone: its beats stop first (one that met the committed
  // call would take the job for lost).
  const settle = async (id, how, call) => {
    const lost = keeper.release(id);
    const held = await call();
    if (!held || lost) onLost(`job ${id}: its claim was`, how, 1);
  };
  // The Rust worker's chores, with its defaults (null: never); a failing
  // one is a warning and runs again when next due — the jobs go on.
  const every = {
    tick: tickEveryMs,
    sweep: queue.startsWith('__alkstore_outbox:') ? null : sweepEveryMs,
    prune: pruneEveryMs,
  };
  const last = {};
  const chores = async () => {
    for (const [name, ms] of Object.entries(every)) {
      if (ms === null || ms === undefined) continue;
      const now = performance.now();
      if (last[name] !== undefined && now - last[name] < Math.max(ms, 100)) continue;
      last[name] = now;
      try {
        if (name === 'tick') await one(db, 'SELECT alk_schedule_tick()', 'SELECT alk_schedule_tick()');
        else if (name === 'sweep') await one(db, 'SELECT alk_sweep($1)', 'SELECT alk_sweep(?)', [queue]);
        else {
          if (pg) await db.query('CALL alk_sequence(NULL)'); // retention counts from offsets
          while (!(signal && signal.aborted)
                 && Number(await one(db, 'SELECT alk_prune(1000)', 'SELECT alk_prune(1000)')) === 1000);
        }
      } catch (e) {
        process.emitWarning(`alkstore: the worker's ${name} failed (${e.message}); it runs again when next due`);
      }
    }
  };
  const nextChoreMs = () => Math.max(Math.min(idleMs, ...[tickEveryMs, sweepEveryMs].filter((v) => v != null)), 100);
  // Whether a notification came since the last claim began: pg drops one
  // that arrives while nobody listens (between a claim and the next wait),
  // and the job it announced then waited for the next one, or for 1 s.
  let noted = false;
  const note = () => { noted = true; };
  // When the registration was last made or renewed: it lapses after 300 s,
  // and one made anew after a busy stretch missed what committed between
  // the last claim and it: the loop claims once more (below).
  let listenedAt = performance.now();
  const listen = async () => {
    await db.query('SELECT alk_listen_queue($1, 300)', [queue]);
    if (performance.now() - listenedAt > 250000) noted = true;
    listenedAt = performance.now();
  };
  if (pg) await listen();
  let seen = pg ? null : db.pragma('data_version', { simple: true });
  // pg emits 'error' on a client whose connection is lost (a restart, a
  // killed backend), which ends the process when nobody listens: work()
  // listens, connects again from the same parameters and goes on.
  const swallow = () => {};
  if (pg) {
    db.on('error', swallow);
    db.on('notification', note);
  }
  const given = db; // a client made here is work()'s to end
  const dead = async () => {
    try {
      await db.query('SELECT 1');
      return false;
    } catch (e) {
      return true;
    }
  };
  const aborted = () => signal && signal.aborted;
  // Handlers in flight (up to `concurrency`), and what one of them met that
  // the loop handles as its own (a lost connection, an SQLite error).
  const inflight = new Set();
  let failed = null;
  let wake = null; // ends the loop's wait when a handler finishes
  const nudge = () => { if (wake) wake(); };
  // Waits up to ms (Infinity: until a handler finishes), for a handler to
  // finish, the signal, and on PostgreSQL a notification or on SQLite a
  // commit (PRAGMA data_version); every listener removed however it ends.
  const waitFor = (ms, { notified = false, polled = false } = {}) => new Promise((resolve) => {
    let timer = null;
    let poll = null;
    const done = () => {
      clearTimeout(timer);
      clearTimeout(poll);
      if (wake === done) wake = null;
      if (notified) db.removeListener('notification', done);
      if (signal) signal.removeEventListener('abort', done);
      resolve();
    };
    wake = done;
    if (ms !== Infinity) timer = setTimeout(done, ms);
    if (notified) db.on('notification', done);
    if (polled) {
      const look = () => {
        const now = db.pragma('data_version', { simple: true });
        if (now !== seen) {
          seen = now;
          done();
        } else {
          poll = setTimeout(look, 20);
        }
      };
      poll = setTimeout(look, 20);
    }
    if (signal) signal.addEventListener('abort', done, { once: true });
    if (notified && noted) done(); // one came since the last claim
  });
  const runJob = async ({ job, h }) => {
    let outcome;
    try {
      outcome = { result: await handler(job) };
    } catch (e) {
      outcome = { error: e };
    }
    handled += 1;
    stats.handled += 1;
    const conn = db; // what the job is settled on
    try {
      if ('error' in outcome) {
        const { error: e } = outcome;
        await settle(job.id, 'retry', async () => {
          const state = await retry(conn, job.id, worker, String(e && e.message ? e.message : e));
          return state !== null && state !== undefined;
        });
      } else if (outcome.result instanceof Snooze) {
        await settle(job.id, 'snooze', () => release(conn, job.id, worker, outcome.result.seconds));
      } else if ((outcome.result !== undefined && outcome.result !== null) || flushWindowMs === 0) {
        // A result goes with its own ack (alk_ack_batch keeps none).
        await settle(job.id, 'ack', () => ack(conn, job.id, worker, keepable(outcome.result, job.id)));
      } else if (keeper.lost.has(job.id)) {
        await settle(job.id, 'ack', async () => false);
      } else {
        keeper.ack(job.id, h);
        if (keeper.acks.length >= flushMax) await keeper.flush();
      }
    } catch (e) {
      // Handled by the loop (a lost connection: connect again; else the
      // error work() rejects with), unless work() connected again already.
      if (!failed) failed = { e, conn };
      else forget(e, conn);
    }
  };
  // An error settling a job on a connection replaced since (or a second
  // one): a warning; the job runs again once its claim expires.
  const forget = (e, conn) => process.emitWarning(`alkstore: work() could not settle a job (${e.message})`
    + `${pg && conn !== db ? ' on the connection it lost' : ''}; it runs again once its claim expires`);
  const start = (next) => {
    const p = runJob(next).finally(() => {
      inflight.delete(p);
      nudge();
    });
    inflight.add(p);
  };
  // The error of a handler's settle call, for the loop to handle; null
  // when none, or when it came from a connection replaced since.
  const takeFailed = () => {
    const f = failed;
    failed = null;
    if (!f) return null;
    if (pg && f.conn !== db) {
      forget(f.e, f.conn);
      return null;
    }
    return f.e;
  };
  let pause = 0;
  try {
    while (!aborted()) {
      try {
        const e = takeFailed();
        if (e) throw e;
        if (pause) {
          const fresh = new db.constructor(db.connectionParameters);
          fresh.on('error', swallow);
          fresh.on('notification', note);
          await fresh.connect();
          db.removeListener('error', swallow);
          db.removeListener('notification', note);
          if (db !== given) db.end().catch(() => {});
          db = fresh;
          await listen();
          stats.reconnects = (stats.reconnects || 0) + 1;
          pause = 0;
        }
        // One handler at a time may open a transaction on your connection:
        // no chore goes in it (above 1, handlers share it: see above).
        if (concurrency > 1 || !inflight.size) await chores();
        if (!keeper.prefetched.length && inflight.size < concurrency && !aborted()) {
          const room = Math.min(Math.max(prefetch, concurrency - inflight.size), 1000);
          noted = false; // this claim sees what was committed before it
          for (const [job, left] of await claimHeld(db, queue, worker, room)) keeper.add(job, left, prefetchTtlMs);
        }
        let started = false;
        while (inflight.size < concurrency && !aborted() && !failed) {
          const next = keeper.next();
          if (!next) break;
          start(next);
          started = true;
        }
        if (started) {
          // A turn of the event loop: the handlers just started run, and the
          // keeper's timers too, even when every call is synchronous
          // (better-sqlite3) and the handlers never wait.
          await new Promise(setImmediate);
          continue;
        }
        if (inflight.size >= concurrency) {
          await waitFor(Infinity);
          continue;
        }
        if (keeper.prefetched.length || failed || aborted()) continue;
        // Nothing to start: room, and the last claim found nothing.
        if (!inflight.size) await keeper.flush();
        if (pg) {
          await listen();
          await waitFor(Math.min(nextChoreMs(), 1000), { notified: true });
        } else {
          await waitFor(nextChoreMs(), { polled: true });
        }
      } catch (e) {
        if (!pg || !(pause || await dead())) throw e;
        // Wait and try again, a pause that doubles up to 5 s. The keeper, on
        // its own connection, goes on holding, acking and giving back.
        pause = Math.min(Math.max(pause * 2, 100), 5000);
        process.emitWarning(`alkstore: work() lost its connection (${e.message}); connecting again in ${pause} ms`);
        await new Promise((resolve) => {
          const done = () => {
            clearTimeout(timer);
            if (signal) signal.removeEventListener('abort', done);
            resolve();
          };
          const timer = setTimeout(done, pause);
          if (signal) signal.addEventListener('abort', done, { once: true });
        });
      }
    }
  } finally {
    // Stopping (or failing): the handlers in flight finish; what was handled
    // is acked, what was not started given back, each tried on its own.
    await Promise.allSettled([...inflight]);
    await keeper.close();
    if (pg) {
      db.removeListener('error', swallow);
      db.removeListener('notification', note);
    }
    // A client work() made keeps the process alive until it ends.
    if (pg && db !== given) await db.end().catch(() => {});
  }
  // A settle call that failed as the handlers in flight finished at stop.
  const e = takeFailed();
  if (e) throw e;
  return handled;
}

module.exports = {
  VERSION, AlkstoreError, loadablePath, load, version, enqueue, claim, ack, ackBatch, retry, fail, heartbeat,
  release, releaseBatch, Snooze, snooze, work,
};
