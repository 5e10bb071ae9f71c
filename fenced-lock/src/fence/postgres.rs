//! PostgreSQL fence: the last admitted ticket per resource in a table.
//!
//! # The atomic forms
//!
//! [`PostgresFence::transaction`] opens a transaction on your client, admits the ticket
//! in it (locking the fence row until commit), and hands the transaction back for your
//! writes: check and writes commit or abort together, and a newer holder's admission
//! waits for your commit and then supersedes it.
//!
//! ```no_run
//! # async fn demo(fence: &fenced_lock::PostgresFence, client: &mut tokio_postgres::Client,
//! #               lease: &fenced_lock::Lease) -> Result<(), Box<dyn std::error::Error>> {
//! let tx = fence.transaction(client, "accounts/7", lease.ticket()).await?; // Err(Stale) => stop
//! tx.execute("UPDATE accounts SET balance = balance - 30 WHERE id = 7", &[]).await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
//!
//! When the row being written can carry its own token, make the write conditional;
//! [`FencingToken`] binds as a `bigint`:
//!
//! ```sql
//! ALTER TABLE accounts ADD COLUMN fence_token bigint NOT NULL DEFAULT 0;
//!
//! UPDATE accounts
//!    SET balance = $1, fence_token = $2          -- $2 = lease.token()
//!  WHERE id = $3 AND fence_token < $2;           -- 0 rows => stale (or already written by this holder)
//! ```
//!
//! Use `<` there, not `<=`: with `<=` two leases holding an equal token (which a lost
//! counter can produce) would both write. A holder that writes the same row twice keeps
//! its second write in the same transaction, or uses [`PostgresFence::transaction`],
//! which tells holders apart.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::{Client, GenericClient, Statement, Transaction};

use crate::backend::bounded;
use crate::backend::postgres::{connect_client, pg_error, quoted_table};
use crate::fence::check_resource;
use crate::{Fence, FenceError, FencingToken, LockError, StaleToken, Ticket};

const NAME: &str = "postgres";

/// A fence table `(resource text PRIMARY KEY, fence_token bigint, holder bigint)`.
///
/// Uses one connection and does not reconnect: after
/// [`FenceError::Unavailable`], connect a new fence (no write was admitted).
#[derive(Clone)]
pub struct PostgresFence {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    table: String,
    admit: Statement,
    op_timeout: Duration,
}

impl std::fmt::Debug for PostgresFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresFence")
            .field("table", &self.inner.table)
            .finish_non_exhaustive()
    }
}

fn admit_sql(t: &str) -> String {
    // Upsert on first use; afterwards a conditional update that only moves forward, or
    // stays put for the same holder. ON CONFLICT locks the row even when the WHERE is
    // false, so inside a transaction the row stays locked until commit. A row from before
    // the holder column (NULL) never matches an equal token: fail closed.
    format!(
        "INSERT INTO {t} AS f (resource, fence_token, holder) VALUES ($1, $2, $3)
         ON CONFLICT (resource) DO UPDATE
            SET fence_token = EXCLUDED.fence_token, holder = EXCLUDED.holder
            WHERE f.fence_token < EXCLUDED.fence_token
               OR (f.fence_token = EXCLUDED.fence_token AND f.holder = EXCLUDED.holder)"
    )
}

fn to_fence_error(e: LockError) -> FenceError {
    super::backend_error(NAME, e)
}

impl PostgresFence {
    /// Connects (no TLS) and creates `table` if missing.
    pub async fn connect(config: &str, table: &str) -> Result<Self, FenceError> {
        quoted_table(table).map_err(to_fence_error)?;
        let limit = Duration::from_secs(5);
        let client = connect_client(config, limit)
            .await
            .map_err(to_fence_error)?;
        Self::from_client(client, table).await
    }

