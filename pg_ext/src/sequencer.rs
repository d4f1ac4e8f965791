//! Waking the stream sequencer (contract v1.2 §K): a publisher's commit
//! sets the latch of the maintenance worker serving its database, which
//! then gives the committed events their offsets — within milliseconds of
//! the commit, with no polling and no NOTIFY (which would take a
//! cluster-wide lock at every publisher's commit).
//!
//! The workers announce themselves in a small table in shared memory, one
//! slot per worker: its database's oid and its `PGPROC` number. A
//! publishing transaction arms a commit callback once (`wake_sequencer`,
//! called by `alk_publish`); at commit the callback sets the latch of the
//! worker of `MyDatabaseId`, if any. A stale slot (a worker that crashed)
//! at worst sets some other process's latch, which every latch user
//! tolerates as a spurious wake-up.
//!
//! Shared memory exists only when the library is preloaded; loaded any
//! other way, there is no worker and waking does nothing.

use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgAtomic};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How many workers can announce themselves: one per database served.
const SLOTS: usize = 32;

/// Each slot: `database oid << 32 | (pgprocno + 1)`, 0 when free.
static SEQUENCERS: PgAtomic<[AtomicU64; SLOTS]> =
    // SAFETY: the only shared-memory segment of this name.
    unsafe { PgAtomic::new(c"alkstore sequencers") };

/// Set in the postmaster once the segment is requested; inherited by every
/// process it forks.
static READY: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Whether this transaction has armed its commit callback.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Requests the shared slots (from `_PG_init`, while preloading only).
// pgrx's macro tests the features of every PostgreSQL it supports.
#[allow(unexpected_cfgs)]
pub fn init_shared_memory() {
    pg_shmem_init!(SEQUENCERS);
    READY.store(true, Ordering::Relaxed);
}

/// Whether the postmaster preloaded the library (and so started the
/// workers of `alkstore.maintenance_databases`).
pub fn preloaded() -> bool {
    READY.load(Ordering::Relaxed)
}

fn slots() -> Option<&'static [AtomicU64; SLOTS]> {
    READY.load(Ordering::Relaxed).then(|| SEQUENCERS.get())
}

fn slot_value(db: pg_sys::Oid, procno: i32) -> u64 {
    (u64::from(db.to_u32()) << 32) | (procno as u64 + 1)
}

/// Announces this worker as the sequencer of `MyDatabaseId`; returns the
/// value to pass to [`withdraw`]. None when no slot is free (then publishers
/// do not wake it and it sequences on its interval).
pub fn announce() -> Option<u64> {
    let slots = slots()?;
    // SAFETY: this process's own PGPROC and database, set once it connected.
    let (db, procno) = unsafe { (pg_sys::MyDatabaseId, (*pg_sys::MyProc).pgprocno) };
    let mine = slot_value(db, procno);
    // A slot of this database left by a worker that crashed, else a free one.
    let same_db = |v: u64| v >> 32 == u64::from(db.to_u32());
    for pass in [0, 1] {
        for slot in slots {
            let v = slot.load(Ordering::Acquire);
            let fits = if pass == 0 {
                v != 0 && same_db(v)
            } else {
                v == 0
            };
            if fits
                && slot
                    .compare_exchange(v, mine, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                return Some(mine);
            }
        }
    }
    None
}

/// Frees the slot [`announce`] took, when the worker exits.
pub fn withdraw(mine: u64) {
    if let Some(slots) = slots() {
        for slot in slots {
            let _ = slot.compare_exchange(mine, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

/// Sets the latch of the worker serving `db`, if one announced itself.
fn wake(db: pg_sys::Oid) {
    let Some(slots) = slots() else { return };
    for slot in slots {
        let v = slot.load(Ordering::Acquire);
        if v != 0 && v >> 32 == u64::from(db.to_u32()) {
            let procno = ((v & 0xffff_ffff) - 1) as usize;
            // SAFETY: procno is a PGPROC number that a worker published;
            // ProcGlobal's array holds every one of them for the server's
            // life, and SetLatch may be called on any process's latch.
            unsafe {
                let proc_ = (*pg_sys::ProcGlobal).allProcs.add(procno);
                pg_sys::SetLatch(&raw mut (*proc_).procLatch);
            }
        }
    }
}

/// `alkstore.wake_sequencer(id)`: returns id; arms, once per transaction,
/// a callback that wakes this database's sequencer when the transaction
/// commits.
#[pg_extern(sql = false)]
fn alkstore_wake_sequencer(id: i64) -> i64 {
    if slots().is_some() && !ARMED.get() {
        ARMED.set(true);
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, || {
            ARMED.set(false);
            // SAFETY: the database this backend is connected to.
            wake(unsafe { pg_sys::MyDatabaseId });
        });
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, || ARMED.set(false));
        // A prepared transaction commits later, in any session: its
        // events wait for the worker's interval.
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Prepare, || ARMED.set(false));
    }
    id
}

/// `alkstore.in_transaction_block()`: whether the caller is inside
/// BEGIN … COMMIT, where a procedure cannot commit.
#[pg_extern(sql = false)]
fn alkstore_in_transaction_block() -> bool {
    // SAFETY: reads the current transaction's state, in a backend.
    unsafe { pg_sys::IsTransactionBlock() }
}

/// `alkstore.statement_alone()`: whether the running statement is a
/// transaction of its own (no BEGIN … COMMIT around it, whatever protocol
/// sent it): where the job table's rotation may take its lock, held to
/// the commit (rotate.sql).
#[pg_extern(sql = false)]
fn alkstore_statement_alone() -> bool {
    // SAFETY: reads the current transaction's state, in a backend.
    unsafe { !pg_sys::IsTransactionBlock() }
}
