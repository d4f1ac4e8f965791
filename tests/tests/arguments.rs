//! Argument checking (contract §2, §3): bad names, options, payloads and
//! arguments fail with the contract's code, report the first bad argument
//! and change nothing, on every engine and every entry point.

use alkstore_tests::*;
use serde_json::json;

#[test]
fn reserved_and_empty_names_are_rejected_by_every_entry_point() {
    let calls: &[(&str, Vec<Arg>, usize)] = &[
        ("alk_enqueue", vec![t("q"), Arg::Null, j("{}")], 0),
        ("alk_enqueue_batch", vec![t("q"), Arg::Null, j("[1]")], 0),
        ("alk_claim", vec![t("q"), t("w"), Arg::Int(1)], 0),
        ("alk_queue_configure", vec![t("q"), j("{}")], 0),
        ("alk_queue_opts", vec![t("q")], 0),
        ("alk_queue_stats", vec![t("q")], 0),
        ("alk_sweep", vec![t("q")], 0),
        ("alk_outbox_enqueue", vec![t("o"), Arg::Null, j("{}")], 0),
        ("alk_outbox_claim", vec![t("o"), t("w"), Arg::Int(1)], 0),
        ("alk_outbox_stats", vec![t("o")], 0),
        ("alk_publish", vec![t("s"), j("{}"), t("k")], 0),
        ("alk_read", vec![t("s"), Arg::Int(0), Arg::Int(10)], 0),
        ("alk_save_offset", vec![t("s"), t("c"), Arg::Int(1)], 0),
        ("alk_get_offset", vec![t("s"), t("c")], 0),
        ("alk_notify", vec![t("ch"), j("{}")], 0),
        ("alk_lock_acquire", vec![t("l"), t("o"), Arg::Num(10.0)], 0),
        ("alk_lock_renew", vec![t("l"), t("o"), Arg::Num(10.0)], 0),
        ("alk_lock_release", vec![t("l"), t("o")], 0),
        // workers, consumers, owners: names too, but no reserved namespace
        ("alk_claim", vec![t("q"), t("w"), Arg::Int(1)], 1),
        ("alk_ack", vec![Arg::Int(1), t("w")], 1),
        ("alk_save_offset", vec![t("s"), t("c"), Arg::Int(1)], 1),
        ("alk_lock_acquire", vec![t("l"), t("o"), Arg::Num(1.0)], 1),
    ];
    each(|db, _| {
        for (f, args, slot) in calls {
            let namespaced = *slot == 0;
            let mut bad: Vec<(Arg, &str)> = vec![(t(""), "ALK01")];
            if namespaced {
                bad.push((t("__alkstore_x"), "ALK02"));
                bad.push((t("__alkstore_outbox:o"), "ALK02"));
                if *f != "alk_sweep" {
                    bad.push((Arg::Null, "ALK01"));
                }
            }
            for (arg, want) in bad {
                let mut a = args.clone();
                a[*slot] = arg.clone();
                assert_eq!(db.code(f, &a), want, "[{}] {f} with {arg:?}", db.engine());
            }
        }
        let e = db
            .call(
                "alk_enqueue",
                &[t("__alkstore_outbox:o"), Arg::Null, j("1")],
            )
            .unwrap_err();
        assert!(
            e.message.contains("ReservedName") && e.message.contains("__alkstore_outbox:o"),
            "{e:?}"
        );
    });
}

