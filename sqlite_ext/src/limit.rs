//! Flow control (contract v1.2 §I): concurrency and sliding-window rate
//! limits per queue and per `limit_key`, in `alk_queue_limits` and
//! `alk_claim_times`. A claim of a queue with limits (queue/claim.rs) asks a
//! [`Limiter`] which candidates it may take, in claim order; claims run
//! under SQLite's one writer, so each counts what the last one claimed.
//!
//! Parking: a pending job stepped over because its key is at its running
//! limit (`key_max_running`) is parked — state `parked`, out of
//! `alk_jobs_pending` — so that the next claims do not read past it again:
//! a full key's backlog costs one claim, not every claim. A job of the key
//! leaving `running` (ack, retry, fail, cancel, dead-lettered) puts back as
//! many as the key has room for ([`unpark`], called by each of those paths:
//! a trigger on the job table cost every claim + ack 14% more VM
//! instructions, keyed or not); changing a key limit puts back all of the
//! queue's ([`set`]). Jobs stepped over because their key is at its
//! rate (`key_rate_max`) are parked too, until the key's window frees a
//! slot (`alk_parked_keys`): the queue's next claim after that puts back as
//! many as a window allows ([`Limiter::new`]).

use crate::conn::Conn;
use crate::error::Result;
use alkstore_core::QueueLimits;
use std::collections::{HashMap, HashSet};

/// The queue's limits, or `None` when it has none (no row).
pub fn of(conn: &Conn, queue: &str) -> Result<Option<QueueLimits>> {
    Ok(with_count(conn, queue)?.map(|(l, _)| l))
}

/// The queue's limits and its count of the claims in its own rate window
/// (`rate_count`: a claim reads it, not the rows).
fn with_count(conn: &Conn, queue: &str) -> Result<Option<(QueueLimits, i64)>> {
    let mut st = conn.stmt("limits_get")?;
    st.bind_text(1, queue);
    if !st.step_row()? {
        return Ok(None);
    }
    let limits = QueueLimits {
        max_running: st.opt_i64(0),
        rate_max: st.opt_i64(1),
        rate_per_ms: st.opt_i64(2),
        key_max_running: st.opt_i64(3),
        key_rate_max: st.opt_i64(4),
        key_rate_per_ms: st.opt_i64(5),
    };
    Ok(Some((limits, st.i64(6))))
}

/// Stores the queue's limits (`alk_queue_configure`); a queue left without
/// any has no row. A rate removed takes its window's claim times along:
/// set again, it starts from an empty window.
pub fn set(conn: &Conn, queue: &str, l: &QueueLimits) -> Result<()> {
    // A key's limit changed: every parked job goes back into claim order,
    // and claims park again what is still over the limits.
    let old = of(conn, queue)?.unwrap_or_default();
    let key_limits = |l: &QueueLimits| (l.key_max_running, l.key_rate_max, l.key_rate_per_ms);
    if key_limits(&old) != key_limits(l) {
        for name in ["limit_unpark_all", "limit_park_keys_forget_all"] {
            let mut st = conn.stmt(name)?;
            st.bind_text(1, queue);
            st.run()?;
        }
    }
    {
        let mut st = conn.stmt("claim_times_delete")?;
        st.bind_text(1, queue);
        st.bind_i64(2, l.rate_max.is_none() as i64);
        st.bind_i64(3, l.key_rate_max.is_none() as i64);
        st.run()?;
    }
    if l.is_empty() {
        let mut st = conn.stmt("limits_delete")?;
        st.bind_text(1, queue);
        st.run()?;
        return Ok(());
    }
    let mut st = conn.stmt("limits_put")?;
    st.bind_text(1, queue);
    st.bind_opt_i64(2, l.max_running);
    st.bind_opt_i64(3, l.rate_max);
    st.bind_opt_i64(4, l.rate_per_ms);
    st.bind_opt_i64(5, l.key_max_running);
    st.bind_opt_i64(6, l.key_rate_max);
    st.bind_opt_i64(7, l.key_rate_per_ms);
    st.run()?;
    Ok(())
}

