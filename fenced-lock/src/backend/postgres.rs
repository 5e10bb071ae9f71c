//! PostgreSQL backend: one row per key in a lock table, times on the database clock.
//!
//! Table (created by [`migrate`]):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS fenced_lock (
//!     lock_key   text PRIMARY KEY,
//!     token      bigint NOT NULL CHECK (token > 0),
//!     owner      bytea,
//!     expires_at timestamptz NOT NULL
//! );
//! ```
//!
//! Acquire is a single `INSERT … ON CONFLICT (lock_key) DO UPDATE … WHERE
//! expires_at <= now() RETURNING token`: the row's token is incremented only
//! when the previous hold is over, under the row lock, with `now()` from the
//! database so client clocks never matter. Renew and release are `UPDATE`s
//! conditioned on key + owner + token + not expired. Release never deletes the
//! row (it clears the owner and sets `expires_at` to `-infinity`), so the token
//! never resets; do not delete rows by hand either.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::{Client, NoTls, Statement};

use crate::backend::bounded;
use crate::lease::{ttl_millis, validate};
use crate::{FencingToken, Lease, LockBackend, LockError, OwnerId};

const NAME: &str = "postgres";

/// Options of [`PostgresBackend`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// Lock table name, optionally schema-qualified (`[schema.]table`, plain
    /// identifiers only). Default `fenced_lock`.
    pub table: String,
    /// Create the table if missing when connecting. Default `true`.
    pub create_table: bool,
    /// Deadline of each operation (and of connecting). Default 5 s.
    pub op_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            table: "fenced_lock".into(),
            create_table: true,
            op_timeout: Duration::from_secs(5),
        }
    }
}

impl PostgresOptions {
    /// Sets the table name.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// Sets the per-operation deadline.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }

    /// Whether to create the table when connecting.
    pub fn create_table(mut self, yes: bool) -> Self {
        self.create_table = yes;
        self
    }
}

/// Leases in a PostgreSQL table. Clones share one connection (queries are
/// pipelined by `tokio-postgres`). Backends made with [`connect`](Self::connect)
/// or [`connect_with`](Self::connect_with) reconnect on the first operation after
/// the connection closed (e.g. a server restart); the operation that saw the
/// connection die fails with [`LockError::Unavailable`].
#[derive(Clone)]
pub struct PostgresBackend {
    inner: Arc<Inner>,
}

struct Inner {
    /// Config to reconnect with; `None` for [`PostgresBackend::from_client`].
    config: Option<String>,
    options: PostgresOptions,
    conn: std::sync::RwLock<Arc<Conn>>,
    /// Serialises reconnects so a burst of callers opens one connection.
    reconnect: tokio::sync::Mutex<()>,
}

/// One connection with its prepared statements.
struct Conn {
    /// Set when an operation failed for connection reasons, so the next one
    /// reconnects even before the connection task noticed the close.
    broken: std::sync::atomic::AtomicBool,
    client: Client,
    acquire: Statement,
    renew: Statement,
    release: Statement,
}

/// A handle to the backend's current connection; derefs to the
/// `tokio_postgres::Client`.
pub struct PgClient(Arc<Conn>);

impl std::ops::Deref for PgClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0.client
    }
}

impl std::fmt::Debug for PgClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgClient").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend").finish_non_exhaustive()
    }
}

/// Checks that `name` is `ident` or `schema.ident` with plain identifiers, so
/// it can be spliced into SQL.
pub(crate) fn check_table_name(name: &str) -> Result<(), LockError> {
    let ok_ident = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() <= 2 && parts.iter().all(|p| ok_ident(p)) {
        Ok(())
    } else {
        Err(LockError::Config(format!(
            "table name {name:?} must be [schema.]identifier of ASCII letters, digits and _"
        )))
    }
}

