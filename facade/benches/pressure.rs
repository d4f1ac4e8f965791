//! A queue under MVCC pressure (issue 35, item 3): alkstore and pgmq in the
//! same run, at the same fixed offered load, through three phases each —
//! clean, stress, recovery — after the method of the public
//! postgresql-job-queue-benchmarking harness (its `idle_in_tx_saturation`,
//! `active_readers` and `chaos_postgres_restart` scenarios), written anew
//! for one machine and short phases.
//!
//! Stresses:
//! - `idle_in_tx`: one session `BEGIN; SELECT txid_current();` held for the
//!   whole phase (vacuum can remove nothing deleted after it began);
//! - `idle_in_tx_enqueued` (not in the default set): the same, after the
//!   transaction enqueued one job of its own (on pgmq, into the same queue:
//!   that is where a pgmq message goes), as a business transaction left open
//!   does;
//! - `active_readers`: four `REPEATABLE READ` sessions, each one transaction
//!   for the whole phase, counting the queue's hot table every 100 ms;
//! - `worker_crash`: a worker dies with the jobs it claimed in hand (it stops
//!   without acking them) and a new one starts; its jobs wait for their
//!   claim to expire;
//! - `restart`: the server restarted (`ALK_PRESSURE_RESTART`, default
//!   `pg_ctlcluster 15 main restart`) at the start of the phase; clients
//!   reconnect and carry on.
//!
//! Load: a producer enqueues `rate` jobs/s in batches of up to 128 every
//! 10 ms (`alk_enqueue_batch` / `pgmq.send_batch`); `workers` threads claim up
//! to 38 at a time (the harness's batch for its pgmq adapter: 1.25× the
//! load over the workers' polls, between 8 and 64) (`alk_claim` /
//! `pgmq.read` with a 30 s visibility
//! timeout, alkstore's queue configured to the same), spend 1 ms per job and
//! ack the batch (`alk_ack_batch` / `pgmq.delete`); an empty claim sleeps
//! 50 ms. Beside alkstore's workers, `alk_sweep(NULL)` runs every second, as
//! the maintenance worker runs it (it rotates the job table's hot slots). Each statement is prepared once per connection. Pickup latency is
//! the claim's return less the enqueue time written in the payload.
//!
//! Printed per phase: jobs enqueued and completed per second, pickup
//! latency p50 / p99 / max, the longest run of seconds in which no job
//! completed ("stall"), the deepest backlog seen (jobs enqueued, not acked), dead tuples
//! (`n_dead_tup`) and size of the hot table at the end; after recovery,
//! how long until a second's p99 was back within 2× the clean p99 with the
//! backlog drained, and jobs enqueued but never completed after a final
//! drain.
//!
//! `scripts/bench-pressure.sh` makes the database (the extension and pgmq)
//! and runs this with `ALK_PRESSURE_URL`. Settings (environment):
//! `ALK_PRESSURE_SYSTEMS` (alkstore,pgmq), `ALK_PRESSURE_SCENARIOS`
//! (idle_in_tx,active_readers,worker_crash,restart), `ALK_PRESSURE_RATE` (1200),
//! `ALK_PRESSURE_WORKERS` (2), `ALK_PRESSURE_CLEAN_S` (60),
//! `ALK_PRESSURE_STRESS_S` (120), `ALK_PRESSURE_RECOVERY_S` (60).
//! Not run by the tests.

use postgres::{Client, NoTls, Statement};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const QUEUE: &str = "pressure";
const VISIBILITY_S: i32 = 30;

