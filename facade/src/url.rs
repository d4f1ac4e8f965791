//! Database URLs: which engine a URL names, and how to show one without its
//! password.
//!
//! Accepted, with the scheme in any case: `sqlite:PATH`, `sqlite://PATH`,
//! `postgres://…` and `postgresql://…`. Anything else — another scheme
//! (`mysql://…`), `postgresql:app` without `//`, a bare path — is refused at
//! once with [`Error::InvalidArgument`]: a typo must not create a SQLite file
//! or wait on a connection. Messages show URLs through [`redact`].

use crate::error::{Error, Result};

/// The database a URL names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbUrl {
    /// A SQLite file at this path (`:memory:` for an in-memory database).
    Sqlite(String),
    /// A PostgreSQL connection URL, its scheme in lower case.
    Postgres(String),
}

impl DbUrl {
    /// Parses a URL.
    ///
    /// ```
    /// use alkstore::url::DbUrl;
    /// assert_eq!(DbUrl::parse("sqlite:app.db")?, DbUrl::Sqlite("app.db".into()));
    /// assert_eq!(
    ///     DbUrl::parse("Postgres://app@db/app")?,
    ///     DbUrl::Postgres("postgres://app@db/app".into())
    /// );
    /// let refused = DbUrl::parse("mysql://u:secret@h/db").unwrap_err().to_string();
    /// assert!(refused.contains("mysql") && !refused.contains("secret"));
    /// # Ok::<(), alkstore::Error>(())
    /// ```
    pub fn parse(url: &str) -> Result<DbUrl> {
        let refuse = |why: &str| {
            Err(Error::InvalidArgument(format!(
                "database URL {:?}: {why}; use sqlite:PATH or postgres://USER@HOST/DB",
                redact(url)
            )))
        };
        let Some((scheme, rest)) = url.split_once(':') else {
            return refuse("no scheme (a SQLite file is sqlite:PATH)");
        };
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return refuse("no SQLite path");
                }
                Ok(DbUrl::Sqlite(path.to_string()))
            }
            s @ ("postgres" | "postgresql") => {
                if !rest.starts_with("//") {
                    return refuse("a PostgreSQL URL starts with postgres://");
                }
                Ok(DbUrl::Postgres(format!("{s}:{rest}")))
            }
            _ if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
            {
                refuse(&format!(
                    "unsupported scheme {:?}",
                    scheme.to_ascii_lowercase()
                ))
            }
            _ => refuse("no scheme (a SQLite file is sqlite:PATH)"),
        }
    }
}

/// The URL with any password replaced by `***` (in the user info, and a
/// `password=` query parameter), for messages and logs.
///
/// ```
/// assert_eq!(
///     alkstore::url::redact("postgres://app:s3cret@db/app?password=x&sslmode=require"),
///     "postgres://app:***@db/app?password=***&sslmode=require"
/// );
/// ```
pub fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(start) = out.find("://").map(|i| i + 3) {
        let end = out[start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@').map(|i| start + i) {
            if let Some(colon) = out[start..at].find(':').map(|i| start + i) {
                out.replace_range(colon + 1..at, "***");
            }
        }
    }
    // A libpq key=value string (`host=db password=s3cret`): its password's
    // value, quoted or not.
    if !out.contains("://") {
        out = redact_keyword_password(&out);
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out = format!("{head}{}", query.join("&"));
    }
    out
}

/// `password=VALUE` (any case, quoted or not) of a libpq keyword string,
/// its value replaced by `***`.
fn redact_keyword_password(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut out = String::new();
    let mut at = 0;
    while let Some(found) = lower[at..].find("password") {
        let key_end = at + found + "password".len();
        let rest = &s[key_end..];
        let eq = rest.len() - rest.trim_start().len();
        if !rest[eq..].starts_with('=') {
            out.push_str(&s[at..key_end]);
            at = key_end;
            continue;
        }
        let value_start = key_end + eq + 1;
        let value = &s[value_start..];
        let skip = value.len() - value.trim_start().len();
        let value = &value[skip..];
        let len = if let Some(quoted) = value.strip_prefix('\'') {
            // Up to the closing quote; \' inside is a quote.
            let mut end = quoted.len();
            let mut chars = quoted.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '\'' => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            1 + end
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        out.push_str(&s[at..value_start + skip]);
        out.push_str("***");
        at = value_start + skip + len;
    }
    out.push_str(&s[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyword_strings_password_is_never_shown() {
        for (given, want) in [
            (
                "host=db password=s3cret user=app",
                "host=db password=*** user=app",
            ),
            ("host=db PASSWORD = s3cret", "host=db PASSWORD = ***"),
            (
                "password='s3 \\'cret' dbname=app",
                "password=*** dbname=app",
            ),
            ("dbname=app passwordless=1", "dbname=app passwordless=1"),
        ] {
            assert_eq!(redact(given), want, "{given}");
        }
        let e = DbUrl::parse("host=db password=s3cret")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn schemes_in_any_case_and_nothing_else() {
        for (url, want) in [
            ("sqlite:app.db", DbUrl::Sqlite("app.db".into())),
            ("SQLite://data/app.db", DbUrl::Sqlite("data/app.db".into())),
            ("sqlite:///abs/app.db", DbUrl::Sqlite("/abs/app.db".into())),
            ("sqlite::memory:", DbUrl::Sqlite(":memory:".into())),
            ("postgres://h/db", DbUrl::Postgres("postgres://h/db".into())),
            (
                "POSTGRESQL://u@h/db",
                DbUrl::Postgres("postgresql://u@h/db".into()),
            ),
        ] {
            assert_eq!(DbUrl::parse(url).unwrap(), want, "{url}");
        }
        for url in [
            "app.db",
            "pg:app",
            "postgresql:app",
            "mysql://u:pw@h/db",
            "sqlite:",
            "",
            "/var/lib/app.db",
        ] {
            let e = DbUrl::parse(url).unwrap_err();
            assert_eq!(e.code(), Some("ALK05"), "{url}");
            assert!(!e.to_string().contains("pw@"), "{e}");
        }
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("postgres://u:p@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("mysql://u:p:q@h"), "mysql://u:***@h");
        assert_eq!(
            redact("postgres://h/db?PASSWORD=p"),
            "postgres://h/db?PASSWORD=***"
        );
        assert_eq!(redact("sqlite:a@b:c.db"), "sqlite:a@b:c.db");
    }
}
