use super::{Violation, lock_name};
use crate::classify::Classified;
use crate::config::RuleOptions;

/// ## What it does
/// Flags an acquisition whose guard is dropped where it is taken: the call returns a value that
/// gives the lock back when dropped (sqlx's `PgAdvisoryLockGuard`, redlock's `RedLockGuard`, a
/// pack's `drop-releases` call), and the statement throws it away (`lock.acquire(conn).await?;`,
/// `let _ = lock.acquire(conn).await?;`, or a `match` statement whose success arm makes the guard
/// its value: `match lock.acquire(k).await { Ok(Some(g)) => g, _ => return };`).
///
/// ## Why it matters
/// The lock is given back at the end of the statement that took it, so the code after it runs
/// with no lock at all, while reading as if it held one. It fails silently: the acquisition
/// succeeds, waits for other holders as it should, and then protects nothing. A helper that
/// takes the lock this way and returns `Ok(())` hands every caller an unprotected region.
///
/// ## Example
/// ```rust
/// let conn = pool.acquire().await?;
/// PgAdvisoryLock::new("import").acquire(conn).await?; // the guard drops here
/// import(file).await?;                                   // runs unlocked
/// ```
///
/// ## Use instead
/// Keep the guard for as long as the work runs, and give it back explicitly:
/// ```rust
/// let guard = PgAdvisoryLock::new("import").acquire(conn).await?;
/// import(file).await?;
/// guard.release_now().await?;
/// ```
/// A binding whose name starts with `_` (`let _guard = …`) keeps it too; `let _ = …` does not.
///
/// Also flags a transaction lock (`pg_try_advisory_xact_lock`) whose transaction the function
/// ends (`tx.commit()`, `tx.rollback()`) right after it, before anything else is awaited: a
/// try-lock helper that commits and returns the answer hands its caller a lock already given
/// back.
///
/// A guard of the program's own type counts too: one whose `Drop` gives the lock back
/// (`impl Drop for DistributedLock { fn drop(&mut self) { tokio::spawn(release(..)) } }`),
/// handed out by the program's acquire function and dropped by its caller the same way
/// (`DistributedLock::new(client, key, ttl).acquire().await?;`).
///
/// ## Known limits
/// A type of the program is a guard when its `Drop` runs a release the analysis recognises (a
/// pack's release call, a compare-and-delete script, a release helper); one whose `Drop`
/// releases some other way is not followed.
pub struct DroppedGuard;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    if let Some(end) = &c.site.txn_ended {
        return Some(Violation {
            span: c.site.span,
            message: format!(
                "{} lasts as long as its transaction, and `{end}` ends that right after it: the lock is released at once and the work that follows runs unlocked",
                lock_name(c)
            ),
            help: "take the transaction lock inside the transaction that does the work, and commit after the work".into(),
            ..Default::default()
        });
    }
    if !c.site.guard_dropped {
        return None;
    }
    Some(Violation {
        span: c.site.span,
        message: format!(
            "{} returns a guard that gives the lock back when dropped, and this statement drops it: the lock is released at once and the code after it runs unlocked",
            lock_name(c)
        ),
        help: "bind the guard (`let guard = …`) for as long as the work runs, then release it explicitly".into(),
        ..Default::default()
    })
}
