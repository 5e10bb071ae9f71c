use super::{Violation, lock_name};
use crate::classify::{Classified, Purpose};
use crate::config::RuleOptions;
use crate::sites::Fencing;

/// ## What it does
/// Flags a lock used for correctness that nothing fences: its library issues no fencing token
/// (rslock, redlock, raw Redis, dynamodb-lock, Kubernetes leases, PostgreSQL session advisory
/// locks), or it does (etcd's revision, Consul's `LockIndex`, `fenced-lock`'s `token()`) but the
/// token is never read and passed into a call while the lock is held. Writes through a ZooKeeper
/// lock client's own methods count as fenced.
///
/// Not flagged: purposes that say `fenced-by = "…"` (the resource enforces exclusion itself), and
/// `pg_advisory_xact_lock`, which ends with the transaction that carries the writes.
///
/// ## Why it matters
/// A lock with a deadline does not give mutual exclusion. The holder can pause (GC, a suspended
/// VM, a slow disk) past its TTL; another process acquires; the first resumes and writes, not
/// knowing it lost. Only the resource can stop that write, and only if every write carries a token
/// that grows with every acquisition and the resource rejects the smaller one. This is how the
/// importer in lockaudit's origin story wrote 12,000 duplicate rows.
///
/// ## Example
/// ```rust
/// // lockaudit: correctness
/// let lock = manager.lock(b"ledger", Duration::from_secs(10)).await?;
/// ledger.append(entry).await?;
/// ```
///
/// ## Use instead
/// A lease with a fencing token, and a resource that checks it:
/// ```rust
/// // lockaudit: correctness
/// let lease = backend.acquire("ledger", Duration::from_secs(10), wait).await?;
/// fence.admit("ledger", lease.token()).await?;       // rejects a stale holder
/// ledger.append_fenced(entry, lease.token()).await?; // or carry it into the write
/// ```
/// or make the write safe by itself and say so:
/// `// lockaudit: correctness fenced-by = "INSERT … ON CONFLICT (file, line) DO NOTHING"`.
///
/// ## Known limits
/// A token counts as used when it is passed to any call in the lock's region (other than the
/// lock's own renew or release); whether that call really makes the resource check it is not
/// verified.
pub struct UnfencedCorrectnessLock;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    if c.purpose != Purpose::Correctness || c.site.wrapped {
        return None;
    }
    let (message, help) = match c.site.fencing {
        Fencing::Declared | Fencing::Transaction => return None,
        Fencing::None => (
            format!(
                "{} guards correctness but issues no fencing token, so a paused holder can overwrite the next one",
                lock_name(c)
            ),
            "use a lock with fencing tokens (fenced-lock) and check the token in the resource, or declare `fenced-by = \"…\"` if the resource enforces exclusion itself",
        ),
        Fencing::Token => {
            let r = &c.site.region;
            if r.token_passed || r.fenced_writes || r.escapes {
                return None;
            }
            (
                format!(
                    "{} guards correctness, but its fencing token never reaches the resource",
                    lock_name(c)
                ),
                "pass the token (fenced-lock `token()`, etcd's revision, Consul's `LockIndex`) into the write so the resource can reject a stale holder",
            )
        }
    };
    Some(Violation {
        span: c.site.span,
        message,
        help: help.into(),
        ..Default::default()
    })
}
