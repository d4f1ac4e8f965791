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

pub use claim::{alk_claim, claim_from};
pub use documents::{alk_get_job, alk_job_errors, job_doc};
pub use enqueue::{alk_enqueue, alk_enqueue_batch, enqueue_one, queue_opts};
pub use finish::{alk_ack, alk_ack_batch, alk_cancel, alk_fail, alk_heartbeat, alk_retry};
pub use options::{alk_queue_configure, alk_queue_opts};
pub use requeue::{alk_requeue_dead, requeue_one};
pub use stats::{alk_queue_stats, stats_obj, stats_of};
pub use sweep::alk_sweep;
