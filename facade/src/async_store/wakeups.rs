//! Wake-ups for async waiters: one listener connection per store registers
//! the queues and streams being waited for (`alk_listen_*`, which LISTEN for
//! that session) and turns their notifications into per-key generation
//! counters that waiters watch; it also forwards the notifications of the
//! channels subscribed to (`AsyncStore::listen`).

use crate::call::Listen;
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
use crate::call::{self, Call};
use crate::error::{Error, Result};
use serde_json::Value;
use std::collections::HashMap;
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
use std::future::Future;
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
use std::sync::Weak;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// How long a registration lasts on the server (`ttl_s`).
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
pub(crate) const REGISTRATION_TTL_S: f64 = 60.0;
/// Registrations are renewed well before they run out.
const RENEW_EVERY: Duration = Duration::from_secs(20);
/// How often SQLite's `data_version` is looked at.
#[cfg(feature = "sqlx-sqlite")]
const SQLITE_WATCH_EVERY: Duration = Duration::from_millis(10);

/// What a waiter waits for: what it registers for, the name it takes and
/// the key its notifications arrive under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Watched {
    kind: Listen,
    pub(crate) name: String,
    key: String,
}

impl Watched {
    /// Jobs of a queue.
    pub(crate) fn queue(name: &str) -> Watched {
        Watched {
            kind: Listen::Queue,
            name: name.into(),
            key: format!("q:{name}"),
        }
    }

    /// Events of a stream.
    pub(crate) fn stream(name: &str) -> Watched {
        Watched {
            kind: Listen::Stream,
            name: name.into(),
            key: format!("s:{name}"),
        }
    }

    /// Messages of an outbox (notified under its backing queue's name).
    pub(crate) fn outbox(name: &str) -> Watched {
        Watched {
            kind: Listen::Outbox,
            name: name.into(),
            key: format!("q:{}", alkstore_core::names::outbox_queue(name)),
        }
    }

    /// The call that registers a session for it (`alk_listen_*`).
    #[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
    pub(crate) fn registration(&self) -> Call<Value> {
        call::listen(self.kind, &self.name, REGISTRATION_TTL_S)
    }
}

#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "tokio-postgres")),
    allow(dead_code)
)]
enum Request {
    /// Register for wake-ups.
    Watch(Watched, oneshot::Sender<Result<()>>),
    /// Forward the notifications of a PostgreSQL channel.
    Listen(
        String,
        mpsc::UnboundedSender<Value>,
        oneshot::Sender<Result<()>>,
    ),
}

/// The store's side of the listener task (PostgreSQL) or of the
/// `data_version` watcher (SQLite).
#[doc(hidden)]
pub struct Wakeups {
    /// To the PostgreSQL listener; SQLite registers nothing.
    requests: Option<mpsc::UnboundedSender<Request>>,
    generations: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// When each registration was last confirmed, to skip asking again.
    confirmed: Mutex<HashMap<Watched, Instant>>,
}

impl Wakeups {
    /// Starts the listener task on `listener`. It ends when the store (every
    /// clone) is dropped.
    #[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
    pub(crate) fn start(listener: impl Listener) -> Arc<Wakeups> {
        let (requests, rx) = mpsc::unbounded_channel();
        let wakeups = Arc::new(Wakeups {
            requests: Some(requests),
            generations: Mutex::default(),
            confirmed: Mutex::default(),
        });
        tokio::spawn(listen(listener, rx, Arc::downgrade(&wakeups)));
        wakeups
    }

    /// A receiver that changes with every wake-up for `watched` from now on,
    /// once the listener is registered for it. Subscribe, then look for
    /// work, then wait: a wake-up in between is not missed.
    pub(crate) async fn watch(&self, watched: &Watched) -> Result<watch::Receiver<u64>> {
        let rx = self.sender(&watched.key).subscribe();
        if self.requests.is_none() {
            return Ok(rx); // SQLite: every commit wakes every waiter
        }
        let fresh = lock(&self.confirmed)
            .get(watched)
            .is_some_and(|at| at.elapsed() < RENEW_EVERY);
        if !fresh {
            self.ask(|reply| Request::Watch(watched.clone(), reply))
                .await?;
            lock(&self.confirmed).insert(watched.clone(), Instant::now());
        }
        Ok(rx)
    }

