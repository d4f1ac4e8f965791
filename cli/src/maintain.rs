//! `alkstore maintain`: the maintenance worker's chores (docs/operating.md)
//! from a process of its own, for a database that no worker serves — the
//! plain install on managed PostgreSQL, where no library can be loaded, or
//! a SQLite file no facade worker keeps. Until SIGTERM or SIGINT, each in
//! a transaction of its own: `CALL alk_sequence(NULL)`, `alk_sweep(NULL)`
//! (which also rotates the job table's hot slots: claims stay flat while a
//! transaction holds vacuum back) and `alk_schedule_tick()` every
//! `--every` seconds, `alk_prune(1000)` every `--prune-every`. A second
//! signal ends it at once, a call in hand included.

use crate::Fallible;
use std::time::{Duration, Instant};

/// Rows one prune deletes; again while a call fills it, at most 10 times.
const PRUNE_BATCH: i64 = 1000;
const PRUNE_CALLS: usize = 10;

/// One chore, and whether it failed last time (one log line per change).
struct Task {
    name: &'static str,
    every: Duration,
    last: Option<Instant>,
    failing: Option<String>,
}

impl Task {
    fn new(name: &'static str, every: Duration) -> Task {
        Task {
            name,
            every,
            last: None,
            failing: None,
        }
    }

    fn due(&self, now: Instant) -> bool {
        self.last
            .is_none_or(|at| now.duration_since(at) >= self.every)
    }

    /// Notes how the round went: a line when it starts failing, when its
    /// error changes, and when it works again.
    fn went(&mut self, result: alkstore::Result<()>) {
        match (result, &self.failing) {
            (Ok(()), Some(_)) => {
                eprintln!("alkstore maintain: {} works again", self.name);
                self.failing = None;
            }
            (Ok(()), None) => {}
            (Err(e), was) => {
                let e = e.to_string();
                if was.as_deref() != Some(e.as_str()) {
                    eprintln!("alkstore maintain: {} failed: {e}", self.name);
                    self.failing = Some(e);
                }
            }
        }
    }
}

/// Checks the intervals (before anything is opened).
pub fn check(every: f64, prune_every: f64) -> Fallible {
    for (flag, s) in [("--every", every), ("--prune-every", prune_every)] {
        if !(0.1..=86_400.0).contains(&s) {
            return Err(format!("{flag} must be a number of seconds from 0.1 to 86400").into());
        }
    }
    Ok(())
}

/// Runs the chores until SIGTERM or SIGINT.
pub fn run(store: alkstore::Store, every: f64, prune_every: f64) -> Fallible {
    check(every, prune_every)?;
    let stop = alkstore::Stop::new();
    let on_signal = stop.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut signals = crate::signals::Signals::catch(&runtime)?;
    // (Not joined: it outlives a clean stop, for a second signal.)
    std::thread::spawn(move || {
        runtime.block_on(signals.next());
        eprintln!("alkstore maintain: stopping (again to quit at once)");
        on_signal.stop();
        runtime.block_on(signals.next());
        eprintln!("alkstore maintain: quitting without waiting for the call in hand");
        std::process::exit(130);
    });
    let (every, prune_every) = (
        Duration::from_secs_f64(every),
        Duration::from_secs_f64(prune_every),
    );
    // (A probe only: a database down now is the chores' to report.)
    let served = store.run(alkstore::call::queue_stats("maintain")?);
    if served.is_ok_and(|s| s["maintenance_worker"] == true) {
        eprintln!(
            "alkstore maintain: the extension's maintenance worker serves this database too \
             (both may run: each chore skips what another holds)"
        );
    }
    eprintln!(
        "alkstore maintain: sequencing streams, sweeping and ticking schedules every {:?}, \
         pruning every {:?}",
        every, prune_every
    );
    let mut tasks = [
        Task::new("sequence (alk_sequence)", every),
        Task::new("sweep (alk_sweep)", every),
        Task::new("schedules (alk_schedule_tick)", every),
        Task::new("prune (alk_prune)", prune_every),
    ];
    while !stop.is_stopped() {
        let now = Instant::now();
        for (i, task) in tasks.iter_mut().enumerate() {
            if stop.is_stopped() || !task.due(now) {
                continue;
            }
            task.last = Some(now);
            let result = match i {
                0 => store.sequence(None).map(drop),
                // (One call a round: it makes at most 2,000 due jobs
                // pending, and claims take the rest meanwhile.)
                1 => store.run(alkstore::call::sweep(None)?).map(drop),
                2 => store.schedule_tick().map(drop),
                // The plain call: streams were sequenced this round.
                _ => prune(&store, &stop),
            };
            task.went(result);
        }
        // Until the next chore is due, or a stop.
        let next = tasks
            .iter()
            .filter_map(|t| t.last.map(|at| at + t.every))
            .min()
            .unwrap_or_else(Instant::now);
        while !stop.is_stopped() && Instant::now() < next {
            std::thread::sleep(
                Duration::from_millis(20).min(next.saturating_duration_since(Instant::now())),
            );
        }
    }
    Ok(())
}

/// `alk_prune` again while a call fills its batch, at most
/// [`PRUNE_CALLS`] times, or until a stop.
fn prune(store: &alkstore::Store, stop: &alkstore::Stop) -> alkstore::Result<()> {
    for _ in 0..PRUNE_CALLS {
        if store.run(alkstore::call::prune(PRUNE_BATCH))? < PRUNE_BATCH || stop.is_stopped() {
            break;
        }
    }
    Ok(())
}
