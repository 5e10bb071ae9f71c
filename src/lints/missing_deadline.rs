use super::{Violation, lock_name};
use crate::classify::Classified;
use crate::config::RuleOptions;
use crate::sites::Ttl;

/// ## What it does
/// Flags an acquisition that sets no deadline where the caller must set one: `SET … NX` without
/// `EX`/`PX`/`EXAT`/`PXAT`, `SETNX`/`set_nx` (even when an `EXPIRE` follows: the two are not
/// atomic), etcd `lock` without a lease, or options with no lease attached.
///
/// ## Why it matters
/// A lock with no deadline outlives its holder. When the process crashes, is killed or loses its
/// network between acquiring and releasing, the key stays, and every later acquisition fails until
/// someone deletes it by hand. `SETNX` followed by `EXPIRE` has the same hole between its two
/// commands.
///
/// Locks bound to a session, a transaction or a library default (PostgreSQL advisory locks,
/// ZooKeeper, Consul sessions, DynamoDB lease defaults, Kubernetes leases) end with their owner and
/// are not flagged.
///
/// ## Example
/// ```rust
/// let ok: bool = con.set_nx("lock:import", token).await?;
/// let _: () = con.expire("lock:import", 30).await?;
/// ```
///
/// ## Use instead
/// ```rust
/// let ok: Option<String> = redis::cmd("SET")
///     .arg("lock:import").arg(&token).arg("NX").arg("PX").arg(30_000)
///     .query_async(&mut con).await?;
/// ```
/// or a lease with a fencing token from `fenced-lock`:
/// ```rust
/// let lease = backend.acquire("import", Duration::from_secs(30), Duration::from_secs(5)).await?;
/// ```
///
/// ## Known limits
/// A TTL set through a value the analysis cannot follow (a parameter, a field filled elsewhere) is
/// assumed present.
pub struct MissingDeadline;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    if c.site.via.is_some() {
        return None;
    }
    let Ttl::Missing { reason } = &c.site.ttl else {
        return None;
    };
    Some(Violation {
        span: c.site.span,
        message: format!("{} acquires without a deadline: {reason}", lock_name(c)),
        help: "set the expiry in the acquiring call itself (SET … NX PX <ms>, an etcd lease), so a crashed holder cannot keep the lock forever".into(),
        ..Default::default()
    })
}
