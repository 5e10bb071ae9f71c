//! PostgreSQL backend: one row per key in a lock table, times on the database clock.
//!
//! Table and token sequence (created by [`migrate`]):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS fenced_lock (
//!     lock_key   text PRIMARY KEY,
//!     token      bigint NOT NULL CHECK (token > 0),
//!     owner      bytea,
//!     expires_at timestamptz NOT NULL
//! );
//! CREATE SEQUENCE IF NOT EXISTS fenced_lock_token_seq AS bigint OWNED BY fenced_lock.token;
//! ```
//!
//! Acquire is a single `INSERT … VALUES (…, nextval(seq), …) ON CONFLICT (lock_key) DO
//! UPDATE SET token = GREATEST(token + 1, EXCLUDED.token) … WHERE expires_at <= now()
//! RETURNING token`: a new token only when the previous hold is over, under the row
//! lock, with `now()` from the database. Renew and release are `UPDATE`s conditioned on
//! key + owner + token + not expired; release keeps the row. Tokens come from the
//! sequence, so [`PostgresBackend::cleanup_idle`] can delete idle rows without a later
//! acquisition repeating a token.
//!
//! **Not consensus.** One primary: with `synchronous_commit = off`/`local` or an
//! asynchronous standby promoted after a failover, an acknowledged grant can be lost
//! ([`PostgresOptions::require_durable`] refuses such servers; by default they are
//! logged). The expiry runs on the server's wall clock; the client's validity keeps a
//! [`ClockDrift`] margin.
//!
//! The lock connection runs with `lock_timeout` and `statement_timeout` of at most
//! `op_timeout`. An attempt the client stops waiting for (its budget ran out) is
//! cancelled on the server and its outcome awaited; a grant that landed anyway is
//! released. So an `Err` never leaves the key held for nobody. Clones share one
//! connection, so a cancel that arrives after its statement finished can hit the next
//! statement on it (another task's renew or acquire): that one fails with
//! `Unavailable` and is retried (keeper, `acquire`), or, for a release, leaves the lease
//! to expire on its own.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::{Client, NoTls, Statement};

use crate::backend::bounded;
use crate::lease::{ttl_millis, validate};
use crate::{ClockDrift, FencingToken, Lease, LockBackend, LockError, OwnerId};

