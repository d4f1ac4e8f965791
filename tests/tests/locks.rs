//! Leases (contract §9): fencing tokens, renewals and releases.

use alkstore_tests::*;
use serde_json::Value;

per_engine! {
    fn lock_tokens_fence_each_acquisition(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let l = fresh("lock");
        let t1 = db.int("alk_lock_acquire", &[t(&l), t("a"), Arg::Num(10.0)]);
        assert_eq!(
            db.int("alk_lock_acquire", &[t(&l), t("a"), Arg::Num(10.0)]),
            t1
        );
        assert_eq!(
            db.ok("alk_lock_acquire", &[t(&l), t("b"), Arg::Num(10.0)]),
            Value::Null
        );
        assert!(db.yes("alk_lock_renew", &[t(&l), t("a"), Arg::Num(10.0)]));
        assert!(!db.yes("alk_lock_renew", &[t(&l), t("b"), Arg::Num(10.0)]));
        assert!(!db.yes("alk_lock_release", &[t(&l), t("b")]));
        assert!(db.yes("alk_lock_release", &[t(&l), t("a")]));
        assert!(!db.yes("alk_lock_release", &[t(&l), t("a")]));
        let t2 = db.int("alk_lock_acquire", &[t(&l), t("b"), Arg::Num(0.05)]);
        assert!(t2 > t1);
        sleep_ms(80);
        assert!(
            !db.yes("alk_lock_renew", &[t(&l), t("b"), Arg::Num(10.0)]),
            "[{}] expired",
            db.engine()
        );
        let t3 = db.int("alk_lock_acquire", &[t(&l), t("a"), Arg::Num(10.0)]);
        assert!(t3 > t2);
    }
}
