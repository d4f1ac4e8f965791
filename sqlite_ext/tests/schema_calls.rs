//! What a database file's own schema can call (issue 63; docs/security.md,
//! "SQLite: what a database file's schema can call"). An application opens
//! a file it did not write: a view or a trigger in it must not purge, claim,
//! ack or configure anything when the application reads or writes a table;
//! a trigger that fills an outbox with its business row is a supported use
//! (docs/sql-api.md) wherever SQLite trusts the schema.

mod common;

use alkstore_core::catalogue::{InSchema, FUNCTIONS};
use common::*;
use rusqlite::Connection;

/// SQLite's flag bits, as `PRAGMA function_list` reports them.
const DIRECTONLY: i64 = 0x80000;
const INNOCUOUS: i64 = 0x200000;

/// A connection of the attacker's (or of another program's): plain SQLite,
/// alkstore not loaded, so nothing it writes is checked when written.
fn foreign(db: &Db) -> Connection {
    let conn = Connection::open(&db.path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    conn
}

/// Arguments that pass every check of `name` (so that a refusal can only be
/// SQLite's "unsafe use"), as SQL text.
fn sample_args(name: &str, n: usize) -> String {
    let f = alkstore_core::catalogue::get(name).unwrap();
    let special: Option<&[&str]> = match name {
        "alk_purge" => Some(&["'q'", "'pending'"]),
        "alk_list_jobs" => Some(&["'q'"]),
        "alk_schedule" => Some(&["'s'", "'q'", "'{\"every_s\":60}'", "'{}'"]),
        "alk_queue_configure" | "alk_stream_configure" => Some(&["'q'", "'{}'"]),
        "alk_lock_acquire" | "alk_lock_renew" => Some(&["'l'", "'o'", "10"]),
        "alk_reset_offset" | "alk_save_offset" => Some(&["'s'", "'c'", "0"]),
        "alk_ack_batch" => Some(&["'[1]'", "'w'"]),
        _ => None,
    };
    if let Some(args) = special {
        return args[..n].join(", ");
    }
    f.pg_types()[..n]
        .iter()
        .enumerate()
        .map(|(i, t)| match *t {
            "text" if i == 0 => "'q'".to_string(),
            "text" => "'w'".to_string(),
            "jsonb" => "'{}'".to_string(),
            "bigint[]" => "'[1]'".to_string(),
            _ => "1".to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn pending(conn: &Connection, queue: &str) -> i64 {
    int(
        conn,
        "SELECT json_extract(alk_queue_stats(?1), '$.pending')",
        &[&queue],
    )
}

/// The flags SQLite registered each function with are the catalogue's.
#[test]
fn each_function_is_registered_with_the_catalogues_schema_flags() {
    let db = Db::new();
    let conn = db.conn();
    let mut checked = 0;
    for f in FUNCTIONS.iter().filter(|f| f.on_sqlite()) {
        let mut stmt = conn
            .prepare("SELECT narg, flags FROM pragma_function_list WHERE name = ?1")
            .unwrap();
        let rows: Vec<(i64, i64)> = stmt
            .query_map([f.name], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows.len(), f.arities().count(), "{}: {rows:?}", f.name);
        for (narg, flags) in rows {
            let want = match f.in_schema {
                InSchema::Never => (true, false),
                InSchema::Trusted => (false, false),
                InSchema::Anywhere => (false, true),
            };
            let have = (flags & DIRECTONLY != 0, flags & INNOCUOUS != 0);
            assert_eq!(have, want, "{}/{narg}: flags {flags:#x}", f.name);
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked}");
}

/// A view that purges when read, the attack of issue 63, and the same for
/// every direct-only function: reading the view fails with SQLite's
/// "unsafe use" error and nothing changes, whether SQLite trusts the
/// schema or not.
#[test]
fn a_view_calling_a_direct_only_function_fails_and_changes_nothing() {
    for trusted_schema in [1, 0] {
        let db = Db::new();
        let app = db.conn();
        val(&app, "SELECT alk_enqueue('q', NULL, '{}')", &[]);
        val(&app, "SELECT alk_enqueue('q', NULL, '{}')", &[]);
        drop(app);

        let attacker = foreign(&db);
        let direct_only: Vec<_> = FUNCTIONS
            .iter()
            .filter(|f| f.on_sqlite() && f.in_schema == InSchema::Never)
            .collect();
        for (i, f) in direct_only.iter().enumerate() {
            let n = *f.arities().start();
            attacker
                .execute_batch(&format!(
                    "CREATE VIEW v{i} AS SELECT 1 AS x, {}({}) AS y;",
                    f.name,
                    sample_args(f.name, n)
                ))
                .unwrap();
        }
        attacker
            .execute_batch("CREATE VIEW innocent AS SELECT 1 AS x, alk_purge('q', 'pending') AS y;")
            .unwrap();
        drop(attacker);

        let app = db.conn();
        app.pragma_update(None, "trusted_schema", trusted_schema)
            .unwrap();
        let (_, msg, _) = fails(&app, "SELECT y FROM innocent", &[]);
        assert!(
            msg.contains("unsafe use of alk_purge()"),
            "trusted_schema={trusted_schema}: {msg}"
        );
        for (i, f) in direct_only.iter().enumerate() {
            let (_, msg, _) = fails(&app, &format!("SELECT y FROM v{i}"), &[]);
            assert!(
                msg.contains(&format!("unsafe use of {}()", f.name)),
                "trusted_schema={trusted_schema}, {}: {msg}",
                f.name
            );
        }
        assert_eq!(pending(&app, "q"), 2, "trusted_schema={trusted_schema}");
        // The same call made by the application itself still works.
        assert_eq!(int(&app, "SELECT alk_purge('q', 'pending')", &[]), 2);
    }
}

/// A trigger in the file that claims or purges when the application inserts
/// a business row: the insert fails, and neither the row nor the jobs change.
#[test]
fn a_trigger_calling_a_direct_only_function_fails_and_changes_nothing() {
    for trusted_schema in [1, 0] {
        let db = Db::new();
        let app = db.conn();
        app.execute_batch("CREATE TABLE things (id INTEGER PRIMARY KEY, v TEXT);")
            .unwrap();
        val(&app, "SELECT alk_enqueue('q', NULL, '{}')", &[]);
        val(&app, "SELECT alk_enqueue('q', NULL, '{}')", &[]);
        drop(app);

        foreign(&db)
            .execute_batch(
                "CREATE TRIGGER grab AFTER INSERT ON things BEGIN
                   SELECT alk_claim('q', 'thief', 10);
                   SELECT alk_purge('q', 'pending');
                 END;",
            )
            .unwrap();

        let app = db.conn();
        app.pragma_update(None, "trusted_schema", trusted_schema)
            .unwrap();
        let err = app
            .execute("INSERT INTO things (v) VALUES ('x')", [])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unsafe use of alk_claim()"),
            "trusted_schema={trusted_schema}: {err}"
        );
        assert_eq!(int(&app, "SELECT count(*) FROM things", &[]), 0);
        assert_eq!(pending(&app, "q"), 2, "trusted_schema={trusted_schema}");
        let running = int(
            &app,
            "SELECT json_extract(alk_queue_stats('q'), '$.running')",
            &[],
        );
        assert_eq!(running, 0);
    }
}

/// The supported pattern (docs/sql-api.md, "An outbox filled by a
/// trigger"): a trigger on the business table enqueues the message, which
/// commits and rolls back with the row — in an explicit transaction and in
/// autocommit, on a connection that did not write the schema. Where the
/// application turned `trusted_schema` off, the trigger is refused and the
/// row is not written either.
#[test]
fn a_trigger_fills_an_outbox_with_its_business_row() {
    let db = Db::new();
    foreign(&db)
        .execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL);
             CREATE TRIGGER orders_receipt AFTER INSERT ON orders BEGIN
               SELECT alk_outbox_enqueue('receipts', NULL,
                                         json_object('order', NEW.id, 'item', NEW.item));
             END;",
        )
        .unwrap();

    let app = db.conn();
    // A trigger runs inside its INSERT, where SQLite opens no savepoint: the
    // schema is made by a call of its own first, and the error says so.
    let err = app
        .execute("INSERT INTO orders (item) VALUES ('early')", [])
        .unwrap_err()
        .to_string();
    assert!(err.contains("run SELECT alk_init() once first"), "{err}");
    assert_eq!(int(&app, "SELECT count(*) FROM orders", &[]), 0);
    val(&app, "SELECT alk_init()", &[]);
    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('book'); COMMIT;")
        .unwrap();
    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('ghost'); ROLLBACK;")
        .unwrap();
    app.execute("INSERT INTO orders (item) VALUES ('pen')", [])
        .unwrap();
    // A statement that fails after the trigger ran takes its message back.
    app.execute_batch(
        "CREATE TABLE tail (id INTEGER PRIMARY KEY CHECK (id < 3));
         CREATE TRIGGER orders_tail AFTER INSERT ON orders BEGIN
           INSERT INTO tail (id) VALUES (NEW.id);
         END;",
    )
    .unwrap();
    assert!(app
        .execute("INSERT INTO orders (item) VALUES ('too many')", [])
        .is_err());

    let claimed = val(
        &app,
        "SELECT alk_outbox_claim('receipts', 'relay', 10)",
        &[],
    );
    let items: Vec<&str> = claimed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["payload"]["item"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["book", "pen"]);
    assert_eq!(int(&app, "SELECT count(*) FROM orders", &[]), 2);

    // trusted_schema = 0: the application trusts no schema, so the trigger's
    // call is refused, and the insert with it.
    app.pragma_update(None, "trusted_schema", 0).unwrap();
    let err = app
        .execute("INSERT INTO orders (item) VALUES ('refused')", [])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unsafe use of alk_outbox_enqueue()"), "{err}");
    assert_eq!(int(&app, "SELECT count(*) FROM orders", &[]), 2);
    let stats = val(&app, "SELECT alk_outbox_stats('receipts')", &[]);
    assert_eq!(stats["pending"], 0, "{stats}");
    // Called by the application itself, it works as ever.
    val(
        &app,
        "SELECT alk_outbox_enqueue('receipts', NULL, '{}')",
        &[],
    );
}

/// `alk_version` is callable from a trusted schema only: it may create the
/// schema on first use, which is a write. No function is innocuous.
#[test]
fn the_version_is_callable_from_a_trusted_schema_only() {
    let db = Db::new();
    foreign(&db)
        .execute_batch("CREATE VIEW about AS SELECT json_extract(alk_version(), '$.version') AS v;")
        .unwrap();
    let app = db.conn();
    assert_eq!(
        val(&app, "SELECT v FROM about", &[]),
        alkstore_core::VERSION
    );
    app.pragma_update(None, "trusted_schema", 0).unwrap();
    let (_, msg, _) = fails(&app, "SELECT v FROM about", &[]);
    assert!(msg.contains("unsafe use of alk_version()"), "{msg}");
}

/// Issue 63 (review): a view in an attached file cannot read the
/// application's jobs into that file — the reads are direct-only.
#[test]
fn an_attached_files_view_cannot_read_the_applications_jobs() {
    let db = Db::new();
    let app = db.conn();
    let id = int(
        &app,
        "SELECT alk_enqueue('q', NULL, '{\"secret\": 1}')",
        &[],
    );
    let other = Db::new();
    foreign(&other)
        .execute_batch(&format!(
            "CREATE TABLE loot (doc TEXT);
             CREATE VIEW peek AS SELECT alk_get_job({id}) AS doc;"
        ))
        .unwrap();
    app.execute(
        "ATTACH DATABASE ?1 AS other",
        [other.path.to_str().unwrap()],
    )
    .unwrap();
    let (_, msg, _) = fails(&app, "SELECT doc FROM other.peek", &[]);
    assert!(msg.contains("unsafe use of alk_get_job()"), "{msg}");
}