pub(crate) fn pg_error(context: &'static str, e: tokio_postgres::Error) -> LockError {
    // Connection exceptions (08xxx) and operator intervention (57Pxx: shutdown,
    // terminated backend, starting up) mean "could not talk to the database".
    let connection_lost = e
        .code()
        .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"));
    match e.as_db_error() {
        Some(_) if connection_lost => LockError::unavailable(NAME, context, e),
        Some(db) => LockError::Backend {
            backend: NAME,
            context,
            message: db.to_string(),
        },
        None => LockError::unavailable(NAME, context, e),
    }
}

/// Connects with `NoTls`, spawning the connection task; bounded by `limit`.
pub(crate) async fn connect_client(config: &str, limit: Duration) -> Result<Client, LockError> {
    let fut = async {
        let (client, conn) = tokio_postgres::connect(config, NoTls)
            .await
            .map_err(|e| pg_error("connect", e))?;
        tokio::spawn(async move {
            // Errors surface on the client's next query as a closed connection.
            let _ = conn.await;
        });
        Ok(client)
    };
    bounded(NAME, "connect", limit, fut).await
}

/// The `CREATE TABLE IF NOT EXISTS` statement for a lock table.
pub fn migration_sql(table: &str) -> Result<String, LockError> {
    check_table_name(table)?;
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            lock_key   text PRIMARY KEY,
            token      bigint NOT NULL CHECK (token > 0),
            owner      bytea,
            expires_at timestamptz NOT NULL
        )"
    ))
}

/// Creates the lock table if it does not exist.
pub async fn migrate(client: &Client, table: &str) -> Result<(), LockError> {
    client
        .batch_execute(&migration_sql(table)?)
        .await
        .map_err(|e| pg_error("migrate", e))
}

impl PostgresBackend {
    /// Connects (no TLS) with a libpq-style config string, e.g.
    /// `host=127.0.0.1 user=postgres dbname=app`, and creates the default table.
    pub async fn connect(config: &str) -> Result<Self, LockError> {
        Self::connect_with(config, PostgresOptions::default()).await
    }

    /// Connects (no TLS) with options.
    pub async fn connect_with(config: &str, options: PostgresOptions) -> Result<Self, LockError> {
        check_table_name(&options.table)?;
        let client = connect_client(config, options.op_timeout).await?;
        Self::build(client, Some(config.to_owned()), options).await
    }

    /// Uses an already connected client (e.g. one set up with TLS). Its
    /// connection task must be running. Such a backend cannot reconnect.
    pub async fn from_client(client: Client, options: PostgresOptions) -> Result<Self, LockError> {
        Self::build(client, None, options).await
    }

