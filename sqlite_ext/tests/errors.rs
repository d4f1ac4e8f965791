//! Bad input (contract §2–§4): every entry point rejects it with the
//! contract's code, never crashes the host, and changes nothing.

mod common;
use common::*;
use rusqlite::types::Value as Sql;

/// Every function with valid sample arguments; `{N}` marks a name slot and
/// its kind: (function, args, index of the namespaced name argument or none).
const CALLS: &[(&str, &[&str], Option<usize>)] = &[
    ("alk_enqueue", &["'q'", "NULL", "'{}'"], Some(0)),
    ("alk_enqueue_batch", &["'q'", "NULL", "'[1]'"], Some(0)),
    ("alk_claim", &["'q'", "'w'", "1"], Some(0)),
    ("alk_ack", &["1", "'w'"], None),
    ("alk_ack_batch", &["'[1]'", "'w'"], None),
    ("alk_retry", &["1", "'w'", "'e'", "1"], None),
    ("alk_fail", &["1", "'w'", "'e'"], None),
    ("alk_heartbeat", &["1", "'w'", "1"], None),
    ("alk_cancel", &["1"], None),
    ("alk_get_job", &["1"], None),
    ("alk_requeue_dead", &["1"], None),
    ("alk_queue_configure", &["'q'", "'{}'"], Some(0)),
    ("alk_queue_opts", &["'q'"], Some(0)),
    ("alk_queue_stats", &["'q'"], Some(0)),
    ("alk_sweep", &["'q'"], Some(0)),
    ("alk_outbox_enqueue", &["'o'", "NULL", "'{}'"], Some(0)),
    ("alk_outbox_claim", &["'o'", "'w'", "1"], Some(0)),
    ("alk_outbox_stats", &["'o'"], Some(0)),
    ("alk_publish", &["'s'", "'{}'", "'k'"], Some(0)),
    ("alk_read", &["'s'", "0", "10"], Some(0)),
    ("alk_save_offset", &["'s'", "'c'", "1"], Some(0)),
    ("alk_get_offset", &["'s'", "'c'"], Some(0)),
    ("alk_notify", &["'ch'", "'{}'"], Some(0)),
    ("alk_notifications", &["'ch'", "0", "10"], Some(0)),
    ("alk_lock_acquire", &["'l'", "'o'", "10"], Some(0)),
    ("alk_lock_renew", &["'l'", "'o'", "10"], Some(0)),
    ("alk_lock_release", &["'l'", "'o'"], Some(0)),
];

fn call(f: &str, args: &[&str]) -> String {
    format!("SELECT {f}({})", args.join(", "))
}

