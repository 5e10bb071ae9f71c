//! etcd fence: the last admitted ticket in a key, checked and advanced in the same etcd
//! transaction as the protected writes.
//!
//! Each call reads the fence key, decides on the client, then commits one transaction
//! `if mod_revision(fence) == seen then put(fence, ticket) + your ops`. If another
//! admission got in between, the comparison fails and the call starts over, so the
//! check and the writes are atomic (optimistic concurrency, as etcd's own STM).

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnResponse};
use std::time::Duration;

use crate::backend::bounded;
use crate::backend::etcd::etcd_error;
use crate::fence::{admits, check_resource};
use crate::{Fence, FenceError, FencingToken, HolderId, LockError, StaleToken, Ticket};

const NAME: &str = "etcd";
/// Attempts before giving up under heavy contention on one fence key.
const MAX_ROUNDS: usize = 64;

/// High-water marks in etcd keys `<prefix><resource>`, and fenced transactions.
#[derive(Clone)]
pub struct EtcdFence {
    client: Client,
    prefix: String,
    op_timeout: Duration,
}

impl std::fmt::Debug for EtcdFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdFence")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn to_fence_error(e: LockError) -> FenceError {
    super::backend_error(NAME, e)
}

/// `token:holder`, both decimal.
fn parse(value: &[u8]) -> Option<Ticket> {
    let s = std::str::from_utf8(value).ok()?;
    let (t, h) = s.split_once(':')?;
    Some(Ticket::new(
        FencingToken::new(t.parse().ok()?)?,
        HolderId::from_raw(h.parse().ok()?),
    ))
}

impl EtcdFence {
    /// A fence on an etcd client (e.g. `EtcdBackend::client().clone()`); fence keys are
    /// `prefix + resource`.
    pub fn new(client: Client, prefix: &str) -> Self {
        Self {
            client,
            prefix: prefix.to_owned(),
            op_timeout: Duration::from_secs(5),
        }
    }

    /// The key holding the high-water mark of `resource`.
    pub fn fence_key(&self, resource: &str) -> String {
        format!("{}{resource}", self.prefix)
    }

    /// Admits `ticket` and runs `ops` in the same transaction; nothing is written when
    /// the ticket is stale ([`FenceError::Stale`]).
    pub async fn txn(
        &self,
        resource: &str,
        ticket: Ticket,
        ops: Vec<TxnOp>,
    ) -> Result<TxnResponse, FenceError> {
        check_resource(resource)?;
        let key = self.fence_key(resource);
        let value = format!("{}:{}", ticket.token, ticket.holder.get());
        let mut client = self.client.clone();
        bounded(NAME, "fenced txn", self.op_timeout, async {
            for _ in 0..MAX_ROUNDS {
                let got = client
                    .get(key.as_str(), None)
                    .await
                    .map_err(|e| etcd_error("fence read", e))?;
                let (current, guard) = match got.kvs().first() {
                    Some(kv) => {
                        // An unreadable value never admits: fail closed.
                        let Some(cur) = parse(kv.value()) else {
                            return Ok(Err(StaleToken {
                                resource: resource.to_owned(),
                                presented: ticket.token,
                                current: None,
                            }));
                        };
                        (
                            Some(cur),
                            Compare::mod_revision(
                                key.as_str(),
                                CompareOp::Equal,
                                kv.mod_revision(),
                            ),
                        )
                    }
                    None => (
                        None,
                        Compare::create_revision(key.as_str(), CompareOp::Equal, 0),
                    ),
                };
                if !admits(current, ticket) {
                    return Ok(Err(StaleToken {
                        resource: resource.to_owned(),
                        presented: ticket.token,
                        current: current.map(|c| c.token),
                    }));
                }
                let mut then = vec![TxnOp::put(key.as_str(), value.as_str(), None)];
                then.extend(ops.iter().cloned());
                let resp = client
                    .txn(Txn::new().when([guard]).and_then(then))
                    .await
                    .map_err(|e| etcd_error("fenced txn", e))?;
                if resp.succeeded() {
                    return Ok(Ok(resp));
                }
            }
            Err(LockError::Backend {
                backend: NAME,
                context: "fenced txn",
                message: format!("fence key changed {MAX_ROUNDS} times in a row"),
            })
        })
        .await
        .map_err(to_fence_error)?
        .map_err(FenceError::from)
    }

    /// Fenced `put key value`.
    pub async fn put(
        &self,
        resource: &str,
        ticket: Ticket,
        key: &str,
        value: &[u8],
    ) -> Result<(), FenceError> {
        self.txn(resource, ticket, vec![TxnOp::put(key, value, None)])
            .await
            .map(drop)
    }
}

impl Fence for EtcdFence {
    async fn check_only(&self, resource: &str, ticket: Ticket) -> Result<(), FenceError> {
        self.txn(resource, ticket, Vec::new()).await.map(drop)
    }
}
