//! Opening a SQLite file (`alkstore::sqlite::open_connection`, which every
//! store connection goes through): many connections opening a new file at
//! once, while the first of them already write, all open it and write. The
//! first opens switch the file to WAL under an exclusive lock, and SQLite
//! answers "database is locked" at once, without the busy timeout, where
//! waiting could deadlock: before, some of them failed.

use alkstore::sqlite::open_connection;
use std::sync::{Arc, Barrier};

#[test]
fn connections_opening_a_new_file_at_once_all_open_and_write() {
    let (rounds, threads) = (60, 8);
    let mut failures = Vec::new();
    for _ in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let start = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || -> rusqlite::Result<()> {
                    start.wait();
                    let c = open_connection(&path)?;
                    for n in 0..10 {
                        c.execute_batch("BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS t (x)")?;
                        c.execute("INSERT INTO t VALUES (?1)", [i * 100 + n])?;
                        c.execute_batch("COMMIT")?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            if let Err(e) = h.join().unwrap() {
                failures.push(e.to_string());
            }
        }
        let c = open_connection(&path).unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        if failures.is_empty() {
            let rows: i64 = c
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(rows, threads as i64 * 10);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} opens failed: {:?}",
        failures.len(),
        rounds * threads,
        failures.first()
    );
}
