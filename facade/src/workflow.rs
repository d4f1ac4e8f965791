//! Workflows: a graph of jobs enqueued in one transaction, each step
//! running after the steps it names (contract v1.2 §J, `depends_on`).
//!
//! The database does the rest: a step waits until every step before it was
//! acked, and when one goes dead or is cancelled, the steps after it go
//! dead at once (`dependency <id> dead`), down the graph.

use crate::{EnqueueOpts, Error, Result};
#[cfg(feature = "blocking")]
use crate::{Store, TxHandle};
use serde_json::Value;
use std::collections::BTreeMap;

/// A graph of jobs, by step name; [`Workflow::enqueue`] writes it in one
/// transaction and returns each step's job id.
///
/// ```
/// use alkstore::Workflow;
/// use serde_json::json;
///
/// let dir = tempfile::tempdir()?;
/// let store = alkstore::open(&format!("sqlite:{}", dir.path().join("w.db").display()))?;
/// let ids = Workflow::new()
///     .step("fetch", "etl", json!({"url": "https://example.com/a.csv"}), &[])
///     .step("parse", "etl", json!({}), &["fetch"])
///     .step("index", "etl", json!({}), &["fetch"])
///     .step("report", "mail", json!({"to": "ops@example.com"}), &["parse", "index"])
///     .enqueue(&store)?;
/// let report = store.get_job(ids["report"])?.unwrap();
/// assert_eq!(report["waiting_for"], json!([ids["parse"], ids["index"]]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Workflow {
    steps: Vec<Step>,
}

#[derive(Clone, Debug)]
struct Step {
    name: String,
    queue: String,
    opts: EnqueueOpts,
    payload: Value,
    after: Vec<String>,
}

impl Workflow {
    /// An empty workflow.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds step `name`: a job of `queue` with `payload` that runs after
    /// the steps named in `after` (steps added before or after this one).
    pub fn step(self, name: &str, queue: &str, payload: Value, after: &[&str]) -> Self {
        self.step_with(name, queue, EnqueueOpts::new(), payload, after)
    }

    /// [`step`](Self::step) with enqueue options (a priority, a group, a
    /// limit key…). Their `depends_on` may name jobs outside the workflow;
    /// the steps in `after` are added to them.
    pub fn step_with(
        mut self,
        name: &str,
        queue: &str,
        opts: EnqueueOpts,
        payload: Value,
        after: &[&str],
    ) -> Self {
        self.steps.push(Step {
            name: name.to_owned(),
            queue: queue.to_owned(),
            opts,
            payload,
            after: after.iter().map(|s| (*s).to_owned()).collect(),
        });
        self
    }

    /// Enqueues every step in one transaction of `store`: all of them, or
    /// (on any error) none. Returns each step's job id by name.
    #[cfg(feature = "blocking")]
    pub fn enqueue(&self, store: &Store) -> Result<BTreeMap<String, i64>> {
        let order = self.order()?; // checked before the transaction opens
        let mut tx = store.begin()?;
        match self.enqueue_in(&mut *tx, &order) {
            Ok(ids) => {
                tx.commit()?;
                Ok(ids)
            }
            Err(e) => {
                let _ = tx.rollback();
                Err(e)
            }
        }
    }

    /// Enqueues every step inside your transaction `tx` (with your own
    /// rows): the jobs exist only if it commits.
    #[cfg(feature = "blocking")]
    pub fn enqueue_tx(&self, tx: &mut dyn TxHandle) -> Result<BTreeMap<String, i64>> {
        let order = self.order()?;
        self.enqueue_in(tx, &order)
    }

    #[cfg(feature = "blocking")]
    fn enqueue_in(&self, tx: &mut dyn TxHandle, order: &[usize]) -> Result<BTreeMap<String, i64>> {
        let mut ids = BTreeMap::new();
        for &i in order {
            let (step, opts) = self.with_edges(i, &ids);
            let id = tx.enqueue_tx(&step.queue, &opts, &step.payload)?;
            ids.insert(step.name.clone(), id);
        }
        Ok(ids)
    }

    /// [`enqueue_tx`](Self::enqueue_tx) on an async transaction (sqlx,
    /// tokio-postgres): the jobs exist only if it commits.
    #[cfg(any(
        feature = "sqlx-postgres",
        feature = "sqlx-sqlite",
        feature = "tokio-postgres"
    ))]
    pub async fn enqueue_async(
        &self,
        tx: &mut impl crate::AsyncTxHandle,
    ) -> Result<BTreeMap<String, i64>> {
        let order = self.order()?;
        let mut ids = BTreeMap::new();
        for i in order {
            let (step, opts) = self.with_edges(i, &ids);
            let id = tx.enqueue_tx(&step.queue, &opts, &step.payload).await?;
            ids.insert(step.name.clone(), id);
        }
        Ok(ids)
    }

    /// Step `i` and its options with the ids of the steps it runs after
    /// (enqueued already: `order` puts them first).
    fn with_edges(&self, i: usize, ids: &BTreeMap<String, i64>) -> (&Step, EnqueueOpts) {
        let step = &self.steps[i];
        let mut opts = step.opts.clone();
        opts.depends_on
            .extend(step.after.iter().map(|name| ids[name.as_str()]));
        (step, opts)
    }

    /// The steps in an order that enqueues every step after those it names
    /// (the order added, where the graph allows); an unknown or repeated
    /// name or a cycle is `InvalidOptions`.
    fn order(&self) -> Result<Vec<usize>> {
        let bad = |msg: String| Err(Error::InvalidOptions(msg));
        let mut index = BTreeMap::new();
        for (i, step) in self.steps.iter().enumerate() {
            if index.insert(step.name.as_str(), i).is_some() {
                return bad(format!("workflow step {:?} is named twice", step.name));
            }
        }
        for step in &self.steps {
            if let Some(missing) = step.after.iter().find(|n| !index.contains_key(n.as_str())) {
                return bad(format!(
                    "workflow step {:?} runs after {missing:?}, which is not a step",
                    step.name
                ));
            }
        }
        let mut done = vec![false; self.steps.len()];
        let mut order = Vec::with_capacity(self.steps.len());
        while order.len() < self.steps.len() {
            let ready = (0..self.steps.len())
                .find(|&i| !done[i] && self.steps[i].after.iter().all(|n| done[index[n.as_str()]]));
            match ready {
                Some(i) => {
                    done[i] = true;
                    order.push(i);
                }
                None => {
                    let stuck: Vec<&str> = (0..self.steps.len())
                        .filter(|&i| !done[i])
                        .map(|i| self.steps[i].name.as_str())
                        .collect();
                    return bad(format!(
                        "workflow steps {stuck:?} depend on each other in a cycle"
                    ));
                }
            }
        }
        Ok(order)
    }
}
