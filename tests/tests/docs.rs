//! The SQL examples of docs/sql-api.md, docs/features.md and the README marked
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
    for file in ["docs/sql-api.md", "docs/features.md", "README.md"] {
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

/// The markdown files a reader of the repository meets.
fn doc_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(ROOT);
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    for dir in ["docs", "examples/python", "examples/node"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                files.push(e.path());
            }
        }
    }
    files
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped,
/// spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_link_in_the_docs_stays_in_the_repository_and_resolves() {
    let mut checked = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        // Outside code blocks only.
        let prose: String = text.split("```").step_by(2).collect::<Vec<_>>().join("\n");
        assert!(
            !text.contains("../shared/"),
            "{} points outside the repository",
            file.display()
        );
        for (i, _) in prose.match_indices("](") {
            let rest = &prose[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if target.starts_with("http") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            assert!(
                resolved.exists(),
                "{}: the link {target} leads nowhere",
                file.display()
            );
            if !fragment.is_empty() && path.ends_with(".md")
                || path.is_empty() && !fragment.is_empty()
            {
                let doc = std::fs::read_to_string(&resolved).unwrap();
                let found = doc
                    .lines()
                    .filter_map(|l| l.strip_prefix('#'))
                    .map(|h| anchor(h.trim_start_matches('#')))
                    .any(|a| a == fragment);
                assert!(found, "{}: no heading for {target}", file.display());
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links checked");
}

#[test]
fn the_readme_reads_in_five_minutes() {
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move reference material to docs/"
    );
    let bench = std::fs::read_to_string(format!("{ROOT}/docs/benchmarks.md")).unwrap();
    assert!(
        bench.lines().nth(2) == Some("## Summary"),
        "docs/benchmarks.md opens with its summary table"
    );
}
