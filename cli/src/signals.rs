//! SIGTERM and SIGINT for the commands that run until stopped (`relay`,
//! `maintain`): caught before they start work, so that a signal from then
//! on stops them cleanly.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// SIGTERM and SIGINT, caught from now on.
pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    /// Catches both (on `runtime`'s driver).
    pub fn catch(runtime: &tokio::runtime::Runtime) -> std::io::Result<Signals> {
        runtime.block_on(async {
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        })
    }

    /// Until the next of either.
    pub async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
