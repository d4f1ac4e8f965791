//! The SQL examples of docs/sql-api.md and the README marked
//! `<!-- docs-test -->` run as they are, on every engine: documentation
//! that works when pasted.

use alkstore_tests::*;

/// The SQL blocks that follow a `<!-- docs-test -->` line.
fn marked_blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "<!-- docs-test -->" {
            continue;
        }
        assert_eq!(
            lines.next().map(str::trim),
            Some("```sql"),
            "a marked block is SQL"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        blocks.push(body.join("\n"));
    }
    blocks
}

#[test]
fn the_marked_sql_examples_run_on_every_engine() {
    let mut blocks = Vec::new();
    for file in ["docs/sql-api.md", "README.md"] {
        let path = format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"));
        blocks.extend(marked_blocks(&std::fs::read_to_string(path).unwrap()));
    }
    assert!(blocks.len() >= 6, "{} marked examples", blocks.len());
    for target in targets() {
        let mut db = target.connect();
        for block in &blocks {
            // exec panics with the engine's error if a statement fails.
            db.exec(block);
        }
    }
}