#[derive(Clone, Copy, PartialEq)]
enum System {
    Alkstore,
    Pgmq,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Alkstore => "alkstore",
            System::Pgmq => "pgmq",
        }
    }

    /// The table whose dead tuples a claim walks past.
    fn hot_table(self) -> String {
        match self {
            System::Alkstore => "alkstore.jobs".into(),
            System::Pgmq => format!("pgmq.q_{QUEUE}"),
        }
    }

    fn reset(self, c: &mut Client) {
        match self {
            System::Alkstore => {
                c.batch_execute(&format!(
                    "DELETE FROM alkstore.jobs WHERE queue = '{QUEUE}';
                     SELECT alk_queue_configure('{QUEUE}', '{{\"visibility_timeout_s\": {VISIBILITY_S}}}');"
                ))
                .unwrap();
                c.batch_execute("VACUUM ANALYZE alkstore.jobs").unwrap();
            }
            System::Pgmq => {
                let exists: bool = c
                    .query_one("SELECT to_regclass($1) IS NOT NULL", &[&self.hot_table()])
                    .unwrap()
                    .get(0);
                if exists {
                    c.execute("SELECT pgmq.drop_queue($1)", &[&QUEUE]).unwrap();
                }
                c.execute("SELECT pgmq.create($1)", &[&QUEUE]).unwrap();
            }
        }
    }
}

/// One connection with the system's three statements prepared; connects
/// again (and prepares again) after an error that broke the connection.
struct Conn {
    url: String,
    system: System,
    inner: Option<(Client, [Statement; 3])>,
    /// Errors reported so far (the first few go to stderr).
    errors: u32,
}

impl Conn {
    fn new(url: &str, system: System) -> Conn {
        Conn {
            url: url.into(),
            system,
            inner: None,
            errors: 0,
        }
    }

    fn get(&mut self) -> Option<&mut (Client, [Statement; 3])> {
        if self.inner.as_ref().is_some_and(|(c, _)| c.is_closed()) {
            self.inner = None;
        }
        if self.inner.is_none() {
            let mut client = Client::connect(&self.url, NoTls)
                .map_err(|e| self.report(e))
                .ok()?;
            let sql = match self.system {
                System::Alkstore => [
                    "SELECT alk_enqueue_batch($1, NULL, $2::text::jsonb)",
                    "SELECT id, payload::text FROM alk_claim($1, $2, $3)",
                    "SELECT alk_ack_batch($1, $2)",
                ],
                System::Pgmq => [
                    "SELECT pgmq.send_batch($1, ARRAY(SELECT jsonb_array_elements($2::text::jsonb)))",
                    "SELECT msg_id, message::text FROM pgmq.read($1, $3, $2)",
                    "SELECT pgmq.delete($1, $2::bigint[])",
                ],
            };
            let mut prepared = Vec::new();
            for s in sql {
                prepared.push(client.prepare(s).map_err(|e| self.report(e)).ok()?);
            }
            self.inner = Some((client, prepared.try_into().ok()?));
        }
        self.inner.as_mut()
    }

    fn report(&mut self, e: postgres::Error) {
        self.errors += 1;
        if self.errors <= 3 {
            eprintln!("{}: {e}", self.system.name());
        }
    }

    /// Runs `f` on the connection; on an error, drops a broken connection
    /// and answers None (the caller tries again later).
    fn run<T>(
        &mut self,
        f: impl FnOnce(&mut Client, &[Statement; 3]) -> Result<T, postgres::Error>,
    ) -> Option<T> {
        let (client, stmts) = self.get()?;
        match f(client, stmts) {
            Ok(v) => Some(v),
            Err(e) => {
                if client.is_closed() || client.is_valid(Duration::from_secs(1)).is_err() {
                    self.inner = None;
                }
                self.report(e);
                None
            }
        }
    }

    fn enqueue(&mut self, payloads: &str) -> bool {
        let system = self.system;
        self.run(|c, s| match system {
            System::Alkstore => c.query_one(&s[0], &[&QUEUE, &payloads]).map(|_| ()),
            System::Pgmq => c.query(&s[0], &[&QUEUE, &payloads]).map(|_| ()),
        })
        .is_some()
    }

