use super::{Violation, lock_name};
use crate::classify::Classified;
use crate::config::RuleOptions;
use crate::packs::ReleaseStyle;
use crate::sites::Fencing;

/// ## What it does
/// Flags an explicitly released lock (no guard releases it on drop) that is never released, or
/// that has a path out of its region that skips the release: a `?`, a `return`, or a `break` out of
/// the loop that holds it. Locks handed on (returned, stored, passed to another function) are
/// that code's business and not flagged, and neither are paths on which a try-acquisition failed
/// (a checked `None`, `false` or `Err`), which hold nothing.
///
/// ## Why it matters
/// An unreleased lock blocks everyone else until its TTL runs out, and without a TTL until someone
/// deletes it by hand. Early returns are where releases are forgotten: the error path runs rarely,
/// and then leaves the lock behind.
///
/// ## Example
/// ```rust
/// let lock = manager.lock(b"import", ttl).await?;
/// let rows = parse(&file)?;              // an error here leaves the lock held
/// import(rows).await?;
/// manager.unlock(&lock).await;
/// ```
///
/// ## Use instead
/// Release on every path, e.g. by running the work in a block and releasing after it:
/// ```rust
/// let lock = manager.lock(b"import", ttl).await?;
/// let result = async { import(parse(&file)?).await }.await;
/// manager.unlock(&lock).await;
/// result?;
/// ```
/// or use an API that releases for you (`fenced-lock`'s `Keeper::run`).
///
/// ## Known limits
/// The region is followed in the function that acquires; for a wrapper that runs the caller's
/// work while holding (`with_lock(key, work)`), inside the wrapper. A release inside a conditional branch
/// counts as a release. A lock known only by its key (a raw `SET … NX`, an advisory lock in SQL) is
/// reported only when the same function releases it on some paths and not on others: such locks
/// are often released by another function. A session advisory lock ends with its session, except
/// on a connection a pool lent (`pool.acquire()`, deadpool, bb8) or taken by a statement run on
/// the pool itself (`execute(&pool)`, also `advisory-lock-on-pool`; or by a helper given the pool,
/// `try_lock(&pool, key)`): dropped on an early `?`, that connection goes back to the pool still
/// holding the lock, so the path is reported. A pool's type is known from a signature, or from
/// how it was built (`PgPool::connect(url)`, `PgPoolOptions::new()….connect_with(opts)`).
pub struct UnreleasedLock;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    let s = &c.site;
    // A session lock taken on a connection a pool lent (or by a statement run on the pool
    // itself) ends with the session only when the connection is closed: dropped, it goes back
    // to the pool still holding the lock. A transaction lock ends with its transaction.
    let lent =
        s.sql && (s.checkout.is_some() || s.pool.is_some() && s.fencing != Fencing::Transaction);
    // A scoped wrapper's own primitive is judged here: its callers cannot see its paths out.
    let judged_here = !s.wrapped || s.released_inside;
    if (s.release != ReleaseStyle::Explicit && !lent) || s.region.escapes || !judged_here {
        return None;
    }
    // A lock known only by its key (a raw command, SQL) is often released by another function:
    // only flag it when a release exists here but some path skips it.
    let (message, span) = match (&s.region.release, s.region.leaks.first()) {
        (None, _) if s.sql || !s.region.by_name => return None,
        (None, _) => (format!("{} is never released", lock_name(c)), s.span),
        (Some(_), Some(leak)) => (
            format!(
                "{} is not released on the path that leaves at line {}",
                lock_name(c),
                leak.line
            ),
            s.span,
        ),
        (Some(_), None) => return None,
    };
    Some(Violation {
        span,
        message,
        help: "release the lock on every path out of the region (run the work in a block, then release), or hand it to a guard or keeper".into(),
        ..Default::default()
    })
}
