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

/** Milliseconds until a claim expires (claim_expires_at: RFC 3339 from SQLite,
 * PostgreSQL's text form); 60 s if it cannot be read. */
function msLeft(expiresAt) {
  let text = String(expiresAt || '').replace(' ', 'T');
  if (/[+-]\d\d$/.test(text)) text += ':00';
  const at = Date.parse(text);
  return Number.isNaN(at) ? 60000 : at - Date.now();
}

/** Runs fn() with job's claim extended every third of the time it had left
 * as the job started (at least 50 ms), as the Rust worker does: a handler
 * may run past the visibility timeout without the job running again
 * elsewhere. Resolves to [fn's result or throw, whether a beat found the
 * claim gone]. */
async function heldDuring(db, job, worker, fn) {
  const every = Math.max(msLeft(job.claim_expires_at) / 3, 50);
  let timer = null;
  let done = false;
  let lost = false;
  const beat = async () => {
    try {
      if (!(await heartbeat(db, job.id, worker))) lost = true;
    } catch (e) {
      process.emitWarning(`alkstore: heartbeat of job ${job.id} failed (${e.message})`);
    }
    if (!done) timer = setTimeout(beat, every);
  };
  timer = setTimeout(beat, every);
  try {
    return [await fn(), lost];
  } finally {
    done = true;
    clearTimeout(timer);
  }
}

/**
 * Runs handler(job) for each job of queue until signal aborts: acks on
 * return (a non-undefined return value is kept as the result), retries with
 * the queue's backoff on a throw; a returned snooze(seconds) gives the job
 * back to run again after that long without spending an attempt. While a
 * handler runs, heartbeats keep its job claimed (every third of the
 * visibility timeout, on the same connection, whenever the handler awaits);
 * a claim found lost is a warning and counts in stats.lostClaims (stats: an
 * object you pass; also stats.handled). On PostgreSQL a lost connection (a
 * restart, a killed backend) does not end the process: work() connects a new
 * Client from the same parameters (the one you passed stays closed) with a
 * pause that doubles up to 5 s, counted in stats.reconnects. Waits without busy polling: on PostgreSQL
 * by LISTEN (alk_listen_queue); on SQLite by watching PRAGMA data_version.
 * Between jobs it ticks schedules every tickEveryMs, sweeps its queue every
 * sweepEveryMs and prunes every pruneEveryMs (the Rust worker's defaults;
 * null: never). Resolves to the number of jobs handled.
 */
async function work(db, queue, worker, handler, {
  signal, idleMs = 5000, tickEveryMs = 5000, sweepEveryMs = 1000, pruneEveryMs = 60000, stats = {},
} = {}) {
  const pg = isPostgres(db);
  let handled = 0;
  stats.handled = stats.handled || 0;
  stats.lostClaims = stats.lostClaims || 0;
  const settled = (job, held, lost, how) => {
    if (held && !lost) return;
    stats.lostClaims += 1;
    process.emitWarning(`alkstore: job ${job.id}: its claim was lost before the ${how} (it ran past its `
      + 'visibility timeout without a heartbeat reaching the database); it may run again or have run elsewhere');
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
      const now = Date.now();
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
  const listen = () => db.query('SELECT alk_listen_queue($1, 300)', [queue]);
  if (pg) await listen();
  let seen = pg ? null : db.pragma('data_version', { simple: true });
  // pg emits 'error' on a client whose connection is lost (a restart, a
  // killed backend), which ends the process when nobody listens: work()
  // listens, connects again from the same parameters and goes on.
  const swallow = () => {};
  if (pg) db.on('error', swallow);
  const given = db; // a client made here is work()'s to end
  const dead = async () => {
    try {
      await db.query('SELECT 1');
      return false;
    } catch (e) {
      return true;
    }
  };
  let pause = 0;
  try {
    while (!(signal && signal.aborted)) {
      try {
        if (pause) {
          const fresh = new db.constructor(db.connectionParameters);
          fresh.on('error', swallow);
          await fresh.connect();
          db.removeListener('error', swallow);
          if (db !== given) db.end().catch(() => {});
          db = fresh;
          await listen();
          stats.reconnects = (stats.reconnects || 0) + 1;
          pause = 0;
        }
        await chores();
        const jobs = await claim(db, queue, worker, 1);
        for (const job of jobs) {
          let lost = false;
          try {
            let result;
            [result, lost] = await heldDuring(db, job, worker, () => handler(job));
            if (result instanceof Snooze) settled(job, await release(db, job.id, worker, result.seconds), lost, 'snooze');
            else settled(job, await ack(db, job.id, worker, keepable(result, job.id)), lost, 'ack');
          } catch (e) {
            const state = await retry(db, job.id, worker, String(e && e.message ? e.message : e));
            settled(job, state !== null && state !== undefined, lost, 'retry');
          }
          handled += 1;
          stats.handled += 1;
        }
        if (jobs.length) continue;
        if (pg) {
          await listen();
          await new Promise((resolve) => {
            // Every listener added here is removed however the wait ends: an idle
            // worker waits again and again.
            const done = () => {
              clearTimeout(timer);
              db.removeListener('notification', done);
              if (signal) signal.removeEventListener('abort', done);
              resolve();
            };
            const timer = setTimeout(done, Math.min(nextChoreMs(), 1000));
            db.on('notification', done);
            if (signal) signal.addEventListener('abort', done, { once: true });
          });
        } else {
          const deadline = Date.now() + nextChoreMs();
          while (!(signal && signal.aborted) && Date.now() < deadline) {
            const now = db.pragma('data_version', { simple: true });
            if (now !== seen) { seen = now; break; }
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      } catch (e) {
        if (!pg || !(pause || await dead())) throw e;
        // Wait and try again, a pause that doubles up to 5 s. Jobs whose ack
        // was lost with the connection run again once their claims expire.
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
    if (pg) db.removeListener('error', swallow);
    // A client work() made keeps the process alive until it ends.
    if (pg && db !== given) await db.end().catch(() => {});
  }
  return handled;
}

module.exports = {
  VERSION, AlkstoreError, loadablePath, load, version, enqueue, claim, ack, retry, fail, heartbeat,
  release, releaseBatch, Snooze, snooze, work,
};