    /// Uses a connected client; creates `table` if missing.
    pub async fn from_client(client: Client, table: &str) -> Result<Self, FenceError> {
        let table = quoted_table(table).map_err(to_fence_error)?;
        let limit = Duration::from_secs(5);
        let admit = bounded(NAME, "fence setup", limit, async {
            client
                .batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS {table} (
                        resource    text PRIMARY KEY,
                        fence_token bigint NOT NULL CHECK (fence_token > 0),
                        holder      bigint
                    );
                    ALTER TABLE {table} ADD COLUMN IF NOT EXISTS holder bigint"
                ))
                .await
                .map_err(|e| pg_error("fence setup", e))?;
            client
                .prepare(&admit_sql(&table))
                .await
                .map_err(|e| pg_error("fence setup", e))
        })
        .await
        .map_err(to_fence_error)?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                table,
                admit,
                op_timeout: limit,
            }),
        })
    }

    /// Starts a transaction on `client`, admits `ticket` for `resource` in it, and returns
    /// the transaction for the protected writes. The fence row stays locked until the
    /// transaction ends, so the check and the writes commit or abort together; a stale
    /// ticket fails here with [`FenceError::Stale`] and the transaction is rolled back.
    ///
    /// The admission waits while another holder's fenced transaction on the same
    /// resource is open (that is the point); set `lock_timeout` on the session to bound it.
    pub async fn transaction<'a>(
        &self,
        client: &'a mut Client,
        resource: &str,
        ticket: Ticket,
    ) -> Result<Transaction<'a>, FenceError> {
        check_resource(resource)?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| to_fence_error(pg_error("fence transaction", e)))?;
        self.admit_in(&tx, resource, ticket).await?;
        Ok(tx)
    }

    /// Admits `ticket` inside the caller's open transaction, so the check commits or rolls
    /// back together with the writes that follow in it (the fence row stays locked until
    /// then). On `Err`, roll back.
    pub async fn admit_in(
        &self,
        tx: &Transaction<'_>,
        resource: &str,
        ticket: Ticket,
    ) -> Result<(), FenceError> {
        check_resource(resource)?;
        let raw = token_i64(ticket.token)?;
        let n = tx
            .execute(
                &admit_sql(&self.inner.table),
                &[&resource, &raw, &ticket.holder.to_i64_bits()],
            )
            .await
            .map_err(|e| to_fence_error(pg_error("fence admit", e)))?;
        if n == 1 {
            Ok(())
        } else {
            Err(self.stale(tx, resource, ticket.token).await)
        }
    }

    /// Builds the rejection, reading the current token for the message.
    async fn stale<C: GenericClient + Sync>(
        &self,
        client: &C,
        resource: &str,
        token: FencingToken,
    ) -> FenceError {
        let sql = format!(
            "SELECT fence_token FROM {} WHERE resource = $1",
            self.inner.table
        );
        let current = client
            .query_opt(&sql, &[&resource])
            .await
            .ok()
            .flatten()
            .and_then(|r| r.try_get::<_, i64>(0).ok())
            .and_then(|v| u64::try_from(v).ok())
            .and_then(FencingToken::new);
        StaleToken {
            resource: resource.to_owned(),
            presented: token,
            current,
        }
        .into()
    }
}

fn token_i64(token: FencingToken) -> Result<i64, FenceError> {
    token.to_i64().ok_or_else(|| FenceError::Backend {
        backend: NAME,
        message: format!("token {token} does not fit a bigint"),
    })
}

impl Fence for PostgresFence {
    async fn check_only(&self, resource: &str, ticket: Ticket) -> Result<(), FenceError> {
        check_resource(resource)?;
        let token = ticket.token;
        let raw = token_i64(token)?;
        let inner = &*self.inner;
        let n = bounded(NAME, "fence admit", inner.op_timeout, async {
            inner
                .client
                .execute(
                    &inner.admit,
                    &[&resource, &raw, &ticket.holder.to_i64_bits()],
                )
                .await
                .map_err(|e| pg_error("fence admit", e))
        })
        .await
        .map_err(to_fence_error)?;
        if n == 1 {
            Ok(())
        } else {
            Err(self.stale(&inner.client, resource, token).await)
        }
    }
}
