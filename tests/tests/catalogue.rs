//! The function catalogue (`alkstore_core::catalogue`) is the one list of
//! functions: both PostgreSQL installs define exactly its PostgreSQL
//! functions, with its argument types and defaults, and the SQL API reference
//! documents every one. (The SQLite engine registers exactly its SQLite
//! functions: see `alkstore-sqlite`'s unit tests.)

use alkstore_core::catalogue::FUNCTIONS;
use alkstore_tests::*;

#[test]
fn postgres_installs_define_exactly_the_catalogued_functions() {
    let targets = pg_targets();
    assert!(!targets.is_empty() || !pg_required());
    for target in targets {
        let mut c = postgres::Client::connect(target.pg_url(), postgres::NoTls).unwrap();
        let mut have: Vec<(String, String, i16)> = c
            .query(
                "SELECT p.proname::text, oidvectortypes(p.proargtypes), p.pronargdefaults
                   FROM pg_proc p
                  WHERE p.proname LIKE 'alk\\_%' AND p.pronamespace <> 'alkstore'::regnamespace
                  ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let mut want: Vec<(String, String, i16)> = FUNCTIONS
            .iter()
            .filter(|f| f.on_postgres())
            .map(|f| {
                let defaults = (f.pg_args.len() - f.required) as i16;
                (f.name.to_string(), f.pg_args.join(", "), defaults)
            })
            .collect();
        have.sort();
        want.sort();
        assert_eq!(have, want, "[{}]", target.name());
    }
}

#[test]
fn the_sql_api_reference_documents_every_function() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/sql-api.md"))
        .unwrap();
    let missing: Vec<&str> = FUNCTIONS
        .iter()
        .map(|f| f.name)
        .filter(|name| !doc.contains(&format!("{name}(")))
        .collect();
    assert!(missing.is_empty(), "docs/sql-api.md lacks {missing:?}");
}
