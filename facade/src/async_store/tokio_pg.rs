//! The tokio-postgres engine's pieces (feature `tokio-postgres`): pooled
//! connections and owned transactions over deadpool-postgres, and the
//! wake-up listener on a connection of its own.

use super::wakeups::{Listener, Received, Watched};
use crate::async_tx::AsyncTxHandle;
use crate::error::{Error, Result};
use std::ops::{Deref, DerefMut};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};

/// A connection checked out of a deadpool-postgres pool.
#[doc(hidden)]
pub struct Pooled(deadpool_postgres::Object);

impl Pooled {
    pub(crate) async fn get(pool: &deadpool_postgres::Pool) -> Result<Pooled> {
        Ok(Pooled(pool.get().await.map_err(pool_error)?))
    }
}

impl Deref for Pooled {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.0
    }
}

impl DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

fn pool_error(e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(e) => e.into(),
        other => Error::engine("postgres", "", other.to_string()),
    }
}

/// A transaction on a pooled tokio-postgres connection that it owns (so a
/// worker can hand it to a handler and get it back). Dropped while open,
/// its connection is closed rather than returned to the pool, so the
/// server rolls it back and no one gets a connection inside a transaction.
pub struct PgClientTx {
    conn: Option<deadpool_postgres::Object>,
}

impl PgClientTx {
    pub(crate) async fn begin(pool: &deadpool_postgres::Pool) -> Result<PgClientTx> {
        let conn = pool.get().await.map_err(pool_error)?;
        conn.batch_execute("BEGIN").await?;
        Ok(PgClientTx { conn: Some(conn) })
    }

    /// Commits; the connection goes back to the pool.
    pub async fn commit(mut self) -> Result<()> {
        self.end("COMMIT").await
    }

    /// Rolls back; the connection goes back to the pool.
    pub async fn rollback(mut self) -> Result<()> {
        self.end("ROLLBACK").await
    }

    async fn end(&mut self, sql: &str) -> Result<()> {
        let conn = self.conn.as_ref().expect("open until ended");
        conn.batch_execute(sql).await?;
        self.conn = None; // back to the pool, outside any transaction
        Ok(())
    }
}

impl Deref for PgClientTx {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.conn.as_ref().expect("open until ended")
    }
}

impl DerefMut for PgClientTx {
    fn deref_mut(&mut self) -> &mut Client {
        self.conn.as_mut().expect("open until ended")
    }
}

impl Drop for PgClientTx {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            // Not back into the pool: closing it ends the transaction.
            drop(deadpool_postgres::Object::take(conn));
        }
    }
}

/// The wake-up listener: one connection of its own, made again when lost
/// (then it `LISTEN`s again on every channel it had).
pub(crate) struct TokioListener {
    conninfo: String,
    conn: Option<(Client, mpsc::UnboundedReceiver<(String, String)>)>,
    channels: Vec<String>,
}

impl TokioListener {
    /// Connects to `conninfo` (the server itself, not a pooler).
    pub(crate) async fn connect(conninfo: &str) -> Result<TokioListener> {
        let mut listener = TokioListener {
            conninfo: conninfo.to_string(),
            conn: None,
            channels: vec![],
        };
        listener.reconnect().await?;
        Ok(listener)
    }

    async fn reconnect(&mut self) -> Result<()> {
        self.conn = None;
        let (client, notes) = connect(&self.conninfo).await?;
        for channel in &self.channels {
            client.batch_execute(&listen_sql(channel)).await?;
        }
        self.conn = Some((client, notes));
        Ok(())
    }

    /// The live connection. A closed one is made again first, but then the
    /// call fails: the new session has none of the old registrations, and
    /// the failure makes the listener loop register everything again.
    async fn client(&mut self) -> Result<&mut Client> {
        if self.conn.as_ref().is_some_and(|(c, _)| !c.is_closed()) {
            return Ok(&mut self.conn.as_mut().expect("just checked").0);
        }
        self.reconnect().await?;
        Err(Error::engine(
            "postgres",
            "",
            "the listener connection was lost (made again)",
        ))
    }
}

impl Listener for TokioListener {
    async fn register(&mut self, w: &Watched) -> Result<()> {
        let registration = w.registration();
        let client = self.client().await?;
        client
            .call(registration.function(), registration.args())
            .await
            .map(drop)
    }

    async fn listen(&mut self, pg_channel: &str) -> Result<()> {
        if !self.channels.iter().any(|c| c == pg_channel) {
            self.channels.push(pg_channel.to_string()); // LISTENed on reconnect
        }
        let client = self.client().await?;
        client.batch_execute(&listen_sql(pg_channel)).await?;
        Ok(())
    }

    async fn recv(&mut self) -> Received {
        loop {
            match &mut self.conn {
                Some((_, notes)) => match notes.recv().await {
                    Some((channel, payload)) => return Received::Notification { channel, payload },
                    None => self.conn = None, // the connection ended
                },
                None => {
                    if self.reconnect().await.is_ok() {
                        return Received::Reconnected;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

fn listen_sql(pg_channel: &str) -> String {
    format!("LISTEN \"{}\"", pg_channel.replace('"', "\"\""))
}

/// A connection whose notifications arrive on the receiver, driven by a
/// task of its own that ends with the connection. TLS as the blocking API
/// does it (by `sslmode`) with the `tls` feature.
async fn connect(conninfo: &str) -> Result<(Client, mpsc::UnboundedReceiver<(String, String)>)> {
    #[cfg(feature = "tls")]
    let (config, tls) = crate::tls::config(conninfo)?;
    #[cfg(not(feature = "tls"))]
    let (config, tls) = (
        conninfo.parse::<tokio_postgres::Config>()?,
        tokio_postgres::NoTls,
    );
    let (client, mut connection) = config.connect(tls).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(n) = message {
                let note = (n.channel().to_string(), n.payload().to_string());
                if tx.send(note).is_err() {
                    return;
                }
            }
        }
    });
    Ok((client, rx))
}
