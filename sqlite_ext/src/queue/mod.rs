//! Queues (contract §5): enqueue with stamping, claims in claim order,
//! the job-id functions, options, stats and sweeping — a module per
//! mechanism.

mod claim;
mod documents;
mod enqueue;
mod finish;
mod options;
mod requeue;
mod stats;
mod sweep;

pub use claim::{claim, claim_from};
pub use documents::{get_job, job_doc, job_errors};
pub use enqueue::{enqueue, enqueue_batch, enqueue_one, queue_opts};
pub use finish::{ack, ack_batch, cancel, fail, heartbeat, retry};
pub use options::{configure, opts};
pub use requeue::{requeue_dead, requeue_one};
pub use stats::{stats, stats_obj, stats_of};
pub use sweep::sweep;
