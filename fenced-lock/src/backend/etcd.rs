//! etcd backend: a lease plus a create-if-absent transaction.
//!
//! * acquire: `LeaseGrant(ceil(ttl) s)`, then one transaction
//!   `if create_revision(key) == 0 then put(key, owner, lease)`. The token is the
//!   key's create revision: etcd's revision counter is cluster-wide, agreed
//!   through Raft and persisted, so it increases across acquisitions, clients,
//!   leader changes and restarts. Lease ids are never used as tokens (they are
//!   not ordered).
//! * renew: one lease keep-alive; a TTL <= 0 in the answer means the lease is
//!   gone. A read then confirms the key still carries our revision and lease
//!   (the key could have been deleted by an operator while the lease lives).
//! * release: `if create_revision(key) == token && value(key) == owner then
//!   delete(key)` in one transaction; the lease is then revoked in the
//!   background (the delete is the release; the lease would expire anyway).
//!
//! etcd lease TTLs are whole seconds with a server minimum (about 1–2 s with
//! default election settings): the server may hold a lease longer than asked,
//! never shorter, so the client-side `valid_until` (request time + ttl) stays
//! conservative.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, PutOptions, Txn, TxnOp};
use tokio::time::Instant;

use crate::backend::bounded;
use crate::lease::validate;
use crate::{ClockDrift, FencingToken, Lease, LockBackend, LockError, OwnerId};

const NAME: &str = "etcd";

/// Options of [`EtcdBackend`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EtcdOptions {
    /// Prefix of every key this crate writes. Default `fenced-lock/`.
    pub prefix: String,
    /// Deadline of each operation and of connecting. Default 5 s.
    pub op_timeout: Duration,
    /// Margin taken off each lease's validity for the server clock running fast.
    /// Default 1 % of the TTL + 2 ms.
    pub clock_drift: ClockDrift,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            prefix: "fenced-lock/".into(),
            op_timeout: Duration::from_secs(5),
            clock_drift: ClockDrift::default(),
        }
    }
}

impl EtcdOptions {
    /// Sets the key prefix.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the per-operation deadline.
    pub fn op_timeout(mut self, d: Duration) -> Self {
        self.op_timeout = d;
        self
    }
}

/// Leases in etcd. Clones share the gRPC channel.
#[derive(Clone)]
pub struct EtcdBackend {
    client: Client,
    options: Arc<EtcdOptions>,
}

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn etcd_error(context: &'static str, e: etcd_client::Error) -> LockError {
    use etcd_client::Error as E;
    match e {
        E::TransportError(_) | E::IoError(_) => LockError::unavailable(NAME, context, e),
        // gRPC codes CANCELLED (1), DEADLINE_EXCEEDED (4), UNAVAILABLE (14).
        E::GRpcStatus(ref s) if matches!(i32::from(s.code()), 1 | 4 | 14) => {
            LockError::unavailable(NAME, context, e)
        }
        other => LockError::Backend {
            backend: NAME,
            context,
            message: other.to_string(),
        },
    }
}

/// Whether a keep-alive error means the lease no longer exists.
fn lease_gone(e: &etcd_client::Error) -> bool {
    match e {
        etcd_client::Error::LeaseKeepAliveError(m) => m.contains("not found"),
        // gRPC NOT_FOUND (5)
        etcd_client::Error::GRpcStatus(s) => i32::from(s.code()) == 5,
        _ => false,
    }
}

/// Lease TTL in whole seconds, rounded up (etcd's unit).
fn ttl_secs(ttl: Duration) -> i64 {
    let s = ttl.as_secs() + u64::from(ttl.subsec_nanos() != 0);
    i64::try_from(s.max(1)).unwrap_or(i64::MAX)
}

impl EtcdBackend {
    /// Connects to `endpoints` (e.g. `["http://127.0.0.1:2379"]`) and checks
    /// that the cluster answers.
    pub async fn connect<E: AsRef<str>>(endpoints: &[E]) -> Result<Self, LockError> {
        Self::connect_with(endpoints, EtcdOptions::default()).await
    }

