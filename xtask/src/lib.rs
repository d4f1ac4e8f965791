//! The PostgreSQL build, from one manifest (`sql/postgres/manifest.toml`):
//! the generated sources (constants and grants from `alkstore-core`, the
//! claim from its template), the extension's file list for pgrx, its update
//! scripts, and the plain SQL install. `cargo xtask` writes and verifies
//! them; the CLI's build script embeds the plain script through this crate,
//! so no build runs a shell. From the function catalogue it writes the
//! SQLite engine's handler table and the facade's constructor per function
//! (`calls.rs`).

pub mod calls;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What went wrong, said for a person.
pub type Result<T> = std::result::Result<T, String>;

/// Which installs a source belongs to.
#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Installs {
    /// CREATE EXTENSION and the plain SQL install.
    Both,
    /// CREATE EXTENSION only (code backed by the extension's Rust).
    Extension,
    /// The plain SQL install only (PL/pgSQL standing in for such code).
    Plain,
}

impl Installs {
    fn in_extension(self) -> bool {
        self != Installs::Plain
    }
    fn in_plain(self) -> bool {
        self != Installs::Extension
    }
}

/// One source of the manifest.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Path under `sql/postgres/`.
    pub file: String,
    /// Which installs run it.
    pub installs: Installs,
    /// What writes it, for files under `generated/`.
    pub generated: Option<String>,
}

/// A template and its copies.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Template {
    /// The generated source it writes: `generated/<name>.sql`.
    pub name: String,
    /// Path under `sql/postgres/templates/`.
    pub file: String,
    /// One copy per variant, in order; each names the values of `{{…}}`.
    pub variant: Vec<BTreeMap<String, String>>,
}

/// `sql/postgres/manifest.toml`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Every source in install order; the first is the schema.
    pub source: Vec<Source>,
    /// Templates of generated sources.
    #[serde(default)]
    pub template: Vec<Template>,
}

/// The checkout being built, and everything read from it.
pub struct Build {
    root: PathBuf,
    manifest: Manifest,
    version: String,
    /// Generated sources by path under `sql/postgres/`, as they should be.
    generated: BTreeMap<String, String>,
}

/// Dollar-quote tags the assembled scripts wrap the sources in.
const RESERVED_TAGS: [&str; 2] = ["$alkstore_step$", "$alkstore_install$"];