    async fn build(
        client: Client,
        config: Option<String>,
        options: PostgresOptions,
    ) -> Result<Self, LockError> {
        check_table_name(&options.table)?;
        let conn = Conn::setup(client, &options).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                options,
                conn: std::sync::RwLock::new(Arc::new(conn)),
                reconnect: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The current connection, e.g. to run the fenced write in the same database.
    pub fn client(&self) -> PgClient {
        PgClient(self.current())
    }

    fn current(&self) -> Arc<Conn> {
        self.inner
            .conn
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The live connection, reconnecting first if it closed.
    async fn conn(&self) -> Result<Arc<Conn>, LockError> {
        let cur = self.current();
        let Some(config) = self.inner.config.as_deref() else {
            return Ok(cur);
        };
        if !cur.is_dead() {
            return Ok(cur);
        }
        let _one = self.inner.reconnect.lock().await;
        let cur = self.current();
        if !cur.is_dead() {
            return Ok(cur);
        }
        let opts = &self.inner.options;
        let client = connect_client(config, opts.op_timeout).await?;
        let fresh = Arc::new(Conn::setup(client, opts).await?);
        *self.inner.conn.write().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
        Ok(fresh)
    }
}

impl Conn {
    async fn setup(client: Client, options: &PostgresOptions) -> Result<Self, LockError> {
        let t = options.table.as_str();
        let setup = async {
            if options.create_table {
                migrate(&client, t).await?;
            }
            let prep = |sql: String| {
                let client = &client;
                async move {
                    client
                        .prepare(&sql)
                        .await
                        .map_err(|e| pg_error("prepare", e))
                }
            };
            let acquire = prep(format!(
                "INSERT INTO {t} AS l (lock_key, token, owner, expires_at)
                 VALUES ($1, 1, $2, now() + $3::bigint * interval '1 millisecond')
                 ON CONFLICT (lock_key) DO UPDATE
                    SET token = l.token + 1, owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
                    WHERE l.expires_at <= now()
                 RETURNING token"
            ))
            .await?;
            let renew = prep(format!(
                "UPDATE {t} SET expires_at = now() + $4::bigint * interval '1 millisecond'
                 WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()"
            ))
            .await?;
            let release = prep(format!(
                "UPDATE {t} SET owner = NULL, expires_at = '-infinity'
                 WHERE lock_key = $1 AND owner = $2 AND token = $3 AND expires_at > now()"
            ))
            .await?;
            Ok((acquire, renew, release))
        };
        let (acquire, renew, release) = bounded(NAME, "setup", options.op_timeout, setup).await?;
        Ok(Self {
            broken: std::sync::atomic::AtomicBool::new(false),
            client,
            acquire,
            renew,
            release,
        })
    }

    fn is_dead(&self) -> bool {
        self.client.is_closed() || self.broken.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Passes `r` through, remembering connection failures.
    fn check<T>(&self, r: Result<T, LockError>) -> Result<T, LockError> {
        if matches!(r, Err(LockError::Unavailable { .. })) {
            self.broken
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
}

impl LockBackend for PostgresBackend {
    async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        validate(key, ttl)?;
        let owner = OwnerId::random();
        let limit = self.inner.options.op_timeout;
        let sent = Instant::now();
        let conn = self.conn().await?;
        let row = conn.check(
            bounded(NAME, "acquire", limit, async {
                conn.client
                    .query_opt(
                        &conn.acquire,
                        &[&key, &&owner.to_bytes()[..], &ttl_millis(ttl)],
                    )
                    .await
                    .map_err(|e| pg_error("acquire", e))
            })
            .await,
        )?;
        let Some(row) = row else { return Ok(None) };
        let raw: i64 = row.try_get(0).map_err(|e| pg_error("acquire", e))?;
        let token = u64::try_from(raw)
            .ok()
            .and_then(FencingToken::new)
            .ok_or_else(|| LockError::Backend {
                backend: NAME,
                context: "acquire",
                message: format!("invalid token {raw} in lock table"),
            })?;
        Ok(Some(Lease::new(key, token, owner, ttl, sent + ttl)))
    }

    async fn renew(&self, lease: &mut Lease) -> Result<(), LockError> {
        let limit = self.inner.options.op_timeout;
        let token = lease.token().to_i64().ok_or_else(|| lease.lost())?;
        let sent = Instant::now();
        let conn = self.conn().await?;
        let n = conn.check(
            bounded(NAME, "renew", limit, async {
                conn.client
                    .execute(
                        &conn.renew,
                        &[
                            &lease.key(),
                            &&lease.owner().to_bytes()[..],
                            &token,
                            &ttl_millis(lease.ttl()),
                        ],
                    )
                    .await
                    .map_err(|e| pg_error("renew", e))
            })
            .await,
        )?;
        lease.confirm_renewal(sent, n == 1)
    }

    async fn release(&self, lease: Lease) -> Result<bool, LockError> {
        let limit = self.inner.options.op_timeout;
        let Some(token) = lease.token().to_i64() else {
            return Ok(false);
        };
        let conn = self.conn().await?;
        let n = conn.check(
            bounded(NAME, "release", limit, async {
                conn.client
                    .execute(
                        &conn.release,
                        &[&lease.key(), &&lease.owner().to_bytes()[..], &token],
                    )
                    .await
                    .map_err(|e| pg_error("release", e))
            })
            .await,
        )?;
        Ok(n == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        assert!(check_table_name("fenced_lock").is_ok());
        assert!(check_table_name("app.locks_2").is_ok());
        for bad in ["", "1x", "a;drop", "a.b.c", "x y", "a-b"] {
            assert!(check_table_name(bad).is_err(), "{bad}");
        }
    }
}