    /// The payloads notified on `pg_channel` (`alk_channel`'s name for an
    /// alkstore channel) from now on.
    #[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
    pub(crate) async fn listen(&self, pg_channel: &str) -> Result<mpsc::UnboundedReceiver<Value>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.ask(|reply| Request::Listen(pg_channel.to_string(), tx, reply))
            .await?;
        Ok(rx)
    }

    async fn ask(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<()>>) -> Request,
    ) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        let gone = || Error::engine("postgres", "", "the listener connection is gone");
        let requests = self.requests.as_ref().ok_or_else(gone)?;
        requests.send(request(reply)).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// SQLite: a task on a connection of its own watches `PRAGMA
    /// data_version`, which changes with every commit by any other
    /// connection of any process, and wakes every waiter when it does.
    #[cfg(feature = "sqlx-sqlite")]
    pub(crate) async fn start_sqlite(pool: &sqlx::SqlitePool) -> Result<Arc<Wakeups>> {
        let mut conn = pool.acquire().await?.detach();
        let mut last = data_version(&mut conn).await?;
        let wakeups = Arc::new(Wakeups {
            requests: None,
            generations: Mutex::default(),
            confirmed: Mutex::default(),
        });
        let weak = Arc::downgrade(&wakeups);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SQLITE_WATCH_EVERY).await;
                let Some(w) = weak.upgrade() else { return };
                if let Ok(v) = data_version(&mut conn).await {
                    if v != last {
                        last = v;
                        w.bump_all();
                    }
                }
            }
        });
        Ok(wakeups)
    }

    /// A receiver for a key of the caller's own (SQLite notifications).
    #[cfg(feature = "sqlx-sqlite")]
    pub(crate) fn subscribe(&self, key: &str) -> watch::Receiver<u64> {
        self.sender(key).subscribe()
    }

    fn sender(&self, key: &str) -> watch::Sender<u64> {
        lock(&self.generations)
            .entry(key.to_string())
            .or_insert_with(|| watch::Sender::new(0))
            .clone()
    }

    #[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
    fn bump(&self, key: &str) {
        if let Some(s) = lock(&self.generations).get(key) {
            s.send_modify(|g| *g += 1);
        }
    }

    /// After a lost connection: notifications may have been missed.
    fn bump_all(&self) {
        for s in lock(&self.generations).values() {
            s.send_modify(|g| *g += 1);
        }
    }
}

#[cfg(feature = "sqlx-sqlite")]
async fn data_version(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar("PRAGMA data_version")
        .fetch_one(conn)
        .await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The PostgreSQL connection a store's wake-ups come through: one per
/// store, kept in its session (never through a transaction pooler).
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
pub(crate) trait Listener: Send + 'static {
    /// Registers this session for wake-ups (`alk_listen_*`).
    fn register(&mut self, w: &Watched) -> impl Future<Output = Result<()>> + Send;
    /// `LISTEN`s on a channel, and again after every reconnect.
    fn listen(&mut self, pg_channel: &str) -> impl Future<Output = Result<()>> + Send;
    /// The next notification, or the news that the connection was lost
    /// and made again (notifications may have been missed; registrations
    /// are gone), or that the pool closed for good.
    fn recv(&mut self) -> impl Future<Output = Received> + Send;
}

/// What a [`Listener`] received.
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
pub(crate) enum Received {
    Notification {
        channel: String,
        payload: String,
    },
    Reconnected,
    /// sqlx's pool was closed: the store is going away.
    #[cfg_attr(not(feature = "sqlx-postgres"), allow(dead_code))]
    Closed,
}

