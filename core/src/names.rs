//! Name rules (contract §2): non-empty, no NUL, and no reserved prefix for
//! the names that share the internal namespace.

use crate::error::{err, Code, ContractError};

/// Names starting with this belong to alkstore itself.
pub const RESERVED_PREFIX: &str = "__alkstore_";

/// The longest name of any kind, in bytes of UTF-8 (contract v1.1 §G).
pub const MAX_NAME_BYTES: usize = 1024;

/// How much of an offending value an error message quotes (contract v1.1 §G).
pub const QUOTE_CHARS: usize = 64;

/// A value as error messages quote it: JSON-quoted, cut to its first
/// [`QUOTE_CHARS`] characters (then `…` follows the closing quote).
pub fn quote(value: &str) -> String {
    match value.char_indices().nth(QUOTE_CHARS) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}…", &value[..cut]),
    }
}

/// A value as error messages show it unquoted (JSON options and payloads):
/// its first [`QUOTE_CHARS`] characters, then `…`.
pub fn excerpt(value: &str) -> String {
    match value.char_indices().nth(QUOTE_CHARS) {
        None => value.to_string(),
        Some((cut, _)) => format!("{}…", &value[..cut]),
    }
}

/// The backing queue of outbox `x` is `__alkstore_outbox:x`.
pub const OUTBOX_QUEUE_PREFIX: &str = "__alkstore_outbox:";

/// The kinds of names the functions take.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NameKind {
    /// A queue name.
    Queue,
    /// An outbox name (its backing queue is derived, see [`outbox_queue`]).
    Outbox,
    /// A stream name.
    Stream,
    /// A notification channel.
    Channel,
    /// A lock (lease) name.
    Lock,
    /// A stream consumer.
    Consumer,
    /// A worker that claims jobs.
    Worker,
    /// A lock owner.
    Owner,
    /// A schedule (contract v1.1 §F).
    Schedule,
}

impl NameKind {
    /// The word used in error messages.
    pub fn label(self) -> &'static str {
        match self {
            NameKind::Queue => "queue",
            NameKind::Outbox => "outbox",
            NameKind::Stream => "stream",
            NameKind::Channel => "channel",
            NameKind::Lock => "lock",
            NameKind::Consumer => "consumer",
            NameKind::Worker => "worker",
            NameKind::Owner => "owner",
            NameKind::Schedule => "schedule",
        }
    }

    /// Whether the reserved prefix is forbidden for this kind.
    pub fn is_namespaced(self) -> bool {
        matches!(
            self,
            NameKind::Queue
                | NameKind::Outbox
                | NameKind::Stream
                | NameKind::Channel
                | NameKind::Lock
        )
    }
}

/// Checks a directly supplied name of the given kind.
///
/// ```
/// use alkstore_core::{names, Code, NameKind};
/// assert!(names::validate(NameKind::Queue, "emails").is_ok());
/// assert_eq!(names::validate(NameKind::Queue, "").unwrap_err().code, Code::InvalidName);
/// assert_eq!(
///     names::validate(NameKind::Queue, "__alkstore_outbox:x").unwrap_err().code,
///     Code::ReservedName
/// );
/// // Workers may use any non-empty name.
/// assert!(names::validate(NameKind::Worker, "__alkstore_w").is_ok());
/// // Of at most 1024 bytes.
/// assert!(names::validate(NameKind::Worker, &"é".repeat(512)).is_ok());
/// assert_eq!(names::validate(NameKind::Worker, &"é".repeat(513)).unwrap_err().code, Code::InvalidName);
/// ```
pub fn validate(kind: NameKind, name: &str) -> Result<(), ContractError> {
    if name.is_empty() {
        return err(
            Code::InvalidName,
            format!("{} name must not be empty", kind.label()),
        );
    }
    if name.len() > MAX_NAME_BYTES {
        return err(
            Code::InvalidName,
            format!(
                "{} name must be at most {MAX_NAME_BYTES} bytes, got {} bytes starting {}",
                kind.label(),
                name.len(),
                quote(name)
            ),
        );
    }
    if name.contains('\0') {
        return err(
            Code::InvalidName,
            format!("{} name must not contain a NUL character", kind.label()),
        );
    }
    if kind.is_namespaced() && name.starts_with(RESERVED_PREFIX) {
        return err(
            Code::ReservedName,
            format!(
                "{} name {} starts with the reserved prefix {:?}",
                kind.label(),
                quote(name),
                RESERVED_PREFIX
            ),
        );
    }
    Ok(())
}

/// Checks a queue name as the admin functions take it (`alk_list_jobs`,
/// `alk_requeue_dead_all`, `alk_purge`): a queue's, or exactly an outbox's
/// backing queue as `alk_queues` lists it — [`OUTBOX_QUEUE_PREFIX`]
/// followed by a valid outbox name — so that an operator can list, requeue
/// and purge an outbox's messages. Every other function keeps refusing
/// the prefix.
///
/// ```
/// use alkstore_core::{names, Code};
/// assert!(names::validate_listed_queue("emails").is_ok());
/// assert!(names::validate_listed_queue("__alkstore_outbox:receipts").is_ok());
/// assert_eq!(names::validate_listed_queue("__alkstore_outbox:").unwrap_err().code, Code::InvalidName);
/// assert_eq!(names::validate_listed_queue("__alkstore_x").unwrap_err().code, Code::ReservedName);
/// ```
pub fn validate_listed_queue(name: &str) -> Result<(), ContractError> {
    match outbox_of(name) {
        Some(outbox) => validate(NameKind::Outbox, outbox),
        None => validate(NameKind::Queue, name),
    }
}

/// The outbox a backing queue name stands for (`__alkstore_outbox:{name}`,
/// as `alk_queues` lists an outbox), or `None` for a queue's own name.
pub fn outbox_of(queue: &str) -> Option<&str> {
    queue.strip_prefix(OUTBOX_QUEUE_PREFIX)
}

/// The backing queue of an outbox (call [`validate`] with [`NameKind::Outbox`] first).
pub fn outbox_queue(outbox: &str) -> String {
    format!("{OUTBOX_QUEUE_PREFIX}{outbox}")
}