    /// Connects with options.
    pub async fn connect_with<E: AsRef<str>>(
        endpoints: &[E],
        options: EtcdOptions,
    ) -> Result<Self, LockError> {
        let limit = options.op_timeout;
        let opts = ConnectOptions::new()
            .with_connect_timeout(limit)
            .with_timeout(limit);
        let client = bounded(NAME, "connect", limit, async {
            let mut client = Client::connect(endpoints, Some(opts))
                .await
                .map_err(|e| etcd_error("connect", e))?;
            // Channels connect lazily: make one real request so an unreachable
            // cluster fails here rather than at the first lock.
            client
                .get(options.prefix.as_bytes(), None)
                .await
                .map_err(|e| etcd_error("connect", e))?;
            Ok(client)
        })
        .await?;
        Ok(Self {
            client,
            options: Arc::new(options),
        })
    }

    /// The etcd key for a lock key.
    pub fn etcd_key(&self, key: &str) -> String {
        format!("{}{key}", self.options.prefix)
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Revokes a lease in the background. Nothing waits for it: the key is
    /// already deleted (or was never written), and an unrevoked lease just
    /// expires by itself after its TTL, so this only frees server memory early.
    fn revoke(&self, lease_id: i64) {
        let mut c = self.client.clone();
        let limit = self.options.op_timeout;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(limit, c.lease_revoke(lease_id)).await;
        });
    }
}

impl LockBackend for EtcdBackend {
    /// The attempt runs in its own task; when the caller stops waiting, the task is left
    /// to finish and a grant that lands anyway is released at once.
    async fn try_acquire_within(
        &self,
        key: &str,
        ttl: Duration,
        limit: Duration,
    ) -> Result<Option<Lease>, LockError> {
        let limit = limit.min(self.options.op_timeout);
        crate::backend::attempt_in_task(self, NAME, key, ttl, limit).await
    }

    async fn try_acquire(&self, key: &str, ttl: Duration) -> Result<Option<Lease>, LockError> {
        validate(key, ttl)?;
        let owner = OwnerId::random();
        let k = self.etcd_key(key);
        let mut c = self.client.clone();
        let limit = self.options.op_timeout;
        let sent = Instant::now();
        let lease_id = bounded(NAME, "acquire", limit, async {
            c.lease_grant(ttl_secs(ttl), None)
                .await
                .map(|r| r.id())
                .map_err(|e| etcd_error("acquire", e))
        })
        .await?;
        let txn = Txn::new()
            .when([Compare::create_revision(k.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                k.as_str(),
                owner.to_string(),
                Some(PutOptions::new().with_lease(lease_id)),
            )]);
        let resp = match bounded(NAME, "acquire", limit, async {
            c.txn(txn).await.map_err(|e| etcd_error("acquire", e))
        })
        .await
        {
            Ok(r) => r,
            Err(e) => {
                self.revoke(lease_id);
                return Err(e);
            }
        };
        if !resp.succeeded() {
            self.revoke(lease_id);
            return Ok(None);
        }
        // The put is the txn's only write, so the new store revision is the
        // key's create revision.
        let rev = resp.header().map_or(0, |h| h.revision());
        let Some(token) = u64::try_from(rev).ok().and_then(FencingToken::new) else {
            self.revoke(lease_id);
            return Err(LockError::Backend {
                backend: NAME,
                context: "acquire",
                message: format!("transaction reported revision {rev}"),
            });
        };
        Ok(Some(
            Lease::new(key, token, owner, ttl, sent + ttl)
                .with_handle(lease_id)
                .with_drift(self.options.clock_drift),
        ))
    }