    /// Claimed jobs: (id, seq, enqueued at in ms since the epoch).
    fn claim(&mut self, worker: &str, batch: i32) -> Option<Vec<(i64, u64, u64)>> {
        let system = self.system;
        self.run(|c, s| {
            let rows = match system {
                System::Alkstore => c.query(&s[1], &[&QUEUE, &worker, &batch])?,
                System::Pgmq => c.query(&s[1], &[&QUEUE, &batch, &VISIBILITY_S])?,
            };
            Ok(rows
                .iter()
                .map(|r| {
                    let p: Value = serde_json::from_str(r.get(1)).unwrap();
                    (
                        r.get(0),
                        p["seq"].as_u64().unwrap(),
                        p["at"].as_u64().unwrap(),
                    )
                })
                .collect())
        })
    }

    fn ack(&mut self, ids: &[i64], worker: &str) -> bool {
        let system = self.system;
        self.run(|c, s| match system {
            System::Alkstore => c.query_one(&s[2], &[&ids, &worker]).map(|_| ()),
            System::Pgmq => c.query(&s[2], &[&QUEUE, &ids]).map(|_| ()),
        })
        .is_some()
    }
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// What the producer and the workers record.
#[derive(Default)]
struct Record {
    enqueued: AtomicU64,
    completed: AtomicU64,
    /// (seconds since the start, pickup latency in ms), one per claimed job.
    pickups: Mutex<Vec<(f64, f64)>>,
    /// seqs enqueued (the call returned) and not yet acked.
    open: Mutex<HashSet<u64>>,
    /// Set: the next worker to claim jobs dies with them in hand.
    crash: AtomicBool,
}

/// The pickup latencies (ms) of jobs claimed from `from` to `to` (seconds
/// since the start).
fn pickups_between(rec: &Record, from: f64, to: f64) -> Vec<f64> {
    rec.pickups
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.0 >= from && p.0 < to)
        .map(|p| p.1)
        .collect()
}