impl Build {
    /// Reads the manifest and renders the generated sources (in memory).
    pub fn new(root: &Path) -> Result<Build> {
        let root = root.to_path_buf();
        let text = read(&root.join("sql/postgres/manifest.toml"))?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|e| format!("sql/postgres/manifest.toml: {e}"))?;
        let cargo: toml::Table = toml::from_str(&read(&root.join("Cargo.toml"))?)
            .map_err(|e| format!("Cargo.toml: {e}"))?;
        let version = cargo["workspace"]["package"]["version"]
            .as_str()
            .ok_or("Cargo.toml: no [workspace.package] version")?
            .to_string();
        if version != alkstore_core::VERSION {
            return Err(format!(
                "Cargo.toml says {version}, alkstore-core was built as {}: rebuild",
                alkstore_core::VERSION
            ));
        }
        let mut build = Build {
            root,
            manifest,
            version,
            generated: BTreeMap::new(),
        };
        build.render()?;
        build.check()?;
        Ok(build)
    }

    /// The version being built.
    pub fn version(&self) -> &str {
        &self.version
    }

    fn render(&mut self) -> Result<()> {
        let mut out = BTreeMap::new();
        for s in &self.manifest.source {
            let Some(kind) = &s.generated else { continue };
            let text = match kind.as_str() {
                "constants" => alkstore_core::pg_constants::sql(),
                "grants" => alkstore_core::pg_grants::sql(),
                name => {
                    let t = self
                        .manifest
                        .template
                        .iter()
                        .find(|t| t.name == name)
                        .ok_or_else(|| format!("{}: no template named {name}", s.file))?;
                    self.expand(t)?
                }
            };
            out.insert(s.file.clone(), text);
        }
        self.generated = out;
        Ok(())
    }

    fn expand(&self, t: &Template) -> Result<String> {
        let dir = self.root.join("sql/postgres/templates");
        let source = read(&dir.join(&t.file))?;
        let mut out = format!(
            "-- GENERATED by `cargo xtask codegen` from sql/postgres/templates/{}\n\
             -- (sql/postgres/manifest.toml): do not edit.\n",
            t.file
        );
        for (i, vars) in t.variant.iter().enumerate() {
            out.push('\n');
            let mut rest = source.as_str();
            while let Some(at) = rest.find("{{") {
                out.push_str(&rest[..at]);
                let end = rest[at..]
                    .find("}}")
                    .ok_or_else(|| format!("templates/{}: an unclosed {{{{", t.file))?;
                let key = rest[at + 2..at + end].trim();
                match key.strip_prefix("include ") {
                    Some(part) => out.push_str(&read(&dir.join(part.trim()))?),
                    None => out.push_str(vars.get(key).ok_or_else(|| {
                        format!(
                            "templates/{}: variant {i} has no value for {{{{{key}}}}}",
                            t.file
                        )
                    })?),
                }
                rest = &rest[at + end + 2..];
                // An include stands on its own line: its text ends with one.
                if key.starts_with("include ") {
                    rest = rest.strip_prefix('\n').unwrap_or(rest);
                }
            }
            out.push_str(rest);
        }
        Ok(out)
    }

    fn check(&self) -> Result<()> {
        let first = self.manifest.source.first().ok_or("manifest: no sources")?;
        if first.installs != Installs::Both || first.generated.is_some() {
            return Err("manifest: the first source is the schema, for both installs".into());
        }
        for s in &self.manifest.source {
            if s.file.starts_with("generated/") != s.generated.is_some() {
                return Err(format!(
                    "manifest: {}: generated sources, and only they, live in generated/",
                    s.file
                ));
            }
        }
        let mut texts: Vec<(String, String)> = Vec::new();
        for s in &self.manifest.source {
            texts.push((s.file.clone(), self.source(s)?));
        }
        for (from, to) in self.released_steps()? {
            let f = format!("upgrade/{from}--{to}.sql");
            texts.push((f.clone(), self.read_sql(&f)?));
        }
        for (file, text) in texts {
            if let Some(tag) = RESERVED_TAGS.iter().find(|t| text.contains(*t)) {
                return Err(format!("sql/postgres/{file} uses the reserved tag {tag}"));
            }
        }
        Ok(())
    }

    fn read_sql(&self, file: &str) -> Result<String> {
        read(&self.root.join("sql/postgres").join(file))
    }

    /// A source's text: generated ones as they should be, not as on disk.
    fn source(&self, s: &Source) -> Result<String> {
        match self.generated.get(&s.file) {
            Some(text) => Ok(text.clone()),
            None => self.read_sql(&s.file),
        }
    }

    fn schema(&self) -> &Source {
        &self.manifest.source[0]
    }

    fn code(&self) -> impl Iterator<Item = &Source> {
        self.manifest.source[1..].iter()
    }

    /// Every upgrade step on disk, as (from, to).
    fn released_steps(&self) -> Result<Vec<(String, String)>> {
        let dir = self.root.join("sql/postgres/upgrade");
        let mut steps = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let name = e.map_err(|e| e.to_string())?.file_name();
            let name = name.to_string_lossy();
            if let Some((from, to)) = name.strip_suffix(".sql").and_then(|n| n.split_once("--")) {
                steps.push((from.to_string(), to.to_string()));
            }
        }
        steps.sort_by_key(|(from, _)| version_key(from));
        Ok(steps)
    }

    /// The released versions an upgrade starts from, oldest first, that are
    /// older than this build (a step being written toward a newer one has
    /// no script yet).
    fn released(&self) -> Result<Vec<String>> {
        let mine = version_key(&self.version);
        Ok(self
            .released_steps()?
            .into_iter()
            .map(|(from, _)| from)
            .filter(|v| version_key(v) < mine)
            .collect())
    }

    /// The upgrade steps from `from` to this version: (from, to, file).
    fn steps_from(&self, from: &str) -> Result<Vec<(String, String, String)>> {
        let steps = self.released_steps()?;
        let mut at = from.to_string();
        let mut out = Vec::new();
        while at != self.version {
            let (a, b) = steps.iter().find(|(a, _)| *a == at).ok_or_else(|| {
                format!(
                    "no upgrade step from {at} toward {} in sql/postgres/upgrade/",
                    self.version
                )
            })?;
            out.push((
                a.clone(),
                b.clone(),
                format!("sql/postgres/upgrade/{a}--{b}.sql"),
            ));
            at = b.clone();
        }
        Ok(out)
    }

    /// Every generated file of the checkout, as it should be: path from the
    /// root, and text.
    pub fn files(&self) -> Result<Vec<(PathBuf, String)>> {
        let mut out: Vec<(PathBuf, String)> = self
            .generated
            .iter()
            .map(|(f, t)| (PathBuf::from("sql/postgres").join(f), t.clone()))
            .collect();
        out.push((
            "pg_ext/src/generated/sources.rs".into(),
            self.pgrx_sources(),
        ));
        out.push((
            "sqlite_ext/src/generated/handlers.rs".into(),
            calls::sqlite_handlers(),
        ));
        out.push((
            "facade/src/generated/functions.rs".into(),
            calls::facade_functions(),
        ));
        for from in self.released()? {
            out.push((
                format!("pg_ext/sql/alkstore--{from}--{}.sql", self.version).into(),
                self.update_script(&from)?,
            ));
        }
        Ok(out)
    }

    /// Files in the generated places that this build would not write.
    pub fn strays(&self) -> Result<Vec<PathBuf>> {
        let want: Vec<PathBuf> = self.files()?.into_iter().map(|(p, _)| p).collect();
        let mut out = Vec::new();
        for dir in [
            "sql/postgres/generated",
            "pg_ext/src/generated",
            "pg_ext/sql",
            "sqlite_ext/src/generated",
            "facade/src/generated",
        ] {
            let Ok(entries) = std::fs::read_dir(self.root.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let p = PathBuf::from(dir).join(e.file_name());
                if !want.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The extension's install script as pgrx embeds it, in manifest order.
    fn pgrx_sources(&self) -> String {
        let mut out = String::from(
            "// GENERATED by `cargo xtask codegen` from sql/postgres/manifest.toml: do not\n\
             // edit. The extension's install script, in order: every source for\n\
             // the extension (installs = \"both\" or \"extension\").\n",
        );
        let mut before: Option<String> = None;
        for s in self
            .manifest
            .source
            .iter()
            .filter(|s| s.installs.in_extension())
        {
            let name = Path::new(&s.file)
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let path = format!("../../../sql/postgres/{}", s.file);
            let tail = match &before {
                None => "bootstrap".to_string(),
                Some(b) => format!("requires = [\"{b}\"]"),
            };
            let _ = writeln!(
                out,
                "::pgrx::extension_sql_file!(\n    \"{path}\",\n    name = \"{name}\",\n    {tail}\n);"
            );
            before = Some(name);
        }
        out
    }

    /// `pg_ext/sql/alkstore--<from>--<version>.sql`: the upgrade steps from
    /// `from`, then every function from this version's sources.
    fn update_script(&self, from: &str) -> Result<String> {
        let v = &self.version;
        let mut out = format!(
            "-- alkstore {from} -> {v}: GENERATED by `cargo xtask codegen`; do not edit.\n\
             -- The upgrade steps, then every function from the {v} sources.\n\
             \\echo Use \"ALTER EXTENSION alkstore UPDATE\" to load this file. \\quit\n"
        );
        for (a, b, file) in self.steps_from(from)? {
            let _ = write!(out, "\n-- ---- step {a} -> {b}: {file} ----\n");
            out.push_str(&read(&self.root.join(&file))?);
        }
        for s in self.code().filter(|s| s.installs.in_extension()) {
            let _ = write!(out, "\n-- ---- sql/postgres/{} ----\n", s.file);
            out.push_str(&self.source(s)?);
        }
        Ok(out)
    }

    /// The plain SQL install, `dist/alkstore--<version>.plain.sql`: one
    /// re-runnable script in one transaction that installs this version,
    /// upgrades an older plain install in place, does nothing on this
    /// version and refuses a newer one or an extension install.
    pub fn plain_sql(&self, file_name: &str) -> Result<String> {
        let v = &self.version;
        let mut out = read(&self.root.join("sql/postgres/plain/head.sql"))?
            .replace("{{version}}", v)
            .replace("{{file}}", file_name);
        out.push_str(&self.source(self.schema())?);
        out.push_str("$alkstore_step$;\n  ELSE\n");
        out.push_str("    RAISE NOTICE 'alkstore: upgrading % to %', installed, target;\n");
        for from in self.released()? {
            let Some((a, b, file)) = self.steps_from(&from)?.into_iter().next() else {
                continue;
            };
            let _ = writeln!(out, "    IF installed = '{a}' THEN");
            out.push_str("      EXECUTE $alkstore_step$\n");
            out.push_str(&read(&self.root.join(&file))?);
            out.push_str("$alkstore_step$;\n");
            let _ = writeln!(out, "      installed := '{b}';");
            out.push_str("    END IF;\n");
        }
        out.push_str(&read(&self.root.join("sql/postgres/plain/middle.sql"))?);
        for s in self.code().filter(|s| s.installs.in_plain()) {
            let _ = write!(out, "\n-- ---- sql/postgres/{} ----\n", s.file);
            out.push_str(&self.source(s)?);
        }
        out.push_str(&read(&self.root.join("sql/postgres/plain/tail.sql"))?);
        Ok(out)
    }

    /// Every file the plain script is made from, for a build script's
    /// `rerun-if-changed`.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = ["Cargo.toml", "sql/postgres"]
            .iter()
            .map(|p| self.root.join(p))
            .collect();
        for dir in ["upgrade", "templates", "plain", "generated"] {
            out.push(self.root.join("sql/postgres").join(dir));
        }
        out
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Versions compare as dotted numbers.
fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// Writes `text` to `path` beside it first and renames it into place, so a
/// reader (a psql running the plain script while tests rebuild it) sees the
/// whole old file or the whole new one.
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // Unique per process and per call: threads of one test binary build
    // the plain script at once, and a shared temporary file would let one
    // rename the other's half-written copy into place.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp.{}.{n}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn the_two_claims_differ_only_in_how_they_name_the_queue() {
        let build = Build::new(&root()).unwrap();
        let claims = &build.generated["generated/claim.sql"];
        let bodies: Vec<&str> = claims
            .split("CREATE OR REPLACE FUNCTION ")
            .skip(1)
            .collect();
        assert_eq!(bodies.len(), 2, "{claims}");
        assert!(bodies[0].starts_with("alk_claim(queue_name text,"));
        assert!(bodies[1].starts_with("alk_outbox_claim(outbox text,"));
        assert!(bodies[1].contains("q      text := alkstore.outbox_prefix() || $1;"));
        assert!(bodies[1].contains("alkstore.name_ok('outbox', $1)"));
        assert!(!bodies[1].contains("'queue', $1"));
        assert!(!claims.contains("{{"), "a placeholder was left: {claims}");
        // Each copy runs one claim statement for one job and for several.
        for b in &bodies {
            assert_eq!(b.matches("SET state = 'running', attempts").count(), 2);
        }
    }

    #[test]
    fn writers_racing_on_one_file_never_leave_it_half_written() {
        let dir = std::env::temp_dir().join(format!("xtask-atomic-{}", std::process::id()));
        let path = dir.join("script.sql");
        let texts: Vec<String> = (0..8).map(|i| format!("{i}").repeat(200_000)).collect();
        std::thread::scope(|s| {
            for t in &texts {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..5 {
                        write_atomically(path, t).unwrap();
                    }
                });
            }
            for _ in 0..200 {
                if let Ok(have) = std::fs::read_to_string(&path) {
                    assert!(
                        texts.contains(&have),
                        "a half-written file: {} bytes",
                        have.len()
                    );
                }
            }
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sources_for_one_install_stay_out_of_the_other() {
        let mut build = Build::new(&root()).unwrap();
        build.manifest.source.push(Source {
            file: "guard.sql".into(),
            installs: Installs::Extension,
            generated: None,
        });
        let marker = "\n-- ---- sql/postgres/guard.sql ----\n";
        let plain = build.plain_sql("x.sql").unwrap();
        assert_eq!(plain.matches(marker).count(), 1);
        let update = build.update_script("0.2.0").unwrap();
        assert_eq!(update.matches(marker).count(), 2);
        assert_eq!(build.pgrx_sources().matches("/guard.sql\"").count(), 2);
        build.manifest.source.last_mut().unwrap().installs = Installs::Plain;
        assert_eq!(build.plain_sql("x.sql").unwrap().matches(marker).count(), 2);
        assert_eq!(
            build
                .update_script("0.2.0")
                .unwrap()
                .matches(marker)
                .count(),
            1
        );
        assert_eq!(build.pgrx_sources().matches("/guard.sql\"").count(), 1);
    }
}
