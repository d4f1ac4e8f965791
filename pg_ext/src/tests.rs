//! In-server tests (`cargo pgrx test`): the extension installs and its
//! functions work inside one backend. Behaviour under concurrency, roles
//! and both install methods is tested from outside, in `tests/`.

use pgrx::prelude::*;

#[pg_test]
fn a_job_round_trip_inside_one_transaction() {
    let id = Spi::get_one::<i64>("SELECT alk_enqueue('pgrx-rt', NULL, '{\"n\": 1}')")
        .unwrap()
        .unwrap();
    let claimed = Spi::get_one::<i64>("SELECT id FROM alk_claim('pgrx-rt', 'w', 10)")
        .unwrap()
        .unwrap();
    assert_eq!(claimed, id);
    let acked = Spi::get_one::<bool>(&format!("SELECT alk_ack({id}, 'w')"))
        .unwrap()
        .unwrap();
    assert!(acked);
    let gone = Spi::get_one::<pgrx::JsonB>(&format!("SELECT alk_get_job({id})")).unwrap();
    assert!(gone.is_none());
}

#[pg_test]
fn stamped_options_show_in_get_job() {
    Spi::run("SELECT alk_queue_configure('pgrx-stamp', '{\"visibility_timeout_s\": 0.25}')")
        .unwrap();
    let state = Spi::get_one::<String>(
        "SELECT alk_get_job(alk_enqueue('pgrx-stamp', '{\"max_attempts\": 2}', '1'))::text",
    )
    .unwrap()
    .unwrap();
    assert!(state.contains("\"max_attempts\": 2"), "{state}");
    assert!(state.contains("\"visibility_timeout_s\": 0.25"), "{state}");
}

#[pg_test(
    error = "alkstore: ReservedName: queue name \"__alkstore_outbox:x\" starts with the reserved prefix \"__alkstore_\""
)]
fn the_backing_queue_of_an_outbox_is_reserved() {
    Spi::run("SELECT alk_enqueue('__alkstore_outbox:x', NULL, '1')").unwrap();
}

#[pg_test]
fn stream_offsets_are_dense() {
    for want in 1..=3i64 {
        let got = Spi::get_one::<i64>("SELECT alk_publish('pgrx-s', '{}')")
            .unwrap()
            .unwrap();
        assert_eq!(got, want);
    }
}
