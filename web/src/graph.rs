//! A job's dependencies drawn as a graph: the jobs it waits for, theirs,
//! and so on (up to [`MAX_DEPTH`] levels and [`MAX_NODES`] jobs), as an
//! SVG with one column per level and the job itself on the right.

use crate::db::{ApiError, Db};
use alkstore::call;
use maud::{html, Markup};
use serde_json::Value;
use std::collections::HashMap;

/// Levels of dependencies read.
pub const MAX_DEPTH: usize = 4;
/// Jobs drawn at most.
pub const MAX_NODES: usize = 60;

/// One job in the graph.
pub struct Node {
    pub id: i64,
    /// The job's state, or `gone` for a row no longer there (acked, or
    /// ended and pruned).
    pub state: String,
    pub level: usize,
    pub depends_on: Vec<i64>,
}

fn ids(job: &Value) -> Vec<i64> {
    job.get("depends_on")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

/// Reads the graph upstream of `job` (its document already read).
pub fn read(db: &Db, job: &Value) -> Result<Vec<Node>, ApiError> {
    let root = job.get("id").and_then(Value::as_i64).unwrap_or(0);
    let mut nodes = vec![Node {
        id: root,
        state: job["state"].as_str().unwrap_or("").to_string(),
        level: 0,
        depends_on: ids(job),
    }];
    let mut seen: HashMap<i64, usize> = HashMap::from([(root, 0)]);
    let mut i = 0;
    while i < nodes.len() {
        let (level, deps) = (nodes[i].level, nodes[i].depends_on.clone());
        i += 1;
        if level >= MAX_DEPTH {
            continue;
        }
        for dep in deps {
            if seen.contains_key(&dep) || nodes.len() >= MAX_NODES {
                continue;
            }
            let doc = db.store().run(call::get_job(dep).raw())?;
            seen.insert(dep, nodes.len());
            nodes.push(Node {
                id: dep,
                state: doc["state"].as_str().unwrap_or("gone").to_string(),
                level: level + 1,
                depends_on: ids(&doc),
            });
        }
    }
    Ok(nodes)
}

const W: i64 = 130;
const H: i64 = 34;
const GAP_X: i64 = 60;
const GAP_Y: i64 = 14;

/// The graph as inline SVG; each job links to its page.
pub fn svg(base: &str, nodes: &[Node]) -> Markup {
    let levels = nodes.iter().map(|n| n.level).max().unwrap_or(0) as i64 + 1;
    let mut row_of: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut rows: HashMap<usize, i64> = HashMap::new();
    for n in nodes {
        let row = rows.entry(n.level).or_insert(0);
        // The root on the right, each level of dependencies one column left.
        let x = (levels - 1 - n.level as i64) * (W + GAP_X) + 10;
        let y = *row * (H + GAP_Y) + 10;
        *row += 1;
        row_of.insert(n.id, (x, y));
    }
    let height = rows.values().max().copied().unwrap_or(1) * (H + GAP_Y) + 10;
    let width = levels * (W + GAP_X) - GAP_X + 20;
    html! {
        svg.graph #dependency-graph width=(width) height=(height) viewBox={"0 0 " (width) " " (height)} xmlns="http://www.w3.org/2000/svg" {
            @for n in nodes {
                @for dep in &n.depends_on {
                    @if let (Some((x1, y1)), Some((x2, y2))) = (row_of.get(dep), row_of.get(&n.id)) {
                        line x1=(x1 + W) y1=(y1 + H / 2) x2=(x2) y2=(y2 + H / 2) class="edge" {}
                    }
                }
            }
            @for n in nodes {
                @let (x, y) = row_of[&n.id];
                a href={(base) "/jobs/" (n.id)} {
                    rect x=(x) y=(y) width=(W) height=(H) rx="5" class={"node " (n.state)} data-job=(n.id) {}
                    text x=(x + 8) y=(y + 21) { "#" (n.id) " " (n.state) }
                }
            }
        }
    }
}
