//! The PostgreSQL engine: the `postgres` crate with a small r2d2 pool, and
//! one listener connection per store for wake-ups and notifications. A
//! waiter registers its queue or stream (`alk_listen_*`: enqueues and
//! publishes only notify while someone waits), the listener LISTENs and
//! wakes waiters when a notification arrives; a slow fallback poll still
//! finds work whose `run_at` arrives or whose claim expires.

use crate::call::{self, Listen};
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::notify::{NotificationSource, Subscription};
use crate::sql::{call_postgres, Arg};
use crate::store::Store;
use crate::tls::{self, Tls};
use crate::tx::TxHandle;
use crate::wake::Waker;
use postgres::fallible_iterator::FallibleIterator;
use r2d2_postgres::PostgresConnectionManager;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Manager = PostgresConnectionManager<Tls>;

/// How long a waiting registration lasts, and how often it is renewed.
const REGISTRATION_TTL_S: f64 = 60.0;
const RENEW_EVERY: Duration = Duration::from_secs(20);

/// How long a call waits for a pooled connection (r2d2's default).
const CHECKOUT_WAIT: Duration = Duration::from_secs(30);
/// r2d2 retries a lost connection with a doubling pause of at most half
/// its `connection_timeout`: 2 s keeps that pause at 1 s, so that work
/// resumes within a second of the server's return after an outage (with
/// the default 30 s the pause grew to 15 s: a worker sat idle for 8–10 s
/// after a restart). Calls still wait [`CHECKOUT_WAIT`] for a connection.
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The pool's size unless [`PgStoreBuilder::pool_size`] says otherwise.
pub const DEFAULT_POOL_SIZE: u32 = 8;

/// How a [`PgStore`] connects: [`PgStore::builder`]. (No `Debug`: the
/// connection string may hold a password.)
#[derive(Clone)]
pub struct PgStoreBuilder {
    conninfo: String,
    listener: Option<String>,
    pool_size: u32,
}

impl PgStoreBuilder {
    /// The wake-up listener's own connection string: the server itself
    /// when `conninfo` is a transaction-pooling PgBouncer
    /// ([`PgStore::connect_with_listener`]). By default, `conninfo`.
    pub fn listener(mut self, listener_conninfo: &str) -> Self {
        self.listener = Some(listener_conninfo.to_owned());
        self
    }

    /// At most this many connections for calls and transactions (default
    /// [`DEFAULT_POOL_SIZE`]; the listener's is one more). A worker's
    /// handlers hold none while they run, so a worker of any concurrency
    /// works with one; your own transactions each hold one until they end,
    /// and a call that finds all taken waits up to 30 s. Zero is refused
    /// when connecting (`InvalidArgument`).
    pub fn pool_size(mut self, size: u32) -> Self {
        self.pool_size = size;
        self
    }

    /// Connects: one connection at once, to fail with its reason (a refused
    /// login, a certificate), then the pool and the listener.
    pub fn connect(self) -> Result<PgStore> {
        let listener = self.listener.as_deref().unwrap_or(&self.conninfo);
        PgStore::open(&self.conninfo, listener, self.pool_size)
    }
}

enum Request {
    Watch(Kind, String, Sender<Result<()>>),
    Listen(String, Sender<Value>, Sender<Result<()>>),
}

struct PgEngine {
    pool: r2d2::Pool<Manager>,
    waker: Arc<Waker>,
    requests: Mutex<Sender<Request>>,
    watched: Mutex<HashMap<(Kind, String), Instant>>,
}

/// An alkstore on a PostgreSQL database with the extension (or the plain
/// SQL install).
pub struct PgStore {
    store: Store,
    engine: Arc<PgEngine>,
}

/// Every [`Store`] method, on this engine.
impl std::ops::Deref for PgStore {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

impl From<PgStore> for Store {
    fn from(store: PgStore) -> Store {
        store.store
    }
}

/// One connection, opened as a [`PgStore`] opens its own: TLS by the
/// connection string's `sslmode` and `sslrootcert`, as libpq does.
pub fn client(conninfo: &str) -> Result<postgres::Client> {
    let (config, tls) = tls::config(conninfo)?;
    Ok(postgres::Config::from(config).connect(tls)?)
}

impl PgStore {
    /// Connects with a `postgres` connection string (URL or key=value).
    /// TLS follows `sslmode` and `sslrootcert` as in libpq (`prefer` by
    /// default; `require`, `verify-ca`, `verify-full`; `sslrootcert=system`
    /// for the system's roots).
    pub fn connect(conninfo: &str) -> Result<PgStore> {
        PgStore::connect_with_listener(conninfo, conninfo)
    }

