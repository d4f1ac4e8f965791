//! Issue 58 item 1: comments and docs cite the behaviour contract by section
//! ("contract v1.1 §C2", "v1.2 §J", "v1 §5"). Every such citation must lead
//! to a heading of docs/contract.md, and each heading there names one section
//! only once.

use alkstore_tests::ROOT;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Directories skipped wherever they are: build output, installed
/// dependencies and version control, none of it ours to cite from.
const SKIP_NAMES: &[&str] = &["target", "node_modules", ".git", "__pycache__"];

/// Directories skipped by their path from the root: `dist` and the package
/// build directories hold generated copies of sources walked anyway, and
/// `sql/frozen` keeps released installs byte for byte (never edited, so a
/// stale citation there could not be fixed). `pg_ext/sql` is generated too
/// but checked in and cites sections, so it is walked.
const SKIP_PATHS: &[&str] = &[
    "dist",
    "sql/frozen",
    "packages/node/lib",
    "packages/python/build",
    "packages/python/dist",
    "packages/python/rust",
];

/// One citation: the file and line it is on, and the section it names in
/// the form docs/contract.md's headings use ("v1.1 §C2").
struct Citation {
    file: String,
    line: usize,
    section: String,
}

/// Every file under `root` outside the skipped directories, sorted, so the
/// walk sees the whole repository and reports in a stable order. Symlinks
/// are not followed (sql/sqlite points at sqlite_ext/sql, walked anyway).
fn repository_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_file() {
                files.push(path);
            } else if kind.is_dir() {
                let name = entry.file_name();
                let skip_name = name.to_str().is_some_and(|n| SKIP_NAMES.contains(&n));
                let skip_path = SKIP_PATHS.contains(&relative(root, &path).as_str());
                if !skip_name && !skip_path {
                    dirs.push(path);
                }
            }
        }
    }
    files.sort();
    files
}

/// `path` relative to `root` with forward slashes, as it is reported and as
/// SKIP_PATHS spells it.
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

/// Splits `s` after its leading run of characters that satisfy `keep`, so
/// the parser below can read a number or a gap and go on after it.
fn take(s: &str, keep: impl Fn(char) -> bool) -> (&str, &str) {
    let end = s.find(|c: char| !keep(c)).unwrap_or(s.len());
    s.split_at(end)
}

/// The text after the "§" that follows a version, if one follows it. Only
/// blanks may come between, plus, when the citation wraps onto the next
/// line, that line's comment leader ("///", "--", "#", "*"): "contract v1.1"
/// at the end of one comment line and "§A4" at the start of the next is
/// still a citation.
fn after_section_mark(s: &str) -> Option<&str> {
    let (gap, rest) = take(s, |c| c.is_whitespace() || "/!-#*>".contains(c));
    let wraps = gap.contains('\n');
    if wraps || gap.chars().all(char::is_whitespace) {
        rest.strip_prefix('§')
    } else {
        None
    }
}

/// The section at the start of `s` and the text after it. A section is an
/// optional capital letter and then digits, at least one of the two ("5",
/// "C", "C2"). A letter or digit right after it means it was a word, not a
/// section, and gives None.
fn section(s: &str) -> Option<(&str, &str)> {
    let letter = usize::from(s.starts_with(|c: char| c.is_ascii_uppercase()));
    let (digits, _) = take(&s[letter..], |c| c.is_ascii_digit());
    let (id, rest) = s.split_at(letter + digits.len());
    let ends_cleanly = !rest.starts_with(char::is_alphanumeric);
    (!id.is_empty() && ends_cleanly).then_some((id, rest))
}

/// The citations in `text`: "v1", an optional ".N", blanks and "§" and a
/// section, wherever "v1" does not continue a longer word. The word
/// "contract" before it is optional, so it is not looked at. A list that
/// shares the version ("v1.1 §A1, §A2", "v1.1 §C2/§C3") gives one citation
/// per section; a range ("§2–§4") gives its two ends. Each is reported at the
/// line where its version is written.
fn citations(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("v1").map(|i| from + i) {
        from = at + 2;
        if text[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric)
        {
            continue;
        }
        let mut rest = &text[at + 2..];
        let mut version = String::from("v1");
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (minor, after_minor) = take(after_dot, |c| c.is_ascii_digit());
            if !minor.is_empty() {
                version = format!("v1.{minor}");
                rest = after_minor;
            }
        }
        let line = text[..at].matches('\n').count() + 1;
        let mut next = after_section_mark(rest);
        while let Some((id, after)) = next.and_then(section) {
            found.push((line, format!("{version} §{id}")));
            // Another section of the same version: ", §A2", "/§C3", "–§4".
            let (_, more) = take(after, |c| " ,/–-".contains(c));
            next = more.strip_prefix('§');
        }
    }
    found
}

/// Every citation in the repository's text files (files that are not UTF-8,
/// such as images and databases, cannot hold one and are passed over).
fn repository_citations(root: &Path) -> Vec<Citation> {
    let mut all = Vec::new();
    for path in repository_files(root) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (line, cited) in citations(&text) {
            all.push(Citation {
                file: relative(root, &path),
                line,
                section: cited,
            });
        }
    }
    all
}

/// The section headings of docs/contract.md with their line numbers: a
/// heading whose title starts with a citation ("## v1.1 §C — Job features")
/// gives that citation ("v1.1 §C"). Other headings are passed over.
fn section_headings(doc: &str) -> Vec<(usize, String)> {
    let mut headings = Vec::new();
    for (i, line) in doc.lines().enumerate() {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#').trim_start();
        if title.starts_with("v1") {
            if let Some((_, cited)) = citations(title).into_iter().next() {
                headings.push((i + 1, cited));
            }
        }
    }
    headings
}

/// docs/contract.md as it is in the tree.
fn contract_doc() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("docs/contract.md"))
        .expect("docs/contract.md: the contract that code comments cite")
}

/// A reader who follows a citation in a comment finds a heading for it. The
/// floor on the count catches a walk or parser that silently finds nothing.
#[test]
fn every_cited_contract_section_has_a_heading_in_docs_contract_md() {
    let headings: BTreeSet<String> = section_headings(&contract_doc())
        .into_iter()
        .map(|(_, cited)| cited)
        .collect();
    let cited = repository_citations(Path::new(ROOT));
    assert!(
        cited.len() > 300,
        "only {} citations found: is the walk or the parser broken?",
        cited.len()
    );
    let unresolved: Vec<String> = cited
        .iter()
        .filter(|c| !headings.contains(&c.section))
        .map(|c| format!("{}:{}: {}", c.file, c.line, c.section))
        .collect();
    assert!(
        unresolved.is_empty(),
        "{} citations name a section that has no heading in docs/contract.md:\n{}",
        unresolved.len(),
        unresolved.join("\n")
    );
}

/// A citation must lead to one place: no section has two headings.
#[test]
fn docs_contract_md_has_one_heading_per_section() {
    let mut first_line: BTreeMap<String, usize> = BTreeMap::new();
    let mut repeated = Vec::new();
    let headings = section_headings(&contract_doc());
    assert!(
        headings.len() >= 40,
        "only {} section headings in docs/contract.md",
        headings.len()
    );
    for (line, heading) in headings {
        if let Some(first) = first_line.get(&heading) {
            repeated.push(format!(
                "docs/contract.md:{line}: {heading} (first at line {first})"
            ));
        } else {
            first_line.insert(heading, line);
        }
    }
    assert!(
        repeated.is_empty(),
        "sections with more than one heading:\n{}",
        repeated.join("\n")
    );
}