/// The listener task: registrations on request, renewals, notifications to
/// generation bumps. After a reconnect it registers everything again and
/// wakes every waiter.
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
async fn listen(
    mut listener: impl Listener,
    mut requests: mpsc::UnboundedReceiver<Request>,
    wakeups: Weak<Wakeups>,
) {
    let mut registered: HashMap<Watched, Instant> = HashMap::new();
    let mut subscribers: HashMap<String, Vec<mpsc::UnboundedSender<Value>>> = HashMap::new();
    let mut lost = false;
    loop {
        if lost {
            let mut ok = true;
            for (w, at) in registered.iter_mut() {
                ok = ok && listener.register(w).await.is_ok();
                *at = Instant::now();
            }
            if !ok {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            lost = false;
            match wakeups.upgrade() {
                Some(w) => w.bump_all(),
                None => return,
            }
        }
        for (w, at) in registered.iter_mut() {
            if at.elapsed() >= RENEW_EVERY {
                lost |= listener.register(w).await.is_err();
                *at = Instant::now();
            }
        }
        tokio::select! {
            request = requests.recv() => match request {
                None => return,
                Some(Request::Watch(watched, reply)) => {
                    let r = listener.register(&watched).await;
                    if r.is_ok() {
                        registered.insert(watched, Instant::now());
                    } else {
                        lost = true;
                    }
                    let _ = reply.send(r);
                }
                Some(Request::Listen(pg_channel, tx, reply)) => {
                    let r = listener.listen(&pg_channel).await;
                    if r.is_ok() {
                        subscribers.entry(pg_channel).or_default().push(tx);
                    }
                    let _ = reply.send(r);
                }
            },
            received = listener.recv() => match received {
                Received::Notification { channel, payload } => {
                    let key = match channel.as_str() {
                        "alkstore_jobs" => format!("q:{payload}"),
                        "alkstore_events" => format!("s:{payload}"),
                        other => {
                            if let Some(subs) = subscribers.get_mut(other) {
                                let payload = serde_json::from_str(&payload).unwrap_or(Value::Null);
                                subs.retain(|s| s.send(payload.clone()).is_ok());
                            }
                            continue;
                        }
                    };
                    match wakeups.upgrade() {
                        Some(w) => w.bump(&key),
                        None => return,
                    }
                }
                Received::Reconnected => lost = true,
                Received::Closed => return,
            },
            // Renewals come due while nothing else happens.
            _ = tokio::time::sleep(RENEW_EVERY / 4) => {}
        }
    }
}

/// sqlx's listener, which reconnects (and `LISTEN`s again) by itself.
#[cfg(feature = "sqlx-postgres")]
pub(crate) struct SqlxListener(sqlx::postgres::PgListener);

#[cfg(feature = "sqlx-postgres")]
impl SqlxListener {
    /// A listener on a connection of `pool`'s (its own, outside the pool).
    pub(crate) async fn connect_with(pool: &sqlx::PgPool) -> Result<SqlxListener> {
        Ok(SqlxListener(
            sqlx::postgres::PgListener::connect_with(pool).await?,
        ))
    }

    /// A listener connected to `url`.
    pub(crate) async fn connect(url: &str) -> Result<SqlxListener> {
        Ok(SqlxListener(
            sqlx::postgres::PgListener::connect(url).await?,
        ))
    }
}

#[cfg(feature = "sqlx-postgres")]
impl Listener for SqlxListener {
    async fn register(&mut self, w: &Watched) -> Result<()> {
        use crate::async_tx::sqlx_postgres::SqlxCall;
        let registration = w.registration();
        let (call, sql) = SqlxCall::new(registration.function(), registration.args())?;
        let row = sqlx::Executor::fetch_one(&mut self.0, sql.as_str()).await?;
        call.result(row).map(|_| ())
    }

    async fn listen(&mut self, pg_channel: &str) -> Result<()> {
        Ok(self.0.listen(pg_channel).await?)
    }

    async fn recv(&mut self) -> Received {
        match self.0.try_recv().await {
            Ok(Some(n)) => Received::Notification {
                channel: n.channel().to_string(),
                payload: n.payload().to_string(),
            },
            Ok(None) => Received::Reconnected,
            Err(sqlx::Error::PoolClosed) => Received::Closed,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Received::Reconnected
            }
        }
    }
}