    /// Connects through a transaction-pooling PgBouncer (`conninfo`) with
    /// the one connection that must keep its session, the wake-up listener
    /// (`LISTEN`), made directly to the server (`listener_conninfo`).
    /// Behind transaction pooling a `LISTEN` holds for one transaction only,
    /// so a listener through the pooler would miss its wake-ups.
    pub fn connect_with_listener(conninfo: &str, listener_conninfo: &str) -> Result<PgStore> {
        PgStore::builder(conninfo)
            .listener(listener_conninfo)
            .connect()
    }

    /// Settings beyond the connection string: the pool's size, a listener
    /// made elsewhere.
    ///
    /// ```no_run
    /// # fn demo() -> alkstore::Result<()> {
    /// let store = alkstore::PgStore::builder("postgres://app@localhost/app")
    ///     .pool_size(4)
    ///     .connect()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(conninfo: &str) -> PgStoreBuilder {
        PgStoreBuilder {
            conninfo: conninfo.to_owned(),
            listener: None,
            pool_size: DEFAULT_POOL_SIZE,
        }
    }

    fn open(conninfo: &str, listener_conninfo: &str, pool_size: u32) -> Result<PgStore> {
        if pool_size == 0 {
            return Err(Error::InvalidArgument(
                "pool_size must be at least 1".into(),
            ));
        }
        let (config, tls) = tls::config(conninfo)?;
        let config = postgres::Config::from(config);
        // One connection first: a refused login or certificate fails here,
        // with its reason, not after the pool's 30 s of retries.
        config.connect(tls.clone())?;
        let pool = r2d2::Pool::builder()
            .max_size(pool_size)
            // Connections opened as calls need them, not all at start: a
            // large pool against a far server would not open in time, and
            // would hold connections it never uses.
            .min_idle(Some(1))
            .connection_timeout(RECONNECT_TIMEOUT)
            .build(Manager::new(config, tls))?;
        let init = call::init();
        call_postgres(
            &mut *pool.get_timeout(CHECKOUT_WAIT)?,
            init.function(),
            init.args(),
        )
        .map_err(|e| match e {
            // 42883 undefined_function: alkstore is not installed here.
            Error::Engine { code, .. } if code == "42883" => Error::engine(
                "postgres",
                code,
                "alkstore is not installed in this database: CREATE EXTENSION alkstore (the \
                 extension), or run the plain SQL install (alkstore install --print-sql | psql); \
                 docs/install.md",
            ),
            e => e,
        })?;
        let waker = Arc::new(Waker::default());
        let (config, tls) = tls::config(listener_conninfo)?;
        let mut listener_config = postgres::Config::from(config);
        // Named so in pg_stat_activity, unless its URL names it itself.
        if listener_config.get_application_name().is_none() {
            listener_config.application_name("alkstore-listener");
        }
        let listener = listener_config.connect(tls.clone())?;
        let (tx, rx) = channel();
        let w = waker.clone();
        std::thread::Builder::new()
            .name("alkstore-pg-listen".into())
            .spawn(move || listen_loop(listener_config, tls, listener, rx, w))
            .map_err(|e| Error::engine("postgres", "", e.to_string()))?;
        let engine = Arc::new(PgEngine {
            pool,
            waker,
            requests: Mutex::new(tx),
            watched: Mutex::new(HashMap::new()),
        });
        Ok(PgStore {
            store: Store::new(engine.clone()),
            engine,
        })
    }

    /// Opens a transaction and gives its client for business rows.
    pub fn transaction(&self) -> Result<PgTx> {
        let mut client = self.engine.checkout()?;
        client.batch_execute("BEGIN")?;
        Ok(PgTx { client, open: true })
    }
}

impl PgEngine {
    fn ask(&self, make: impl FnOnce(Sender<Result<()>>) -> Request) -> Result<()> {
        let (tx, rx) = channel();
        let sent = self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(make(tx));
        sent.map_err(|_| Error::engine("postgres", "", "the listener connection is gone"))?;
        rx.recv_timeout(Duration::from_secs(30))
            .map_err(|_| Error::engine("postgres", "", "the listener connection did not answer"))?
    }
}

