//! `alkstore web`: the dashboard of the `alkstore-web` crate on an address.

use crate::Fallible;
use std::net::SocketAddr;

/// Serves the dashboard until interrupted. Refuses an address other than
/// loopback without a token: a dashboard that requeues and purges must not
/// be open to the network.
pub fn serve(url: &str, listen: &str, token: Option<String>, read_only: bool) -> Fallible {
    let addr: SocketAddr = listen.parse().map_err(|e| {
        format!("--listen {listen:?} is not an address such as 127.0.0.1:8081: {e}")
    })?;
    let token = token.filter(|t| !t.is_empty());
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "refusing to serve the dashboard on {addr} without a token: anyone who reaches it \
             could requeue and purge jobs; give --token (or ALKSTORE_WEB_TOKEN), or listen on 127.0.0.1"
        )
        .into());
    }
    let db = alkstore_web::Db::open(url)?;
    if let Some(note) = alkstore_web::role_note(&db) {
        eprintln!("alkstore web: {note}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let config = alkstore_web::Config {
            token,
            read_only,
            base: String::new(),
        };
        let app = alkstore_web::router(db, config);
        eprintln!(
            "alkstore web: serving http://{}/{}",
            listener.local_addr()?,
            if read_only { " (read-only)" } else { "" }
        );
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(())
    })
}
