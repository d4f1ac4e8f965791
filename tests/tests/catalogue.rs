//! The function catalogue (`alkstore_core::catalogue`) is the one list of
//! functions: both PostgreSQL installs define exactly its PostgreSQL
//! functions, with its argument names and types and how many have
//! defaults, and the SQL API reference documents every one. (The SQLite
//! engine registers exactly its SQLite functions: see `alkstore-sqlite`'s
//! unit tests.)

use alkstore_core::catalogue::FUNCTIONS;
use alkstore_tests::*;

#[test]
fn postgres_installs_define_exactly_the_catalogued_functions() {
    let targets = pg_targets();
    assert!(!targets.is_empty() || !pg_required());
    for target in targets {
        let mut c = postgres::Client::connect(target.pg_url(), postgres::NoTls).unwrap();
        // The argument names too: the facade's constructors
        // (`alkstore::call::functions`) are generated with them.
        let mut have: Vec<(String, String, String, i16)> = c
            .query(
                "SELECT p.proname::text, oidvectortypes(p.proargtypes),
                        coalesce(array_to_string(p.proargnames[1:p.pronargs], ', '), ''), p.pronargdefaults
                   FROM pg_proc p
                  WHERE p.proname LIKE 'alk\\_%' AND p.pronamespace <> 'alkstore'::regnamespace
                  ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        let mut want: Vec<(String, String, String, i16)> = FUNCTIONS
            .iter()
            .filter(|f| f.on_postgres())
            .map(|f| {
                let defaults = (f.args.len() - f.required) as i16;
                let names: Vec<&str> = f.params().map(|p| p.name).collect();
                (
                    f.name.to_string(),
                    f.pg_types().join(", "),
                    names.join(", "),
                    defaults,
                )
            })
            .collect();
        have.sort();
        want.sort();
        assert_eq!(have, want, "[{}]", target.name());
    }
}

/// Issue 34 item 12: the docs name exactly the catalogue's admin-only
/// functions, in its order, on the line after the marker.
#[test]
fn the_docs_list_exactly_the_admin_only_functions() {
    let want = FUNCTIONS
        .iter()
        .filter(|f| f.on_postgres() && f.role == alkstore_core::catalogue::Role::Admin)
        .map(|f| format!("`{}`", f.name))
        .collect::<Vec<_>>()
        .join(", ")
        + ".";
    for file in ["docs/sql-api.md", "docs/security.md"] {
        let doc =
            std::fs::read_to_string(format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mut lines = doc.lines();
        let listed = lines
            .find(|l| l.starts_with("<!-- admin-only, from core/src/catalogue.rs"))
            .and_then(|_| lines.next());
        assert_eq!(
            listed,
            Some(want.as_str()),
            "{file}: the line after the admin-only marker"
        );
    }
}

/// Issue 63: docs/security.md names exactly the functions a trusted SQLite
/// schema may call (`InSchema::Trusted`), in the catalogue's order.
#[test]
fn the_docs_list_exactly_the_functions_a_trusted_schema_may_call() {
    use alkstore_core::catalogue::InSchema;
    let want = FUNCTIONS
        .iter()
        .filter(|f| f.on_sqlite() && f.in_schema == InSchema::Trusted)
        .map(|f| format!("`{}`", f.name))
        .collect::<Vec<_>>()
        .join(", ")
        + ".";
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .unwrap();
    let mut lines = doc.lines();
    let listed = lines
        .find(|l| l.starts_with("<!-- callable from a trusted schema, from core/src/catalogue.rs"))
        .and_then(|_| lines.next());
    assert_eq!(listed, Some(want.as_str()));
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

/// The catalogue's name arguments (`catalogue::name_args`, which the Rust
/// crate uses to refuse a NUL in a name before PostgreSQL sees it) are the
/// ones PostgreSQL's functions check as names: with an empty string in
/// each text argument of every PostgreSQL function, the error is "… name
/// must not be empty" exactly where the list says a name is. (SQLite's
/// side: `alkstore-sqlite`'s error tests.)
#[test]
fn postgres_checks_as_names_exactly_the_catalogues_name_arguments() {
    use alkstore_core::catalogue::name_args;
    for target in pg_targets() {
        let e = target.name();
        let mut db = target.connect();
        for f in FUNCTIONS.iter().filter(|f| f.on_postgres()) {
            let sample: Vec<Arg> = f
                .pg_types()
                .iter()
                .map(|t| match *t {
                    "text" => Arg::Text(fresh("names")),
                    "jsonb" => j("{}"),
                    "bigint[]" => Arg::Ids(vec![1]),
                    _ => Arg::Int(1),
                })
                .collect();
            for (i, t) in f.pg_types().iter().enumerate() {
                if *t != "text" {
                    continue;
                }
                let mut args = sample.clone();
                args[i] = Arg::Text(String::new());
                let said = match db.call(f.name, &args) {
                    Ok(_) => String::new(),
                    Err(failure) => failure.message,
                };
                let as_name = said.contains("name must not be empty");
                let listed = name_args(f.name).iter().find(|&&(k, _)| k == i);
                assert_eq!(
                    as_name,
                    listed.is_some(),
                    "[{e}] {} argument {i}: {said}",
                    f.name
                );
                if let Some((_, kind)) = listed {
                    assert!(
                        said.contains(&format!("{} name", kind.label())),
                        "[{e}] {said}"
                    );
                }
            }
        }
    }
}
