//! Pure-Rust pieces shared by every alkstore engine and the facade.
//!
//! The mechanisms themselves live in the database (`alk_*` SQL functions);
//! this crate only holds what must be spelled identically everywhere: the
//! error taxonomy of contract v1 §3, the name rules of §2, the option
//! parsing of §5, and the time formats of §4.

pub mod catalogue;
pub mod error;
pub mod limits;
pub mod names;
pub mod opts;
pub mod pg_constants;
pub mod pg_grants;
pub mod schedule;
pub mod time;

/// The version of alkstore this build is (the extension's and the libraries').
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The schema version this build creates and migrates to, on both engines.
pub const SCHEMA_VERSION: i64 = 3;

pub use error::{err, Code, ContractError};
pub use limits::QueueLimits;
pub use names::NameKind;
pub use opts::{EnqueueOpts, QueueOpts};
