use super::unchecked_renewal::lock_key;
use super::{FileView, Violation};
use crate::config::RuleOptions;
use crate::packs::CallKind;
use crate::region::Event;
use crate::report::{Edit, Fix};

/// ## What it does
/// Flags a release that deletes the lock's key without checking the owner: `DEL`, `del` or
/// `UNLINK` on a lock's key outside an owner-comparing script, or a Lua script
/// (`redis::Script::new(..).key(k).invoke(..)`) that deletes its key without first comparing the
/// key's value with an argument. A compare-and-delete Lua script, or `DELEX`/`del_ex` with `IFEQ`,
/// is fine; `pg_advisory_unlock*` and etcd's `unlock` (whose key
/// embeds the holder's lease) are releases that prove ownership.
/// A compare-and-delete given the value the code just read from the key (`let cur =
/// con.get(&key)?; … .arg(&cur)`) compares that value with itself: it is reported too. A
/// Kubernetes Lease deleted without a precondition, or patched with its holder cleared and no
/// `resourceVersion`, is one too, unless the function compared the holder first (`if
/// !self.are_we_leading(&lease)? { return … }`); so is a lease row whose holder and expiry are
/// cleared without testing the holder, in the statement or before it (`if job.locked_by.as_deref()
/// != Some(worker) { return Err(..) }`). An upsert that writes a row afresh and resets its claim
/// (`ON CONFLICT … DO UPDATE SET job_id = EXCLUDED.job_id, locked_by = NULL`) releases nothing.
///
/// ## Why it matters
/// If the holder paused past its TTL, the key now belongs to someone else, and a plain `DEL`
/// releases *their* lock. A third process then acquires, and two processes run the protected work
/// with both believing they hold the lock.
///
/// ## Example
/// ```rust
/// let _: () = con.del("lock:import").await?;
/// ```
///
/// ## Use instead
/// ```rust
/// const RELEASE: &str = r#"if redis.call('get', KEYS[1]) == ARGV[1] then
///     return redis.call('del', KEYS[1]) else return 0 end"#;
/// let released: i32 = redis::Script::new(RELEASE).key("lock:import").arg(&token).invoke_async(&mut con).await?;
/// ```
/// or `fenced-lock`'s `release`, which never deletes someone else's lock.
///
/// `lockaudit check --fix` makes this change itself for a `DEL`/`del`/`UNLINK` of a key that
/// this function locked with `SET key token NX …`, when the token (`&token`, or a `&str`
/// parameter) is still the same binding at the release and the connection is a `&mut`
/// parameter of a Redis connection type or the raw command's `query` argument.
///
/// A release helper that deletes the key its caller passes (`fn unlock(con, key) { con.del(key) }`)
/// is judged at each call, where the key is known to be a lock's (`unlock(con, "import")` after
/// `try_lock(con, "import", token)`); one that deletes its receiver's own key (`self.key`), or
/// that is named for what it does to a lock (`fn release_lock(con, key)`), is judged at its
/// `DEL`, once, and not again at each call. So is the `Drop` (or any method) of a guard type that
/// an acquiring function hands out (`fn lock_tile(..) -> Option<TileGuard>`), deleting the
/// guard's own key (`self.key`, or `let key = self.key.clone()` moved into a spawned task).
///
/// ## Known limits
/// A key counts as a lock's key when a lock in the same file uses it, or when its text (or the
/// initialiser of the local it is) mentions `lock`, unless the file's locks all live under
/// other namespaces (`login_lock:{email}` deleted beside `SET register_lock:{email} NX`). A
/// delete inside an `if` that compares a `GET` of the key with a value (`if cache.get(key)? ==
/// Some(token) { cache.del(key) }`) counts as checked, although the two commands are not
/// atomic: the lock can expire and pass to another holder between them.
pub struct UncheckedRelease;

pub fn check(view: &FileView<'_>, _: &RuleOptions) -> Vec<Violation> {
    view.events
        .iter()
        .filter(|e| {
            e.kind == CallKind::Release && !e.owner_checked && (e.lock_object || lock_key(view, e))
        })
        .map(|e| {
            // A lock kept as an object (a Kubernetes Lease, a lease row) is given back by a
            // write or delete of that object, and made safe by a condition on it, not by Lua.
            let (message, help) = if e.lock_object {
                (
                    format!("`{}` gives the lock back without checking that this process still holds it", e.api),
                    "make the release conditional on this holder: a precondition with the `resourceVersion` read while the holder was this process (Kubernetes), or `WHERE holder = $1` (a lease row)",
                )
            } else {
                (
                    format!("`{}` deletes the lock's key without checking that this process still holds it", e.api),
                    "release with compare-and-delete (a Lua script comparing the owner token) so a stale holder cannot delete someone else's lock",
                )
            };
            Violation {
                span: e.span,
                message,
                help: help.into(),
                fn_line: Some(e.fn_line),
                context: e.function.clone(),
                fix: fix(e),
            }
        })
        .collect()
}

/// Compare-and-delete: deletes the key only while it still holds this process's token.
pub(crate) const RELEASE_SCRIPT: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// `DEL key` (a method or a raw command) on a connection the code names, with the token the
/// lock was taken with still in scope: the same call as a compare-and-delete script. Its reply
/// is an integer like `DEL`'s (1 deleted, 0 not), so the code around it stays as it is.
fn fix(e: &Event) -> Option<Fix> {
    let c = e.command.as_ref()?;
    let owner = e.owner.as_ref()?;
    let conn = c.conn.as_ref()?;
    let krate = c.krate.as_ref()?;
    if !matches!(c.name.as_str(), "DEL" | "UNLINK") || c.args.len() != 1 {
        return None;
    }
    let invoke = if c.is_async { "invoke_async" } else { "invoke" };
    let text = format!(
        "{krate}Script::new(r#\"{RELEASE_SCRIPT}\"#).key({}).arg({owner}).{invoke}({conn})",
        c.args[0].text
    );
    Some(Fix {
        message: format!("release with compare-and-delete on `{owner}`"),
        edits: vec![Edit::replace(c.span, text)],
    })
}
