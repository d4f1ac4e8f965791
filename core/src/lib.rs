//! Pure-Rust pieces shared by every alkstore engine and the facade.
//!
//! The mechanisms themselves live in the database (`alk_*` SQL functions);
//! this crate only holds what must be spelled identically everywhere: the
//! error taxonomy of contract v1 §3, the name rules of §2, the option
//! parsing of §5, and the time formats of §4.

pub mod error;
pub mod names;
pub mod opts;
pub mod time;

pub use error::{err, Code, ContractError};
pub use names::NameKind;
pub use opts::{EnqueueOpts, QueueOpts};