/// A job of `key` in `queue` left `running` at `now` (or a pending one went
/// without running: it may be one put back here, whose finish the parked
/// ones were waiting for): as many of the key's parked jobs as it has room
/// for go back into claim order. Nothing for a job without a key.
pub fn unpark(conn: &Conn, queue: &str, key: Option<&str>, now: i64) -> Result<()> {
    let Some(key) = key else {
        return Ok(());
    };
    let mut st = conn.stmt("limit_unpark")?;
    st.bind_text(1, queue);
    st.bind_text(2, key);
    st.bind_i64(3, now);
    st.run()?;
    Ok(())
}

/// The limit keys statement `name` lists for (`queue`, `now`), read out
/// before the caller writes (the statement's cursor is closed then).
fn keys_at(conn: &Conn, name: &'static str, queue: &str, now: i64) -> Result<Vec<String>> {
    let mut st = conn.stmt(name)?;
    st.bind_text(1, queue);
    st.bind_i64(2, now);
    let mut keys = Vec::new();
    while st.step_row()? {
        keys.push(st.text(0).to_owned());
    }
    Ok(keys)
}

/// Keys of `queue` parked at their rate whose window frees a slot by `now`:
/// each puts back its first `per_window` parked jobs in claim order; the
/// rest wait a window more (the jobs put back, once claimed, fill the
/// window until then at the earliest). A key with none left is forgotten.
fn unpark_due(conn: &Conn, queue: &str, per_window: i64, per_ms: i64, now: i64) -> Result<()> {
    for k in keys_at(conn, "limit_parked_keys_due", queue, now)? {
        {
            let mut st = conn.stmt("limit_unpark_first")?;
            st.bind_text(1, queue);
            st.bind_text(2, &k);
            st.bind_i64(3, per_window);
            st.run()?;
        }
        let left = {
            let mut st = conn.stmt("limit_parked_any")?;
            st.bind_text(1, queue);
            st.bind_text(2, &k);
            st.step_row()?
        };
        let mut st = conn.stmt(if left {
            "limit_park_key_until"
        } else {
            "limit_park_key_forget"
        })?;
        st.bind_text(1, queue);
        st.bind_text(2, &k);
        if left {
            st.bind_i64(3, now + per_ms);
        }
        st.run()?;
    }
    Ok(())
}

/// Room under one pair of limits at `now`, the queue's (`key` None) or one
/// key's: how many more claims they allow (may be 0 or less), and when
/// there is none, the earliest time there can be — a rate window frees a
/// slot when its `rate_max`-th latest claim leaves it; a running slot at
/// the latest when the first running claim expires (sooner if a job
/// finishes).
fn room(
    conn: &Conn,
    queue: &str,
    key: Option<&str>,
    (max_running, rate_max, rate_per_ms): (Option<i64>, Option<i64>, Option<i64>),
    now: i64,
) -> Result<(i64, Option<i64>)> {
    let (mut room, mut free_at) = (i64::MAX, None);
    if let Some(max) = max_running {
        let mut st = conn.stmt("limit_running")?;
        st.bind_text(1, queue);
        st.bind_i64(2, now);
        st.bind_opt_text(3, key);
        st.step_row()?;
        room = max - st.i64(0);
        if room <= 0 {
            free_at = st.opt_i64(1);
        }
    }
    if let (Some(max), Some(per)) = (rate_max, rate_per_ms) {
        let mut st = conn.stmt("limit_window")?;
        st.bind_text(1, queue);
        st.bind_text(2, key.unwrap_or(""));
        st.bind_i64(3, now - per);
        st.bind_i64(4, max);
        st.step_row()?;
        let left = max - st.i64(0);
        if left <= 0 {
            free_at = free_at.max(st.opt_i64(1).map(|at| at + per));
        }
        room = room.min(left);
    }
    Ok((room, free_at))
}

