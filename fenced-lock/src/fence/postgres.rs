//! PostgreSQL fence: the highest admitted token per resource in a table.
//!
//! # Fencing your own tables
//!
//! The strongest form keeps the token in the row being written and makes the
//! write itself conditional, so check and write are one statement:
//!
//! ```sql
//! ALTER TABLE accounts ADD COLUMN fence_token bigint NOT NULL DEFAULT 0;
//!
//! UPDATE accounts
//!    SET balance = $1, fence_token = $2          -- $2 = lease.token()
//!  WHERE id = $3 AND fence_token <= $2;          -- 0 rows updated => stale holder, abort
//! ```
//!
//! If the write spans several rows or tables, call
//! [`PostgresFence::admit_in`] inside the same transaction as the write: the
//! fence row stays locked until commit, so a newer holder's admit waits for
//! (and then supersedes) this one and a stale transaction fails before writing.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::{Client, GenericClient, Statement};

use crate::backend::bounded;
use crate::backend::postgres::{check_table_name, connect_client, pg_error};
use crate::fence::check_resource;
use crate::{Fence, FenceError, FencingToken, LockError, StaleToken};

const NAME: &str = "postgres";

/// A fence table `(resource text PRIMARY KEY, fence_token bigint)`.
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
    // Upsert on first use; afterwards a conditional update that only moves forward.
    format!(
        "INSERT INTO {t} AS f (resource, fence_token) VALUES ($1, $2)
         ON CONFLICT (resource) DO UPDATE SET fence_token = EXCLUDED.fence_token
            WHERE f.fence_token <= EXCLUDED.fence_token"
    )
}

fn to_fence_error(e: LockError) -> FenceError {
    super::backend_error(NAME, e)
}

impl PostgresFence {
    /// Connects (no TLS) and creates `table` if missing.
    pub async fn connect(config: &str, table: &str) -> Result<Self, FenceError> {
        check_table_name(table).map_err(to_fence_error)?;
        let limit = Duration::from_secs(5);
        let client = connect_client(config, limit)
            .await
            .map_err(to_fence_error)?;
        Self::from_client(client, table).await
    }

    /// Uses a connected client; creates `table` if missing.
    pub async fn from_client(client: Client, table: &str) -> Result<Self, FenceError> {
        check_table_name(table).map_err(to_fence_error)?;
        let limit = Duration::from_secs(5);
        let admit = bounded(NAME, "fence setup", limit, async {
            client
                .batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS {table} (
                        resource    text PRIMARY KEY,
                        fence_token bigint NOT NULL CHECK (fence_token > 0)
                    )"
                ))
                .await
                .map_err(|e| pg_error("fence setup", e))?;
            client
                .prepare(&admit_sql(table))
                .await
                .map_err(|e| pg_error("fence setup", e))
        })
        .await
        .map_err(to_fence_error)?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                table: table.to_owned(),
                admit,
                op_timeout: limit,
            }),
        })
    }

    /// Admits `token` inside the caller's transaction (or on any client), so
    /// the check commits or rolls back together with the protected write.
    pub async fn admit_in<C: GenericClient + Sync>(
        &self,
        client: &C,
        resource: &str,
        token: FencingToken,
    ) -> Result<(), FenceError> {
        check_resource(resource)?;
        let raw = token_i64(token)?;
        let n = client
            .execute(&admit_sql(&self.inner.table), &[&resource, &raw])
            .await
            .map_err(|e| to_fence_error(pg_error("fence admit", e)))?;
        if n == 1 {
            Ok(())
        } else {
            Err(self.stale(client, resource, token).await)
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
    async fn admit(&self, resource: &str, token: FencingToken) -> Result<(), FenceError> {
        check_resource(resource)?;
        let raw = token_i64(token)?;
        let inner = &*self.inner;
        let n = bounded(NAME, "fence admit", inner.op_timeout, async {
            inner
                .client
                .execute(&inner.admit, &[&resource, &raw])
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