fn producer(
    url: String,
    system: System,
    rate: Arc<AtomicU64>,
    rec: Arc<Record>,
    stop: Arc<AtomicBool>,
) {
    let mut conn = Conn::new(&url, system);
    let mut seq = 0u64;
    let start = Instant::now();
    let mut due = 0.0f64; // jobs owed since the start
    let mut sent = 0u64;
    let mut last = start;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        due += now.duration_since(last).as_secs_f64() * rate.load(Ordering::Relaxed) as f64;
        last = now;
        let n = ((due - sent as f64).floor() as i64).clamp(0, 128) as u64;
        if n > 0 {
            let at = epoch_ms();
            let batch: Vec<Value> = (seq..seq + n)
                .map(|s| json!({ "seq": s, "at": at }))
                .collect();
            if conn.enqueue(&Value::Array(batch).to_string()) {
                rec.open.lock().unwrap().extend(seq..seq + n);
                rec.enqueued.fetch_add(n, Ordering::Relaxed);
                seq += n;
                sent += n;
            } else {
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn worker(
    url: String,
    system: System,
    idx: usize,
    batch: i32,
    rec: Arc<Record>,
    stop: Arc<AtomicBool>,
    t0: Instant,
) {
    let name = format!("w{idx}");
    let mut conn = Conn::new(&url, system);
    while !stop.load(Ordering::Relaxed) {
        let Some(jobs) = conn.claim(&name, batch) else {
            thread::sleep(Duration::from_millis(100));
            continue;
        };
        if jobs.is_empty() {
            thread::sleep(Duration::from_millis(50));
            continue;
        }
        // A worker killed with its jobs in hand: they come back when their
        // claim expires.
        if rec.crash.swap(false, Ordering::SeqCst) {
            return;
        }
        let now = epoch_ms();
        let t = t0.elapsed().as_secs_f64();
        rec.pickups
            .lock()
            .unwrap()
            .extend(jobs.iter().map(|j| (t, now.saturating_sub(j.2) as f64)));
        thread::sleep(Duration::from_millis(jobs.len() as u64));
        let ids: Vec<i64> = jobs.iter().map(|j| j.0).collect();
        // An ack lost to a restart leaves the jobs to their visibility
        // timeout: they are claimed again and acked then.
        if conn.ack(&ids, &name) {
            let mut open = rec.open.lock().unwrap();
            for j in &jobs {
                open.remove(&j.1);
            }
            rec.completed
                .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        }
    }
}

/// `alk_sweep(NULL)` every second, each call a transaction of its own: what
/// the maintenance worker (or a facade worker) does beside alkstore's
/// workers. It rotates the job table's hot slots (rotate.sql). A failed call
/// (the server restarting) is tried again a second later.
fn sweeper(url: String, stop: Arc<AtomicBool>) {
    let mut c: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        if c.is_none() {
            c = Client::connect(&url, NoTls).ok();
        }
        if let Some(client) = c.as_mut() {
            if client.batch_execute("SELECT alk_sweep(NULL)").is_err() {
                c = None;
            }
        }
        thread::sleep(Duration::from_secs(1));
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// n_dead_tup and total size (MB) of the hot table — summed over its
/// partitions (alkstore's job table is partitioned: schema.sql); None
/// while the server is away.
fn table_state(url: &str, table: &str) -> Option<(i64, f64)> {
    let mut c = Client::connect(url, NoTls).ok()?;
    let row = c
        .query_one(
            "SELECT coalesce(sum(n_dead_tup), 0)::int8,
                    coalesce(sum(pg_total_relation_size(relid)), 0)::float8 / 1048576
               FROM pg_stat_user_tables
              WHERE relid IN (SELECT $1::text::regclass
                               UNION SELECT relid FROM pg_partition_tree($1::text::regclass))",
            &[&table],
        )
        .ok()?;
    Some((row.get(0), row.get(1)))
}

/// The stress held for a phase; [`end_stress`] ends it.
enum Stress {
    None,
    Held(Vec<(Arc<AtomicBool>, thread::JoinHandle<()>)>),
}

fn start_stress(kind: &str, url: &str, table: &str) -> Stress {
    match kind {
        "idle_in_tx" | "idle_in_tx_enqueued" => {
            let stop = Arc::new(AtomicBool::new(false));
            let (s, url) = (stop.clone(), url.to_string());
            // The second: the transaction enqueued a job on a queue of its
            // own first, as a business transaction does, and holds its row
            // (and, on alkstore, a writer's lock on the job's hot slot).
            let enqueue = (kind == "idle_in_tx_enqueued").then(|| {
                if table.starts_with("alkstore.") {
                    "SELECT alk_enqueue('pressure-held', NULL, '{}')"
                } else {
                    "SELECT pgmq.send('pressure', '{}')"
                }
            });
            let h = thread::spawn(move || {
                let mut c = Client::connect(&url, NoTls).unwrap();
                let mut tx = c.transaction().unwrap();
                tx.query_one("SELECT txid_current()", &[]).unwrap();
                if let Some(sql) = enqueue {
                    tx.query_one(sql, &[]).unwrap();
                }
                while !s.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(50));
                }
                tx.rollback().unwrap();
            });
            Stress::Held(vec![(stop, h)])
        }
        "active_readers" => Stress::Held(
            (0..4)
                .map(|_| {
                    let stop = Arc::new(AtomicBool::new(false));
                    let (s, url, table) = (stop.clone(), url.to_string(), table.to_string());
                    let h = thread::spawn(move || {
                        let mut c = Client::connect(&url, NoTls).unwrap();
                        let mut tx = c
                            .build_transaction()
                            .isolation_level(postgres::IsolationLevel::RepeatableRead)
                            .start()
                            .unwrap();
                        while !s.load(Ordering::Relaxed) {
                            tx.query_one(&format!("SELECT count(*) FROM {table}"), &[])
                                .unwrap();
                            thread::sleep(Duration::from_millis(100));
                        }
                        tx.rollback().unwrap();
                    });
                    (stop, h)
                })
                .collect(),
        ),
        "restart" => {
            let cmd = std::env::var("ALK_PRESSURE_RESTART")
                .unwrap_or_else(|_| "pg_ctlcluster 15 main restart".into());
            let status = std::process::Command::new("sh")
                .args(["-c", &cmd])
                .status()
                .unwrap();
            assert!(status.success(), "{cmd} failed");
            Stress::None
        }
        other => {
            panic!("unknown scenario {other}: idle_in_tx, idle_in_tx_enqueued, active_readers, restart or worker_crash")
        }
    }
}

fn end_stress(stress: Stress) {
    if let Stress::Held(held) = stress {
        for (stop, h) in held {
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap();
        }
    }
}

fn env_u64(key: &str, default: u64) -> u64 {
    std::env::var(key).map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{key}: {v}"))
    })
}