#[test]
fn the_sample_calls_succeed() {
    let db = Db::new();
    let c = db.conn();
    for (f, args, _) in CALLS {
        sql(&c, &call(f, args), &[]).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

#[test]
fn reserved_and_empty_names_are_rejected_by_every_entry_point() {
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("SELECT alk_init()").unwrap();
    let before = snapshot(&c);
    for (f, args, slot) in CALLS {
        let Some(slot) = *slot else { continue };
        for (bad, want) in [
            ("'__alkstore_x'", "ALK02"),
            ("'__alkstore_outbox:o'", "ALK02"),
            ("''", "ALK01"),
            ("'a' || char(0) || 'b'", "ALK01"),
            ("NULL", "ALK01"),
        ] {
            if *f == "alk_sweep" && bad == "NULL" {
                continue; // alk_sweep(NULL) sweeps every queue
            }
            let mut a = args.to_vec();
            a[slot] = bad;
            let q = call(f, &a);
            assert_eq!(code(&c, &q, &[]), want, "{q}");
        }
    }
    // Workers, consumers and owners are names too: empty is InvalidName.
    for q in [
        "SELECT alk_claim('q', '', 1)",
        "SELECT alk_ack(1, '')",
        "SELECT alk_retry(1, NULL, 'e')",
        "SELECT alk_save_offset('s', '', 1)",
        "SELECT alk_get_offset('s', NULL)",
        "SELECT alk_lock_acquire('l', '', 1)",
        "SELECT alk_outbox_claim('o', '', 1)",
    ] {
        assert_eq!(code(&c, q, &[]), "ALK01", "{q}");
    }
    // The message names the bad value after the code and variant.
    let (_, msg, rc) = fails(
        &c,
        "SELECT alk_enqueue('__alkstore_outbox:o', NULL, '1')",
        &[],
    );
    assert!(msg.starts_with("alkstore ALK02 ReservedName: "), "{msg}");
    assert!(msg.contains("__alkstore_outbox:o"), "{msg}");
    assert_eq!(rc, 1, "contract errors are SQLITE_ERROR");
    assert_eq!(snapshot(&c), before, "failed calls wrote nothing");
}

#[test]
fn invalid_options_are_rejected() {
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("SELECT alk_init()").unwrap();
    let before = snapshot(&c);
    for opts in [
        r#"{"dely_s": 1}"#,
        r#"{"delay_s": 1, "run_at": "2030-01-01T00:00:00Z"}"#,
        r#"{"delay_s": -1}"#,
        r#"{"expires_in_s": -5}"#,
        r#"{"max_attempts": 0}"#,
        r#"{"priority": "high"}"#,
        r#"{"run_at": "tomorrow"}"#,
        r#"[1]"#,
        r#"not json"#,
        r#"42"#,
    ] {
        for f in [
            "alk_enqueue('q', ?1, '1')",
            "alk_outbox_enqueue('o', ?1, '1')",
            "alk_enqueue_batch('q', ?1, '[1]')",
        ] {
            let q = format!("SELECT {f}");
            assert_eq!(code(&c, &q, &[&opts]), "ALK03", "{q} {opts}");
        }
    }
    for opts in [
        r#"{"visibility_timeout_s": 0}"#,
        r#"{"max_attempts": 0}"#,
        r#"{"backoff_base_s": -1}"#,
        r#"{"delay_s": 1}"#,
        r#"{"max_attempts": 1.5}"#,
        "[]",
    ] {
        assert_eq!(
            code(&c, "SELECT alk_queue_configure('q', ?1)", &[&opts]),
            "ALK03",
            "{opts}"
        );
    }
    assert_eq!(code(&c, "SELECT alk_enqueue('q', 5, '1')", &[]), "ALK03");
    assert_eq!(snapshot(&c), before);
}

#[test]
fn invalid_payloads_and_arguments_are_rejected() {
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("SELECT alk_init()").unwrap();
    let before = snapshot(&c);
    for (q, want) in [
        ("SELECT alk_enqueue('q', NULL, '{bad')", "ALK04"),
        ("SELECT alk_enqueue('q', NULL, NULL)", "ALK04"),
        ("SELECT alk_enqueue('q', NULL, x'7b7d')", "ALK04"),
        ("SELECT alk_enqueue('q', NULL, '1 2')", "ALK04"),
        ("SELECT alk_enqueue('q', NULL, '')", "ALK04"),
        ("SELECT alk_enqueue_batch('q', NULL, '[1, {bad]')", "ALK04"),
        ("SELECT alk_enqueue_batch('q', NULL, '7')", "ALK04"),
        ("SELECT alk_outbox_enqueue('o', NULL, 'nope')", "ALK04"),
        ("SELECT alk_publish('s', 'nope')", "ALK04"),
        ("SELECT alk_notify('c', 'nope')", "ALK04"),
        (
            "SELECT alk_notify('c', json_quote(printf('%.8000c', 'x')))",
            "ALK04",
        ),
        ("SELECT alk_claim('q', 'w', 0)", "ALK05"),
        ("SELECT alk_claim('q', 'w', 1001)", "ALK05"),
        ("SELECT alk_claim('q', 'w', NULL)", "ALK05"),
        ("SELECT alk_claim('q', 'w', 'many')", "ALK05"),
        ("SELECT alk_ack(NULL, 'w')", "ALK05"),
        ("SELECT alk_ack('1', 'w')", "ALK05"),
        ("SELECT alk_ack(1.5, 'w')", "ALK05"),
        ("SELECT alk_retry(1, 'w', 'e', -1)", "ALK05"),
        ("SELECT alk_retry(1, 'w', 'e', 'soon')", "ALK05"),
        ("SELECT alk_retry(1, 'w', 5)", "ALK05"),
        ("SELECT alk_heartbeat(1, 'w', -2)", "ALK05"),
        ("SELECT alk_read('s', -1, 10)", "ALK05"),
        ("SELECT alk_read('s', 0, 0)", "ALK05"),
        ("SELECT alk_read('s', NULL, 10)", "ALK05"),
        ("SELECT alk_save_offset('s', 'c', -1)", "ALK05"),
        ("SELECT alk_publish('s', '1', 5)", "ALK05"),
        ("SELECT alk_lock_acquire('l', 'o', 0)", "ALK05"),
        ("SELECT alk_lock_acquire('l', 'o', NULL)", "ALK05"),
        ("SELECT alk_lock_renew('l', 'o', -1)", "ALK05"),
        ("SELECT alk_ack_batch(NULL, 'w')", "ALK05"),
        ("SELECT alk_ack_batch('{}', 'w')", "ALK05"),
    ] {
        assert_eq!(code(&c, q, &[]), want, "{q}");
    }
    assert_eq!(snapshot(&c), before);
    // Just under the notification limit is fine.
    sql(
        &c,
        "SELECT alk_notify('c', json_quote(printf('%.7997c', 'x')))",
        &[],
    )
    .unwrap();
}

#[test]
fn a_null_in_any_argument_position_gives_a_clear_error_or_the_documented_default() {
    let db = Db::new();
    let c = db.conn();
    // NULL is documented as "default" for these positions:
    let allowed = [
        ("alk_enqueue", 1),
        ("alk_enqueue_batch", 1),
        ("alk_retry", 2),
        ("alk_retry", 3),
        ("alk_fail", 2),
        ("alk_heartbeat", 2),
        ("alk_queue_configure", 1),
        ("alk_sweep", 0),
        ("alk_outbox_enqueue", 1),
        ("alk_publish", 2),
    ];
    for (f, args, _) in CALLS {
        for i in 0..args.len() {
            let mut a = args.to_vec();
            a[i] = "NULL";
            let q = call(f, &a);
            match sql(&c, &q, &[]) {
                Ok(_) => assert!(allowed.contains(&(f, i)), "{q} should fail"),
                Err(rusqlite::Error::SqliteFailure(_, Some(msg))) => {
                    assert!(!allowed.contains(&(f, i)), "{q}: {msg}");
                    assert!(msg.starts_with("alkstore ALK0"), "{q}: {msg}");
                    assert!(msg.contains("NULL") || msg.contains("must"), "{q}: {msg}");
                }
                Err(e) => panic!("{q}: {e}"),
            }
        }
    }
}

#[test]
fn huge_and_deep_payloads_do_not_crash() {
    let db = Db::new();
    let c = db.conn();
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(16 * 1024 * 1024));
    let id = enqueue(&c, "q", None, &big);
    let back: String = c
        .query_row(
            "SELECT json_extract(alk_get_job(?1), '$.payload.blob')",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(back.len(), 16 * 1024 * 1024);
    let jobs = claim(&c, "q", "w", 1);
    assert_eq!(
        jobs[0]["payload"]["blob"].as_str().unwrap().len(),
        16 * 1024 * 1024
    );
    // Deep nesting is checked without recursion (no stack overflow) and kept as given.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let id = int(&c, "SELECT alk_enqueue('q', NULL, ?1)", &[&deep]);
    let len: i64 = c
        .query_row("SELECT length(alk_get_job(?1))", [id], |r| r.get(0))
        .unwrap();
    assert!(len > 200_000);
    assert_eq!(
        code(
            &c,
            "SELECT alk_enqueue('q', NULL, ?1)",
            &[&format!("{deep}]")]
        ),
        "ALK04"
    );
    assert_eq!(
        code(&c, "SELECT alk_enqueue('q', ?1, '1')", &[&deep]),
        "ALK03"
    );
    // Numbers pass as JSON numbers; non-UTF-8 text is refused.
    assert!(matches!(
        sql(&c, "SELECT alk_enqueue('q', NULL, 2.5)", &[]).unwrap(),
        Sql::Integer(_)
    ));
    assert_eq!(
        code(
            &c,
            "SELECT alk_enqueue('q', NULL, CAST(x'ff' AS TEXT))",
            &[]
        ),
        "ALK04"
    );
    assert_eq!(
        code(
            &c,
            "SELECT alk_enqueue(CAST(x'ff' AS TEXT), NULL, '1')",
            &[]
        ),
        "ALK01"
    );
}

#[test]
fn wrong_argument_counts_are_sqlites_own_error() {
    let db = Db::new();
    let c = db.conn();
    let e = sql(&c, "SELECT alk_enqueue('q', NULL)", &[]).unwrap_err();
    assert!(e.to_string().contains("wrong number of arguments"), "{e}");
}

#[test]
fn sqlite_failures_keep_their_result_codes_and_bad_input_still_gets_the_contract_code() {
    let db = Db::new();
    db.conn().execute_batch("SELECT alk_init()").unwrap();
    // Read-only: a bad argument is reported as such (no write lock is taken
    // for it); a real write fails with SQLITE_READONLY.
    let ro =
        rusqlite::Connection::open_with_flags(&db.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    alkstore_sqlite::register(&ro).unwrap();
    assert_eq!(code(&ro, "SELECT alk_enqueue('', NULL, '1')", &[]), "ALK01");
    let (contract, _, rc) = fails(&ro, "SELECT alk_enqueue('q', NULL, '1')", &[]);
    assert_eq!((contract.as_str(), rc & 0xff), ("", 8), "SQLITE_READONLY");
    assert_eq!(
        int(&ro, "SELECT alk_get_offset('s', 'c')", &[]),
        0,
        "reads still work"
    );
    // Busy: another connection holds the write lock and we do not wait.
    let holder = db.conn();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let impatient = db.conn();
    impatient.busy_timeout(std::time::Duration::ZERO).unwrap();
    let (contract, _, rc) = fails(&impatient, "SELECT alk_enqueue('q', NULL, '1')", &[]);
    assert_eq!((contract.as_str(), rc & 0xff), ("", 5), "SQLITE_BUSY");
    holder.execute_batch("ROLLBACK").unwrap();
    enqueue(&impatient, "q", None, "1");
}

/// The catalogue's list of name arguments (`catalogue::name_args`, which
/// the facade uses to refuse a NUL in a name as PostgreSQL cannot receive
/// it) is what the functions check: with a NUL in each text argument of
/// every function, the error is "… name must not contain a NUL character"
/// exactly where the list says a name is.
#[test]
fn the_catalogues_name_arguments_are_the_ones_checked_as_names() {
    use alkstore_core::catalogue::{name_args, FUNCTIONS};
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("SELECT alk_init()").unwrap();
    for f in FUNCTIONS.iter().filter(|f| f.on_sqlite()) {
        let sample: Vec<&str> = f
            .pg_types()
            .iter()
            .map(|t| match *t {
                "text" => "'x'",
                "jsonb" => "'{}'",
                "bigint[]" => "'[1]'",
                _ => "1",
            })
            .collect();
        for (i, t) in f.pg_types().iter().enumerate() {
            if *t != "text" {
                continue;
            }
            let mut args = sample.clone();
            args[i] = "'a' || char(0) || 'b'";
            let q = call(f.name, &args);
            let said = match sql(&c, &q, &[]) {
                Ok(_) => String::new(),
                Err(e) => e.to_string(),
            };
            let as_name = said.contains("name must not contain a NUL character");
            let listed = name_args(f.name).iter().any(|&(k, _)| k == i);
            assert_eq!(as_name, listed, "{q}: {said}");
            if let Some(&(_, kind)) = name_args(f.name).iter().find(|&&(k, _)| k == i) {
                assert!(
                    said.contains(&format!("{} name", kind.label())),
                    "{q}: {said}"
                );
            }
        }
    }
}