per_engine! {
    fn bad_options_payloads_and_arguments_are_rejected_and_change_nothing(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("bad");
        for opts in [
            r#"{"dely_s": 1}"#,
            r#"{"delay_s": 1, "run_at": "2030-01-01T00:00:00Z"}"#,
            r#"{"delay_s": -1}"#,
            r#"{"delay_s": "1"}"#,
            r#"{"delay_s": null}"#,
            r#"{"expires_in_s": 0}"#,
            r#"{"max_attempts": 0}"#,
            r#"{"priority": 1.5}"#,
            r#"{"priority": "high"}"#,
            r#"{"run_at": "tomorrow"}"#,
            r#"{"run_at": -5}"#,
            "[1]",
            "42",
        ] {
            for f in ["alk_enqueue", "alk_outbox_enqueue"] {
                assert_eq!(
                    db.code(f, &[t(&q), j(opts), j("1")]),
                    "ALK03",
                    "[{}] {f} {opts}",
                    db.engine()
                );
            }
            assert_eq!(
                db.code("alk_enqueue_batch", &[t(&q), j(opts), j("[1]")]),
                "ALK03"
            );
        }
        for opts in [
            r#"{"visibility_timeout_s": 0}"#,
            r#"{"backoff_base_s": -1}"#,
            r#"{"delay_s": 1}"#,
            r#"{"max_attempts": 1.5}"#,
            "[]",
        ] {
            assert_eq!(
                db.code("alk_queue_configure", &[t(&q), j(opts)]),
                "ALK03",
                "[{}] {opts}",
                db.engine()
            );
        }
        for (f, args, want) in [
            ("alk_enqueue", vec![t(&q), Arg::Null, j("{bad")], "ALK04"),
            ("alk_enqueue", vec![t(&q), Arg::Null, Arg::Null], "ALK04"),
            (
                "alk_enqueue_batch",
                vec![t(&q), Arg::Null, j(r#"{"a": 1}"#)],
                "ALK04",
            ),
            ("alk_publish", vec![t(&q), Arg::Null], "ALK04"),
            (
                "alk_notify",
                vec![t("c"), j(&format!("\"{}\"", "x".repeat(8000)))],
                "ALK04",
            ),
            ("alk_claim", vec![t(&q), t("w"), Arg::Int(0)], "ALK05"),
            ("alk_claim", vec![t(&q), t("w"), Arg::Int(1001)], "ALK05"),
            ("alk_claim", vec![t(&q), t("w"), Arg::Null], "ALK05"),
            ("alk_ack", vec![Arg::Null, t("w")], "ALK05"),
            (
                "alk_retry",
                vec![Arg::Int(1), t("w"), t("e"), Arg::Num(-1.0)],
                "ALK05",
            ),
            (
                "alk_heartbeat",
                vec![Arg::Int(1), t("w"), Arg::Num(0.0)],
                "ALK05",
            ),
            ("alk_read", vec![t(&q), Arg::Int(-1), Arg::Int(10)], "ALK05"),
            ("alk_read", vec![t(&q), Arg::Int(0), Arg::Int(0)], "ALK05"),
            (
                "alk_save_offset",
                vec![t(&q), t("c"), Arg::Int(-1)],
                "ALK05",
            ),
            (
                "alk_lock_acquire",
                vec![t(&q), t("o"), Arg::Num(0.0)],
                "ALK05",
            ),
            ("alk_lock_acquire", vec![t(&q), t("o"), Arg::Null], "ALK05"),
        ] {
            assert_eq!(db.code(f, &args), want, "[{}] {f} {args:?}", db.engine());
        }
        // Nothing above left a trace.
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!(
            (stats["pending"].clone(), stats["scheduled"].clone()),
            (json!(0), json!(0))
        );
        assert_eq!(db.ok("alk_queue_opts", &[t(&q)])["max_attempts"], 5);
        assert_eq!(
            db.ok("alk_read", &[t(&q), Arg::Int(0), Arg::Int(10)]),
            json!([])
        );
        // Just under the notification limit is fine.
        db.ok(
            "alk_notify",
            &[t("c"), j(&format!("\"{}\"", "x".repeat(7997)))],
        );
    }
}

per_engine! {
    /// With several bad arguments, every engine reports the first, in argument
    /// order, so one call fails the same way on each.
    fn the_first_bad_argument_is_the_one_reported(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let q = fresh("first-bad");
        for (f, args, want) in [
            ("alk_claim", vec![Arg::Null, t(""), Arg::Int(0)], "ALK01"),
            ("alk_claim", vec![t(&q), t(""), Arg::Int(0)], "ALK01"),
            ("alk_outbox_claim", vec![t(""), t(""), Arg::Int(0)], "ALK01"),
            ("alk_ack", vec![Arg::Null, t("")], "ALK05"),
            ("alk_ack_batch", vec![Arg::Null, t("")], "ALK05"),
            ("alk_fail", vec![Arg::Null, t(""), t("e")], "ALK05"),
            (
                "alk_heartbeat",
                vec![Arg::Null, t("w"), Arg::Num(0.0)],
                "ALK05",
            ),
            (
                "alk_heartbeat",
                vec![Arg::Int(1), t(""), Arg::Num(0.0)],
                "ALK01",
            ),
            (
                "alk_retry",
                vec![Arg::Int(1), t(""), t("e"), Arg::Num(-1.0)],
                "ALK01",
            ),
            (
                "alk_retry",
                vec![Arg::Null, t(""), t("e"), Arg::Num(-1.0)],
                "ALK05",
            ),
            (
                "alk_read",
                vec![Arg::Null, Arg::Int(-1), Arg::Int(0)],
                "ALK01",
            ),
            ("alk_publish", vec![t(""), Arg::Null], "ALK01"),
        ] {
            assert_eq!(db.code(f, &args), want, "[{}] {f} {args:?}", db.engine());
        }
    }
}