impl PgEngine {
    /// A pooled connection, waiting up to [`CHECKOUT_WAIT`] for one.
    fn checkout(&self) -> Result<r2d2::PooledConnection<Manager>> {
        Ok(self.pool.get_timeout(CHECKOUT_WAIT)?)
    }
}

impl Engine for PgEngine {
    fn call(&self, f: &str, args: &[Arg]) -> Result<Value> {
        call_postgres(&mut *self.checkout()?, f, args)
    }

    fn call_text(&self, f: &str, args: &[Arg]) -> Result<Option<String>> {
        crate::sql::postgres_text(&mut *self.checkout()?, f, args)
    }

    fn begin(&self) -> Result<Box<dyn TxHandle>> {
        let mut client = self.checkout()?;
        client.batch_execute("BEGIN")?;
        Ok(Box::new(PgTx { client, open: true }))
    }

    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn watch(&self, kind: Kind, name: &str) -> Result<()> {
        let key = (kind, name.to_string());
        let fresh = {
            let watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
            watched
                .get(&key)
                .is_some_and(|at| at.elapsed() < RENEW_EVERY)
        };
        if !fresh {
            self.ask(|reply| Request::Watch(kind, name.to_string(), reply))?;
            self.watched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, Instant::now());
        }
        Ok(())
    }

    fn listen(&self, channel_name: &str) -> Result<Subscription> {
        let lookup = call::channel(channel_name);
        let pg_channel = lookup.decode(call_postgres(
            &mut *self.checkout()?,
            lookup.function(),
            lookup.args(),
        )?)?;
        let (tx, rx) = channel();
        self.ask(|reply| Request::Listen(pg_channel, tx, reply))?;
        Ok(Subscription {
            channel: channel_name.to_string(),
            source: Box::new(PgNotifications(rx)),
        })
    }

    fn fallback_poll(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn clock_ms(&self) -> Result<i64> {
        let row = self
            .checkout()?
            .query_typed_one(crate::sql::PG_CLOCK_MS, &[])?;
        Ok(row.try_get(0)?)
    }
}

struct PgNotifications(Receiver<Value>);

impl NotificationSource for PgNotifications {
    fn next(&mut self, timeout: Duration) -> Result<Option<Value>> {
        match self.0.recv_timeout(timeout) {
            Ok(v) => Ok(Some(v)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Error::engine(
                "postgres",
                "",
                "the listener connection is gone",
            )),
        }
    }
}