struct Settings {
    url: String,
    rate: u64,
    workers: usize,
    batch: i32,
    phases: [(&'static str, u64); 3],
}

/// One system through one scenario; prints a line per phase.
fn run(set: &Settings, system: System, scenario: &str) {
    let mut admin = Client::connect(&set.url, NoTls).unwrap();
    system.reset(&mut admin);
    drop(admin);
    let table = system.hot_table();
    let rec = Arc::new(Record::default());
    let stop = Arc::new(AtomicBool::new(false));
    let rate = Arc::new(AtomicU64::new(set.rate));
    let t0 = Instant::now();
    let mut threads = vec![{
        let (url, rate, rec, stop) = (set.url.clone(), rate.clone(), rec.clone(), stop.clone());
        thread::spawn(move || producer(url, system, rate, rec, stop))
    }];
    let spawn_worker = |idx: usize| {
        let (url, rec, stop, batch) = (set.url.clone(), rec.clone(), stop.clone(), set.batch);
        thread::spawn(move || worker(url, system, idx, batch, rec, stop, t0))
    };
    for idx in 0..set.workers {
        threads.push(spawn_worker(idx));
    }
    if system == System::Alkstore {
        let (url, stop) = (set.url.clone(), stop.clone());
        threads.push(thread::spawn(move || sweeper(url, stop)));
    }
    let mut clean_p99 = f64::NAN;
    let mut recovered: Option<f64> = None;
    for (phase, secs) in set.phases {
        let stress = if phase == "stress" && scenario == "worker_crash" {
            // One worker dies at its next claim; a new one starts then.
            rec.crash.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(10);
            while rec.crash.load(Ordering::SeqCst) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1));
            }
            threads.push(spawn_worker(set.workers));
            Stress::None
        } else if phase == "stress" {
            start_stress(scenario, &set.url, &table)
        } else {
            Stress::None
        };
        let (from, e0, c0) = (
            t0.elapsed().as_secs_f64(),
            rec.enqueued.load(Ordering::Relaxed),
            rec.completed.load(Ordering::Relaxed),
        );
        let mut deepest = 0u64;
        // The longest run of seconds in which no job completed.
        let (mut stall, mut longest_stall, mut last_done) = (0u64, 0u64, c0);
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            thread::sleep(Duration::from_secs(1));
            let backlog = rec.open.lock().unwrap().len() as u64;
            deepest = deepest.max(backlog);
            let done = rec.completed.load(Ordering::Relaxed);
            stall = if done == last_done { stall + 1 } else { 0 };
            longest_stall = longest_stall.max(stall);
            last_done = done;
            if phase == "recovery" && recovered.is_none() {
                let now = t0.elapsed().as_secs_f64();
                let mut last = pickups_between(&rec, now - 1.0, now);
                // Drained: no more open than a second of load.
                if !last.is_empty()
                    && percentile(&mut last, 0.99) <= 2.0 * clean_p99
                    && backlog <= set.rate
                {
                    recovered = Some(now - from);
                }
            }
        }
        end_stress(stress);
        let to = t0.elapsed().as_secs_f64();
        let mut lat = pickups_between(&rec, from, to);
        let (p50, p99, max) = (
            percentile(&mut lat, 0.5),
            percentile(&mut lat, 0.99),
            percentile(&mut lat, 1.0),
        );
        if phase == "clean" {
            clean_p99 = p99;
        }
        let enq = (rec.enqueued.load(Ordering::Relaxed) - e0) as f64 / (to - from);
        let done = (rec.completed.load(Ordering::Relaxed) - c0) as f64 / (to - from);
        let (dead, mb) = table_state(&set.url, &table)
            .map_or(("-".into(), "-".into()), |(d, m)| {
                (d.to_string(), format!("{m:.1}"))
            });
        let label = if phase == "stress" { scenario } else { phase };
        let after = match (phase, recovered) {
            ("recovery", Some(s)) => format!("recovered in {s:.0} s"),
            ("recovery", None) => format!("not recovered in {secs} s"),
            _ => String::new(),
        };
        println!(
            "{:<9} {:<15} {:>6.0} {:>6.0} {:>8.0} {:>8.0} {:>8.0} {:>6} {:>8} {:>10} {:>8}  {after}",
            system.name(), label, enq, done, p50, p99, max, longest_stall, deepest, dead, mb
        );
    }
    // Final drain: no new jobs; whatever an ack lost comes back after its
    // visibility timeout.
    rate.store(0, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(VISIBILITY_S as u64 + 30);
    while !rec.open.lock().unwrap().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let lost = rec.open.lock().unwrap().len();
    println!(
        "{:<9} {:<15} {} jobs enqueued, {} never completed after a {} s drain",
        system.name(),
        "total",
        rec.enqueued.load(Ordering::Relaxed),
        lost,
        VISIBILITY_S + 30
    );
}