    async fn renew(&self, lease: &mut Lease) -> Result<(), LockError> {
        let mut c = self.client.clone();
        let limit = self.options.op_timeout;
        let lease_id = lease.handle;
        let sent = Instant::now();
        let granted = bounded(NAME, "renew", limit, async {
            let (mut keeper, mut stream) = match c.lease_keep_alive(lease_id).await {
                Ok(pair) => pair,
                Err(e) if lease_gone(&e) => return Ok(0),
                Err(e) => return Err(etcd_error("renew", e)),
            };
            keeper
                .keep_alive()
                .await
                .map_err(|e| etcd_error("renew", e))?;
            match stream.message().await {
                Ok(Some(r)) => Ok(r.ttl()),
                Ok(None) => Ok(0),
                Err(e) if lease_gone(&e) => Ok(0),
                Err(e) => Err(etcd_error("renew", e)),
            }
        })
        .await?;
        if granted <= 0 {
            return Err(lease.lost());
        }
        let k = self.etcd_key(lease.key());
        let kv = bounded(NAME, "renew", limit, async {
            c.get(k.as_str(), None)
                .await
                .map_err(|e| etcd_error("renew", e))
        })
        .await?;
        let owner = lease.owner().to_string();
        let ours = kv.kvs().first().is_some_and(|kv| {
            u64::try_from(kv.create_revision()).ok() == Some(lease.token().get())
                && kv.lease() == lease_id
                && kv.value() == owner.as_bytes()
        });
        if !ours {
            return Err(lease.lost());
        }
        let ttl = lease.ttl();
        lease.renewed(sent, ttl);
        Ok(())
    }

    async fn release(&self, lease: Lease) -> Result<bool, LockError> {
        let mut c = self.client.clone();
        let k = self.etcd_key(lease.key());
        let Ok(rev) = i64::try_from(lease.token().get()) else {
            return Ok(false);
        };
        // Owner and create revision together: only this acquisition's key.
        let txn = Txn::new()
            .when([
                Compare::create_revision(k.as_str(), CompareOp::Equal, rev),
                Compare::value(k.as_str(), CompareOp::Equal, lease.owner().to_string()),
            ])
            .and_then([TxnOp::delete(k.as_str(), None)]);
        let resp = bounded(NAME, "release", self.options.op_timeout, async {
            c.txn(txn).await.map_err(|e| etcd_error("release", e))
        })
        .await?;
        if resp.succeeded() && lease.handle != 0 {
            self.revoke(lease.handle);
        }
        Ok(resp.succeeded())
    }
}

impl crate::LockAdmin for EtcdBackend {
    async fn inspect(&self, key: &str) -> Result<Option<crate::LockInfo>, LockError> {
        let mut c = self.client.clone();
        let k = self.etcd_key(key);
        let limit = self.options.op_timeout;
        let got = bounded(NAME, "inspect", limit, async {
            c.get(k.as_str(), None)
                .await
                .map_err(|e| etcd_error("inspect", e))
        })
        .await?;
        let Some(kv) = got.kvs().first() else {
            return Ok(None);
        };
        let Some(token) = u64::try_from(kv.create_revision())
            .ok()
            .and_then(FencingToken::new)
        else {
            return Ok(None);
        };
        let lease = kv.lease();
        let ttl = bounded(NAME, "inspect", limit, async {
            c.lease_time_to_live(lease, None)
                .await
                .map_err(|e| etcd_error("inspect", e))
        })
        .await?
        .ttl();
        Ok((ttl > 0).then(|| crate::LockInfo {
            token,
            remaining: Duration::from_secs(u64::try_from(ttl).unwrap_or(0)),
        }))
    }

    async fn force_release(&self, key: &str) -> Result<bool, LockError> {
        let mut c = self.client.clone();
        let k = self.etcd_key(key);
        let r = bounded(NAME, "force release", self.options.op_timeout, async {
            c.delete(k.as_str(), None)
                .await
                .map_err(|e| etcd_error("force release", e))
        })
        .await?;
        Ok(r.deleted() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rounds_up_to_seconds() {
        assert_eq!(ttl_secs(Duration::from_millis(1)), 1);
        assert_eq!(ttl_secs(Duration::from_millis(1000)), 1);
        assert_eq!(ttl_secs(Duration::from_millis(1001)), 2);
    }
}
