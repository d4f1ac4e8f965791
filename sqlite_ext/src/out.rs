//! What a function body returns to SQL: a leaf module, so that every
//! mechanism can return it without depending on the registration
//! (`function.rs`), which depends on every mechanism.

/// What a function returns to SQL.
pub enum Out {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A boolean, as SQLite's 1 / 0.
    Bool(bool),
    /// Text (JSON documents are text on SQLite).
    Text(String),
}