fn main() {
    let url = std::env::var("ALK_PRESSURE_URL").expect(
        "ALK_PRESSURE_URL: a database with the extension and pgmq (scripts/bench-pressure.sh)",
    );
    let systems = std::env::var("ALK_PRESSURE_SYSTEMS").unwrap_or_else(|_| "alkstore,pgmq".into());
    let scenarios = std::env::var("ALK_PRESSURE_SCENARIOS")
        .unwrap_or_else(|_| "idle_in_tx,active_readers,worker_crash,restart".into());
    let (rate, workers) = (
        env_u64("ALK_PRESSURE_RATE", 1200),
        env_u64("ALK_PRESSURE_WORKERS", 2),
    );
    let set = Settings {
        url,
        rate,
        workers: workers as usize,
        // The harness's batch for its pgmq adapter: 1.25× the offered load
        // over the workers' polls (50 ms apart), between 8 and 64.
        batch: ((rate as f64 * 1.25 / (workers as f64 * 20.0)).round() as i32).clamp(8, 64),
        phases: [
            ("clean", env_u64("ALK_PRESSURE_CLEAN_S", 60)),
            ("stress", env_u64("ALK_PRESSURE_STRESS_S", 120)),
            ("recovery", env_u64("ALK_PRESSURE_RECOVERY_S", 60)),
        ],
    };
    println!(
        "{} jobs/s offered, {} workers claiming up to {} at a time; phases (s): {:?}",
        set.rate, set.workers, set.batch, set.phases
    );
    println!(
        "{:<9} {:<15} {:>6} {:>6} {:>8} {:>8} {:>8} {:>6} {:>8} {:>10} {:>8}",
        "system",
        "phase",
        "enq/s",
        "done/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "stall",
        "backlog",
        "dead tup",
        "MB"
    );
    const SCENARIOS: [&str; 5] = [
        "idle_in_tx",
        "idle_in_tx_enqueued",
        "active_readers",
        "worker_crash",
        "restart",
    ];
    if let Some(bad) = scenarios.split(',').find(|s| !SCENARIOS.contains(s)) {
        panic!("unknown scenario {bad}: one of {SCENARIOS:?}");
    }
    for scenario in scenarios.split(',') {
        for name in systems.split(',') {
            let system = match name {
                "alkstore" => System::Alkstore,
                "pgmq" => System::Pgmq,
                other => panic!("unknown system {other}: alkstore or pgmq"),
            };
            run(&set, system, scenario);
        }
    }
}