/// Forgets the claim times that left a window (it holds at most
/// `rate_max` rows); returns how many.
fn forget(conn: &Conn, queue: &str, key: &str, per_ms: Option<i64>, now: i64) -> Result<i64> {
    let Some(per) = per_ms else {
        return Ok(0);
    };
    let mut st = conn.stmt("limit_forget")?;
    st.bind_text(1, queue);
    st.bind_text(2, key);
    st.bind_i64(3, now - per);
    st.run()?;
    Ok(conn.db.changes())
}

/// What one claim of a limited queue may still take.
pub struct Limiter<'q> {
    queue: &'q str,
    limits: QueueLimits,
    now: i64,
    /// Claims the queue-wide limits still allow.
    room: i64,
    /// Room left per key met so far.
    keys: HashMap<String, i64>,
    /// Keys met at their running limit: their pending jobs stepped over are parked.
    full: HashSet<String>,
    /// Keys met at their rate limit (not their running limit), and when
    /// each one's window frees a slot: their pending jobs stepped over are
    /// parked until then (the key is recorded once, then taken out).
    rated: HashMap<String, Option<i64>>,
    /// The queue's count of claims in its own rate window, as of now.
    rate_count: i64,
}

impl<'q> Limiter<'q> {
    /// The limiter of a claim at `now` (under the write lock), or `None` for
    /// a queue without limits.
    pub fn new(conn: &Conn, queue: &'q str, now: i64) -> Result<Option<Self>> {
        let Some((limits, counted)) = with_count(conn, queue)? else {
            return Ok(None);
        };
        if let (Some(max), Some(per)) = (limits.key_rate_max, limits.key_rate_per_ms) {
            unpark_due(conn, queue, max, per, now)?;
        }
        // Claims that expired free their keys' slots with no statement to
        // see it: the keys' parked jobs come back now, so that the claim
        // order decides between them and the expired job's re-claim.
        if limits.key_max_running.is_some() {
            for k in keys_at(conn, "limit_expired_keys", queue, now)? {
                unpark(conn, queue, Some(&k), now)?;
            }
        }
        // The queue's rate from its count of the window's claims (the
        // times that left the window forgotten first), not from the rows.
        let rate_count = match limits.rate_max {
            Some(_) => counted - forget(conn, queue, "", limits.rate_per_ms, now)?,
            None => 0,
        };
        let (running_room, _) = room(conn, queue, None, (limits.max_running, None, None), now)?;
        let rate_room = limits.rate_max.map_or(i64::MAX, |max| max - rate_count);
        Ok(Some(Limiter {
            queue,
            limits,
            now,
            room: running_room.min(rate_room),
            keys: HashMap::new(),
            full: HashSet::new(),
            rated: HashMap::new(),
            rate_count,
        }))
    }

    /// Claims the queue's limits still allow.
    pub fn room(&self) -> i64 {
        self.room
    }

    /// Whether job `id` of `key` may be taken now; if so, counts it as taken.
    /// False means it is stepped over (its key is at its limit: parked, if
    /// pending) or the queue's limits allow no more.
    pub fn take(&mut self, conn: &Conn, id: i64, key: Option<&str>) -> Result<bool> {
        if self.room <= 0 {
            return Ok(false);
        }
        let l = &self.limits;
        if let Some(k) = key.filter(|_| l.key_max_running.is_some() || l.key_rate_max.is_some()) {
            let left = match self.keys.get(k) {
                Some(left) => *left,
                None => {
                    forget(conn, self.queue, k, l.key_rate_per_ms, self.now)?;
                    let limits = (l.key_max_running, l.key_rate_max, l.key_rate_per_ms);
                    let (left, free_at) = room(conn, self.queue, Some(k), limits, self.now)?;
                    if left <= 0
                        && l.key_max_running.is_some()
                        && room(
                            conn,
                            self.queue,
                            Some(k),
                            (l.key_max_running, None, None),
                            self.now,
                        )?
                        .0 <= 0
                    {
                        self.full.insert(k.to_owned());
                    } else if let Some(until) = free_at.filter(|_| left <= 0) {
                        self.rated.insert(k.to_owned(), Some(until));
                    }
                    left
                }
            };
            self.keys.insert(k.to_owned(), left - 1);
            if left <= 0 {
                let rated = self.rated.get(k).copied();
                if self.full.contains(k) || rated.is_some() {
                    // (A scheduled or expired candidate is not pending: left as it is.)
                    let parked = {
                        let mut st = conn.stmt("limit_park")?;
                        st.bind_i64(1, id);
                        st.run()?;
                        conn.db.changes() > 0
                    };
                    if parked {
                        if let Some(until) = rated.flatten() {
                            let mut st = conn.stmt("limit_park_key")?;
                            st.bind_text(1, self.queue);
                            st.bind_text(2, k);
                            st.bind_i64(3, until);
                            st.run()?;
                            self.rated.insert(k.to_owned(), None); // recorded
                        }
                    }
                }
                return Ok(false);
            }
        }
        self.room -= 1;
        Ok(true)
    }