const NAME: &str = "postgres";
/// Longest idle period `cleanup_idle` takes literally (PostgreSQL intervals are bounded).
const MAX_IDLE: Duration = Duration::from_secs(100 * 365 * 86400);

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
    /// Margin taken off each lease's validity for the database clock (`now()`) running
    /// fast or stepping. Default 1 % of the TTL + 2 ms.
    pub clock_drift: ClockDrift,
    /// Refuse to connect when the server could lose an acknowledged grant on a crash or
    /// failover (`synchronous_commit` off or `local`, or the server is a standby).
    /// Default `false`: connect and log a warning (`tracing`, target `fenced_lock`).
    pub require_durable: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            table: "fenced_lock".into(),
            create_table: true,
            op_timeout: Duration::from_secs(5),
            clock_drift: ClockDrift::default(),
            require_durable: false,
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

    /// Sets the clock-drift margin.
    pub fn clock_drift(mut self, drift: ClockDrift) -> Self {
        self.clock_drift = drift;
        self
    }

    /// Whether to refuse servers that can lose acknowledged commits (see the field).
    pub fn require_durable(mut self, yes: bool) -> Self {
        self.require_durable = yes;
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

/// Checks that `name` is `ident` or `schema.ident` with plain identifiers and returns it
/// quoted for SQL (`"schema"."ident"`), so reserved words such as `user` work. Each part
/// is lower-cased first: the quoted name is the table an unquoted name always meant.
pub(crate) fn quoted_table(name: &str) -> Result<String, LockError> {
    check_table_name(name)?;
    Ok(name
        .split('.')
        .map(|p| format!("\"{}\"", p.to_ascii_lowercase()))
        .collect::<Vec<_>>()
        .join("."))
}

/// The token sequence of lock table `name`: `"schema"."table_token_seq"` (the table part
/// shortened so the name stays within PostgreSQL's 63 bytes).
pub(crate) fn quoted_sequence(name: &str) -> Result<String, LockError> {
    check_table_name(name)?;
    let (schema, table) = match name.split_once('.') {
        Some((s, t)) => (Some(s), t),
        None => (None, name),
    };
    let short = &table[..table.len().min(53)];
    let seq = format!("{short}_token_seq");
    Ok(match schema {
        Some(s) => quoted_table(&format!("{s}.{seq}"))?,
        None => quoted_table(&seq)?,
    })
}

/// Checks that `name` is `ident` or `schema.ident` with plain identifiers.
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
    // 55P03 (lock_timeout) and 57014 (statement_timeout, cancel) mean the statement was
    // stopped before it took effect: transient, like an outage.
    let connection_lost = e.code().is_some_and(|c| {
        let c = c.code();
        c.starts_with("08") || c.starts_with("57P") || c == "55P03" || c == "57014"
    });
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

/// The statements creating a lock table and its token sequence (`<table>_token_seq`).
///
/// Tokens come from the sequence (and never fall below the row's previous token), so
/// rows of idle keys can be deleted ([`PostgresBackend::cleanup_idle`]) without a later
/// acquisition of the same key repeating a token.
pub fn migration_sql(table: &str) -> Result<String, LockError> {
    let seq = quoted_sequence(table)?;
    let table = quoted_table(table)?;
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {table} (
            lock_key   text PRIMARY KEY,
            token      bigint NOT NULL CHECK (token > 0),
            owner      bytea,
            expires_at timestamptz NOT NULL
        );
        CREATE SEQUENCE IF NOT EXISTS {seq} AS bigint OWNED BY {table}.token"
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

    /// Operator cleanup: deletes the rows of keys that nobody has held for `idle_for`
    /// (released rows count as idle since forever), so one-off lock names do not pile
    /// up. Safe for tokens: a deleted key's next token comes from the sequence, which is
    /// past every token it handed out; rows whose token is not yet covered by the
    /// sequence (older tables) are kept. Returns how many rows were deleted.
    pub async fn cleanup_idle(&self, idle_for: Duration) -> Result<u64, LockError> {
        let t = quoted_table(&self.inner.options.table)?;
        let seq = quoted_sequence(&self.inner.options.table)?;
        let conn = self.conn().await?;
        let limit = self.inner.options.op_timeout;
        let sql = format!(
            "DELETE FROM {t}
              WHERE expires_at < now() - $1::bigint * interval '1 millisecond'
                AND token <= (SELECT last_value FROM {seq})"
        );
        conn.check(
            bounded(NAME, "cleanup", limit, async {
                conn.client
                    .execute(&sql, &[&ttl_millis(idle_for.min(MAX_IDLE))])
                    .await
                    .map_err(|e| pg_error("cleanup", e))
            })
            .await,
        )
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
        let t = quoted_table(&options.table)?;
        let t = t.as_str();
        // Inside nextval('…') the quoted name is a string literal: no single quotes in it.
        let seq = quoted_sequence(&options.table)?;
        let setup = async {
            // Server-side bounds, so a statement the client stopped waiting for (or whose
            // client vanished) cannot go on and take a lock for nobody.
            // A smaller timeout already set for the session (e.g. in the connection
            // options) is kept.
            let ms = ttl_millis(options.op_timeout).max(1);
            let keep_smaller = |name: &str| {
                format!(
                    "SELECT set_config('{name}', CASE
                        WHEN current_setting('{name}')::interval = interval '0'
                          OR current_setting('{name}')::interval > interval '{ms} ms'
                        THEN '{ms}ms' ELSE current_setting('{name}') END, false);"
                )
            };
            client
                .batch_execute(&format!(
                    "{}{}",
                    keep_smaller("lock_timeout"),
                    keep_smaller("statement_timeout")
                ))
                .await
                .map_err(|e| pg_error("setup", e))?;
            check_durability(&client, options.require_durable).await?;
            if options.create_table {
                migrate(&client, &options.table).await?;
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
                 VALUES ($1, nextval('{seq}'), $2, now() + $3::bigint * interval '1 millisecond')
                 ON CONFLICT (lock_key) DO UPDATE
                    SET token = GREATEST(l.token + 1, EXCLUDED.token),
                        owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
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

/// Warns about (or, with `require`, refuses) a server that can lose acknowledged commits.
async fn check_durability(client: &Client, require: bool) -> Result<(), LockError> {
    let row = client
        .query_one(
            "SELECT current_setting('synchronous_commit'), pg_is_in_recovery()",
            &[],
        )
        .await
        .map_err(|e| pg_error("setup", e))?;
    let sync: String = row.try_get(0).map_err(|e| pg_error("setup", e))?;
    let standby: bool = row.try_get(1).map_err(|e| pg_error("setup", e))?;
    let mut problems = Vec::new();
    if matches!(sync.as_str(), "off" | "local") {
        problems.push(format!(
            "synchronous_commit = {sync}: a crash or failover can lose acknowledged grants"
        ));
    }
    if standby {
        problems.push("the server is a standby (in recovery)".to_owned());
    }
    if problems.is_empty() {
        return Ok(());
    }
    let message = problems.join("; ");
    if require {
        return Err(LockError::Config(format!(
            "unsafe PostgreSQL server: {message}"
        )));
    }
    tracing::warn!(target: "fenced_lock", backend = NAME, "{message}");
    Ok(())
}

/// Reads the token of an acquire's `RETURNING` row.
fn row_token(row: &tokio_postgres::Row) -> Result<FencingToken, LockError> {
    let raw: i64 = row.try_get(0).map_err(|e| pg_error("acquire", e))?;
    u64::try_from(raw)
        .ok()
        .and_then(FencingToken::new)
        .ok_or_else(|| LockError::Backend {
            backend: NAME,
            context: "acquire",
            message: format!("invalid token {raw} in lock table"),
        })
}

impl LockBackend for PostgresBackend {
    async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        self.try_acquire_within(key, ttl, self.inner.options.op_timeout)
            .await
    }

    /// When the client stops waiting it cancels the statement on the server and waits
    /// (up to `op_timeout`) for its outcome; a grant that landed anyway is released. So
    /// an `Err` means the lock is not held by this attempt, never by nobody.
    async fn try_acquire_within(
        &self,
        key: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<Option<Lease>, LockError> {
        validate(key, ttl)?;
        let opts = &self.inner.options;
        let limit = limit.min(opts.op_timeout);
        let owner = OwnerId::random();
        let sent = Instant::now();
        let conn = bounded(NAME, "connect", limit, self.conn()).await?;
        let owner_bytes = owner.to_bytes();
        let owner_slice = &owner_bytes[..];
        let millis = ttl_millis(ttl);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&key, &owner_slice, &millis];
        let query = conn.client.query_opt(&conn.acquire, &params);
        tokio::pin!(query);
        let lease =
            |token| Lease::new(key, token, owner, ttl, sent + ttl).with_drift(opts.clock_drift);
        let left = limit.saturating_sub(sent.elapsed());
        match tokio::time::timeout(left, &mut query).await {
            Ok(r) => {
                let row = conn.check(r.map_err(|e| pg_error("acquire", e)))?;
                match row {
                    Some(row) => Ok(Some(lease(row_token(&row)?))),
                    None => Ok(None),
                }
            }
            Err(_) => {
                let cancel = conn.client.cancel_token();
                let _ = tokio::time::timeout(opts.op_timeout, cancel.cancel_query(NoTls)).await;
                match tokio::time::timeout(opts.op_timeout, query).await {
                    Ok(Ok(Some(row))) => {
                        // Granted before the cancel landed: give it back.
                        if let Ok(token) = row_token(&row) {
                            let _ = self.release(lease(token)).await;
                        }
                    }
                    Ok(_) => {}
                    // No outcome: drop the connection, so the server rolls the statement
                    // back when it notices (and lock_timeout stops it meanwhile).
                    Err(_) => conn
                        .broken
                        .store(true, std::sync::atomic::Ordering::Relaxed),
                }
                Err(LockError::op_timeout(NAME, "acquire", limit))
            }
        }
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

impl crate::LockAdmin for PostgresBackend {
    async fn inspect(&self, key: &str) -> Result<Option<crate::LockInfo>, LockError> {
        let t = quoted_table(&self.inner.options.table)?;
        let sql = format!(
            "SELECT token, (extract(epoch FROM expires_at - now()) * 1000)::bigint
               FROM {t} WHERE lock_key = $1 AND owner IS NOT NULL AND expires_at > now()"
        );
        let conn = self.conn().await?;
        let row = conn.check(
            bounded(NAME, "inspect", self.inner.options.op_timeout, async {
                conn.client
                    .query_opt(&sql, &[&key])
                    .await
                    .map_err(|e| pg_error("inspect", e))
            })
            .await,
        )?;
        let Some(row) = row else { return Ok(None) };
        let ms: i64 = row.try_get(1).map_err(|e| pg_error("inspect", e))?;
        Ok(Some(crate::LockInfo {
            token: row_token(&row)?,
            remaining: Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
        }))
    }

    async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        let t = quoted_table(&self.inner.options.table)?;
        let sql = format!(
            "UPDATE {t} SET owner = NULL, expires_at = '-infinity'
              WHERE lock_key = $1 AND owner IS NOT NULL AND expires_at > now()"
        );
        let conn = self.conn().await?;
        let n = conn.check(
            bounded(
                NAME,
                "force release",
                self.inner.options.op_timeout,
                async {
                    conn.client
                        .execute(&sql, &[&key])
                        .await
                        .map_err(|e| pg_error("force release", e))
                },
            )
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
