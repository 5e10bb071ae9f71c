use super::{Violation, lock_name};
use crate::classify::{Classified, Purpose};
use crate::config::RuleOptions;

/// ## What it does
/// Flags a correctness lock kept in a store without consensus: the Redis family (rslock, redlock,
/// raw Redis, `fenced-lock`'s Redis backend) and memcached-style stores. PostgreSQL, DynamoDB,
/// etcd, ZooKeeper, Consul and Kubernetes leases are not flagged, nor purposes that say
/// `fenced-by = "…"`.
///
/// ## Why it matters
/// A single Redis, or a primary with asynchronous replicas, acknowledges a lock before any other
/// node has it. When that node fails, the replica that takes over may not have the key: a second
/// client acquires a lock that the first still believes it holds. Redlock's quorum over
/// independent nodes depends on bounded clock drift and pauses, which is the assumption fencing
/// exists to drop. A token counter kept in such a store can go backwards after a failover too.
///
/// ## Example
/// ```rust
/// // lockaudit: correctness
/// let lock = redlock.lock(b"payout", 10_000)?;
/// ```
///
/// ## Use instead
/// A store with consensus for the lock (etcd, ZooKeeper, Consul, or PostgreSQL), with fencing:
/// ```rust
/// let backend = fenced_lock::EtcdBackend::connect(["http://127.0.0.1:2379"]).await?;
/// let lease = backend.acquire("payout", ttl, wait).await?;
/// ```
/// or make the resource enforce exclusion and declare it with `fenced-by`.
///
/// ## Known limits
/// Whether a store has consensus is a property of its rule pack (`consensus = …`), not of how it
/// is deployed: a Redis with `WAIT` and AOF `appendfsync always` is still reported.
pub struct NonConsensusCorrectnessLock;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    if c.purpose != Purpose::Correctness
        || c.site.consensus
        || c.fenced_by.is_some()
        || c.site.wrapped
    {
        return None;
    }
    Some(Violation {
        span: c.site.span,
        message: format!("{} guards correctness but lives in a store without consensus; a failover can lose it while it is held", lock_name(c)),
        help: "keep correctness locks in a store with consensus (etcd, ZooKeeper, Consul, PostgreSQL) and fence the writes".into(),
        ..Default::default()
    })
}