/// The listener thread: registrations, LISTEN, and dispatch of
/// notifications. If its connection is lost it reconnects, registers and
/// LISTENs again, and wakes every waiter (a notification may have been
/// missed meanwhile); until then waiters fall back to polling.
fn listen_loop(
    config: postgres::Config,
    tls: Tls,
    mut client: postgres::Client,
    requests: Receiver<Request>,
    waker: Arc<Waker>,
) {
    let mut registered: HashMap<(Kind, String), Instant> = HashMap::new();
    let mut subscribers: HashMap<String, Vec<Sender<Value>>> = HashMap::new();
    loop {
        match serve(
            &mut client,
            &requests,
            &waker,
            &mut registered,
            &mut subscribers,
        ) {
            Served::StoreGone => return,
            Served::ConnectionLost => {}
        }
        client = loop {
            std::thread::sleep(Duration::from_millis(200));
            // Meanwhile, remember what is asked for: it is set up on reconnect.
            loop {
                match requests.try_recv() {
                    Ok(Request::Watch(kind, name, reply)) => {
                        registered.insert((kind, name), Instant::now());
                        let _ = reply.send(Ok(()));
                    }
                    Ok(Request::Listen(pg_channel, tx, reply)) => {
                        subscribers.entry(pg_channel).or_default().push(tx);
                        let _ = reply.send(Ok(()));
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            let Ok(mut c) = config.connect(tls.clone()) else {
                continue;
            };
            let relisten = subscribers
                .keys()
                .all(|ch| c.batch_execute(&listen_sql(ch)).is_ok());
            let reregister = registered
                .keys()
                .all(|(kind, name)| register(&mut c, *kind, name).is_ok());
            if relisten && reregister {
                break c;
            }
        };
        registered.values_mut().for_each(|at| *at = Instant::now());
        waker.bump(crate::wake::ANY);
    }
}

enum Served {
    StoreGone,
    ConnectionLost,
}

fn listen_sql(pg_channel: &str) -> String {
    format!("LISTEN \"{}\"", pg_channel.replace('"', "\"\""))
}

fn serve(
    client: &mut postgres::Client,
    requests: &Receiver<Request>,
    waker: &Waker,
    registered: &mut HashMap<(Kind, String), Instant>,
    subscribers: &mut HashMap<String, Vec<Sender<Value>>>,
) -> Served {
    loop {
        loop {
            match requests.try_recv() {
                Ok(Request::Watch(kind, name, reply)) => {
                    let r = register(client, kind, &name);
                    if r.is_ok() {
                        registered.insert((kind, name), Instant::now());
                    }
                    let _ = reply.send(r);
                }
                Ok(Request::Listen(pg_channel, tx, reply)) => {
                    let r = client.batch_execute(&listen_sql(&pg_channel));
                    subscribers.entry(pg_channel).or_default().push(tx);
                    let _ = reply.send(r.map_err(Error::from));
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Served::StoreGone,
            }
        }
        for ((kind, name), at) in registered.iter_mut() {
            if at.elapsed() >= RENEW_EVERY && register(client, *kind, name).is_ok() {
                *at = Instant::now();
            }
        }
        {
            let mut notifications = client.notifications();
            let mut it = notifications.timeout_iter(Duration::from_millis(20));
            loop {
                match it.next() {
                    Ok(Some(n)) => match n.channel() {
                        "alkstore_jobs" => waker.bump(&Kind::Queue.key(n.payload())),
                        "alkstore_events" => waker.bump(&Kind::Stream.key(n.payload())),
                        other => {
                            let payload = serde_json::from_str(n.payload()).unwrap_or(Value::Null);
                            if let Some(subs) = subscribers.get_mut(other) {
                                subs.retain(|s| s.send(payload.clone()).is_ok());
                            }
                        }
                    },
                    Ok(None) => break,
                    Err(_) => return Served::ConnectionLost,
                }
            }
        }
        if client.is_closed() {
            return Served::ConnectionLost;
        }
    }
}

fn register(client: &mut postgres::Client, kind: Kind, name: &str) -> Result<()> {
    let (listen, name) = match kind {
        Kind::Queue => match name.strip_prefix(alkstore_core::names::OUTBOX_QUEUE_PREFIX) {
            Some(outbox) => (Listen::Outbox, outbox),
            None => (Listen::Queue, name),
        },
        Kind::Stream => (Listen::Stream, name),
    };
    let registration = call::listen(listen, name, REGISTRATION_TTL_S);
    call_postgres(client, registration.function(), registration.args()).map(|_| ())
}

/// A PostgreSQL transaction: alkstore writes plus your own rows on
/// [`client`](PgTx::client).
pub struct PgTx {
    client: r2d2::PooledConnection<Manager>,
    open: bool,
}

impl PgTx {
    /// The client, inside the transaction: write your business rows here.
    pub fn client(&mut self) -> &mut postgres::Client {
        &mut self.client
    }

    /// Commits.
    pub fn commit(self) -> Result<()> {
        TxHandle::commit(Box::new(self))
    }

    /// Rolls back.
    pub fn rollback(self) -> Result<()> {
        TxHandle::rollback(Box::new(self))
    }
}

impl TxHandle for PgTx {
    fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call_postgres(&mut *self.client, function, args)
    }

    fn postgres(&mut self) -> Option<&mut postgres::Client> {
        Some(&mut self.client)
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.open = false;
        Ok(self.client.batch_execute("COMMIT")?)
    }

    fn rollback(mut self: Box<Self>) -> Result<()> {
        self.open = false;
        Ok(self.client.batch_execute("ROLLBACK")?)
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        if self.open {
            let _ = self.client.batch_execute("ROLLBACK");
        }
    }
}

/// Your own `postgres` transaction as a [`TxHandle`].
impl TxHandle for postgres::Transaction<'_> {
    fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call_postgres(self, function, args)
    }

    fn commit(self: Box<Self>) -> Result<()> {
        Ok((*self).commit()?)
    }

    fn rollback(self: Box<Self>) -> Result<()> {
        Ok((*self).rollback()?)
    }
}