    /// Records a claim of a job of `key` in the rate windows it counts in.
    pub fn count(&mut self, conn: &Conn, key: Option<&str>) -> Result<()> {
        if self.limits.rate_max.is_some() {
            self.rate_count += 1;
        }
        let windows = [
            self.limits.rate_max.map(|_| ""),
            key.filter(|_| self.limits.key_rate_max.is_some()),
        ];
        for k in windows.into_iter().flatten() {
            let mut st = conn.stmt("limit_count")?;
            st.bind_text(1, self.queue);
            st.bind_text(2, k);
            st.bind_i64(3, self.now);
            st.run()?;
        }
        Ok(())
    }

    /// Stores the queue's count of its window's claims, once the claim is done.
    pub fn finish(&self, conn: &Conn) -> Result<()> {
        if self.limits.rate_max.is_some() {
            let mut st = conn.stmt("limits_rate_count")?;
            st.bind_text(1, self.queue);
            st.bind_i64(2, self.rate_count);
            st.run()?;
        }
        Ok(())
    }
}

/// `next_slot_at` of `alk_queue_stats`: `None` when the queue's limits leave
/// room for a claim now (or it has none), else the earliest time a slot
/// frees. Per-key limits count when every job a claim could take now (the
/// first 1,000 in claim order) is of a key at its limit.
pub fn next_slot_at(conn: &Conn, queue: &str, now: i64) -> Result<Option<i64>> {
    let Some(l) = of(conn, queue)? else {
        return Ok(None);
    };
    let (left, free_at) = room(
        conn,
        queue,
        None,
        (l.max_running, l.rate_max, l.rate_per_ms),
        now,
    )?;
    if left <= 0 {
        return Ok(free_at);
    }
    if l.key_max_running.is_none() && l.key_rate_max.is_none() {
        return Ok(None);
    }
    let keys: Vec<Option<String>> = {
        let mut st = conn.stmt("limit_due_keys")?;
        st.bind_text(1, queue);
        st.bind_i64(2, now);
        let mut keys = Vec::new();
        while st.step_row()? {
            keys.push(st.opt_text(0).map(str::to_owned));
        }
        keys
    };
    let mut first: Option<i64> = None;
    for key in keys {
        let Some(k) = key else {
            return Ok(None); // a job without a key: only the queue's limits count
        };
        let limits = (l.key_max_running, l.key_rate_max, l.key_rate_per_ms);
        let (left, free_at) = room(conn, queue, Some(&k), limits, now)?;
        if left > 0 {
            return Ok(None);
        }
        first = match (first, free_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    Ok(first)
}

/// Deletes up to `max_rows` claim times that left their window (alk_prune).
pub fn prune(conn: &Conn, now: i64, max_rows: i64) -> Result<()> {
    let mut st = conn.stmt("limit_prune")?;
    st.bind_i64(1, now);
    st.bind_i64(2, max_rows);
    st.run()?;
    Ok(())
}
