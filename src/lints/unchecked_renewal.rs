use super::{FileView, Violation};
use crate::config::RuleOptions;
use crate::packs::CallKind;
use crate::region::Event;
use crate::report::{Edit, Fix};
use crate::sites::{Failure, Ttl};

/// ## What it does
/// Flags a renewal that does not prove the caller still owns the lock: `EXPIRE`, `PEXPIRE`,
/// `expire`, `pexpire` or `SET … XX` on a lock's key outside an owner-comparing script, or a Lua
/// script that re-expires its key without first comparing the key's value with an argument, or
/// a write stamping a Kubernetes Lease's `renewTime` with neither the `resourceVersion` read
/// while this process held it nor a test of the holder before it. An
/// `expire` that directly follows a `SETNX` acquisition, before any other work, is part of that
/// (non-atomic) acquisition and reported as `missing-deadline` there instead.
///
/// Also flags a renewal whose failure does not stop the work (`let _ = mgr.extend(..)`, `.ok()`,
/// a result never inspected, or in a keep-alive loop a failure branch that only logs and goes on
/// to the next round), and etcd keep-alives whose response stream is dropped, or polled round
/// after round without reading any response's TTL (`Ok(Some(_)) => …`): an expired lease
/// answers keep-alives with TTL 0, not an error. A stream polled that way is reported where the
/// keeper sends the renewal (`keeper.keep_alive().await`), or where the pair was opened when
/// the function sends none. A lease the function grants and keeps alive without taking a lock
/// with it (its keys only expire with the process: `put(key, status, with_lease(id))`) renews no
/// lock, and is not judged.
///
/// ## Why it matters
/// A blind renewal extends whoever holds the key now. After a pause past the TTL, the old holder's
/// `EXPIRE` renews the new holder's lock, and the old holder carries on as if it were still the
/// owner. This is the second half of lockaudit's origin story: the importer resumed from a 70 s
/// pause, renewed blindly, and kept importing next to the instance that had taken over.
///
/// ## Example
/// ```rust
/// let _: bool = con.expire("lock:import", 60).await?;
/// let _ = manager.extend(&lock, ttl).await;
/// ```
///
/// ## Use instead
/// A renewal that compares the owner and stops the work when it fails:
/// ```rust
/// backend.renew(&mut lease).await?; // Err(LockLost) when the lease is no longer ours
/// ```
/// or a keeper that does that in the background and cancels the work on loss. For a bare
/// Redis lock, a script that compares the token before it re-expires the key:
/// ```rust
/// let renewed: i32 = redis::Script::new(r#"if redis.call('get', KEYS[1]) == ARGV[1] then
///     return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"#)
///     .key("lock:import").arg(&token).arg(30_000).invoke_async(&mut con).await?;
/// ```
/// `lockaudit check --fix` makes this change itself for an `EXPIRE`/`PEXPIRE` (method or raw
/// command) of a key this function locked with `SET key token NX …`, when the token is still the
/// same binding there and the connection is one the code names (see `unchecked-release`). The
/// renewal's failure must still stop the work: the script replies 0 when the lock was lost.
///
/// A renewal helper that re-expires the key its caller passes (`fn renew(&self, key: &str) {
/// conn.expire(key, ttl) }`) is judged at each call, where the key is known to be a lock's; one
/// named for what it does to a lock (`fn renew_lock(con, key, ms)`), or whose key already says
/// so (`fn renew(&self, lock_key: &str)`), is judged inside, once, and not again at each call.
///
/// ## Known limits
/// A key counts as a lock's key when a lock in the same file uses it (the same expression, or a
/// local named as the field a lock of the same type is keyed by: `SET self.task_key NX` in one
/// method, `PEXPIRE task_key` in another), when its text (or the
/// initialiser of the local it is) mentions `lock`, or when it is the caller's key in a function
/// named for a lock (`renew_lock`, `unlock`); but not a key named for a lock whose namespace
/// none of the file's locks uses (`login_lock:{email}`, an account lock-out marker, beside `SET
/// register_lock:{email} NX`), nor a counter's `EXPIRE` after its `INCR` (a rate-limit window).
/// A failure branch that only logs is not held against a round that goes on to test what it
/// renewed and leaves when that is no longer held (`if !lease.is_held_for(margin) { cancel();
/// return }`), whatever that test is worth.
pub struct UncheckedRenewal;

/// Is the event's key a lock's key? A literal key used by a lock anywhere in the file, a key
/// expression written the same as a lock's in the same function, or a key whose text (or its
/// local's initialiser) says `lock`.
pub(crate) fn lock_key(view: &FileView<'_>, e: &Event) -> bool {
    lock_key_among(view.sites.iter().map(|c| &c.site), e)
}

/// [`lock_key`] over a file's sites before they are classified.
pub(crate) fn lock_key_among<'s>(
    sites: impl Iterator<Item = &'s crate::sites::Site>,
    e: &Event,
) -> bool {
    let Some(key) = &e.key else { return false };
    let sites: Vec<&crate::sites::Site> = sites.collect();
    if sites.iter().any(|s| same_key(s, e)) {
        return true;
    }
    // A key whose name says lock, built from a template that none of the file's locks use
    // (`login_lock:{email}`, an account lock-out marker, beside `SET register_lock:{email} NX`):
    // the file's locks are known, and this is not one of them.
    let elsewhere = template_prefix(key).is_some_and(|own| {
        let known: Vec<&str> = sites
            .iter()
            .filter(|s| !s.key_is_prefix)
            .filter_map(|s| s.key.as_deref().and_then(template_prefix))
            .collect();
        !known.is_empty() && known.iter().all(|k| *k != own)
    });
    e.key_says_lock && !elsewhere
}

/// The namespace of an evaluated key (`register_lock:` of `register_lock:?`, `lock:` of
/// `lock:two`): its text up to the first separator, when the key was evaluated (no expression
/// syntax) and that text is fixed.
fn template_prefix(key: &str) -> Option<&str> {
    if key.contains(['&', '(', ' ', '.', '{']) || key.starts_with("self") {
        return None;
    }
    let end = key.find([':', '/'])?;
    let prefix = &key[..=end];
    (!prefix.contains('?')).then_some(prefix)
}

/// The event acts on the site's key: the same literal, or the same expression in the same
/// function, or the same field of `self` in a method of the same type (`self.writer_key` set NX
/// in `try_acquire`, deleted in `try_release`).
fn same_key(site: &crate::sites::Site, e: &Event) -> bool {
    let Some(key) = &e.key else { return false };
    if site.key_is_prefix {
        return false;
    }
    let parent = |p: &str| p.rsplit_once("::").map(|(t, _)| t.to_string());
    let same_type = || {
        site.function
            .as_ref()
            .is_some_and(|f| parent(&f.path) == parent(&e.function))
    };
    site.key.as_ref() == Some(key)
        || site.key_expr.as_ref() == Some(key)
            && (site.function.as_ref().is_some_and(|f| f.path == e.function)
                || self_field(key) && same_type())
        // `SET self.task_info_key NX` in one method, `PEXPIRE task_info_key` in another of the
        // same type, the local built as the field was: the field's name for the same key.
        || site
            .key_expr
            .as_deref()
            .and_then(field_name)
            .is_some_and(|field| !self_field(key) && e.mentions.contains(&field))
            && same_type()
}

/// The field a `self.field` key names (`&self.task_info_key`, `self.task_info_key.clone()`).
fn field_name(key: &str) -> Option<String> {
    let k = bare(key).strip_prefix("self.")?.to_string();
    k.chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then_some(k)
}

/// A key expression as written, without spaces and the borrows and copies around it.
fn bare(key: &str) -> String {
    let k = key.replace(' ', "");
    let mut k = k.trim_start_matches('&');
    for suffix in [".clone()", ".as_str()", ".to_string()", ".as_ref()"] {
        k = k.strip_suffix(suffix).unwrap_or(k);
    }
    k.to_string()
}

/// `self.writer_key`, `&self.keys.lock`: a field of `self`, the same value in every method. A
/// call (`self.namespaced(key)`) depends on its arguments, which differ between methods.
fn self_field(key: &str) -> bool {
    let k = key.replace(' ', "");
    k.trim_start_matches('&')
        .strip_prefix("self.")
        .is_some_and(|rest| {
            rest.split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
        })
}

/// The EXPIRE right after a SETNX, before other work, belongs to the acquisition: also when
/// either is a helper's call (`conn.set_nx(key, value, None)?` then `conn.expire(key, ttl)`),
/// whose TTL is the helper's argument rather than a missing one. "Right after": in the same
/// function, before the region's first long work (the reply's check, error mapping and
/// logging may stand between them).
fn completes_setnx(view: &FileView<'_>, e: &Event) -> bool {
    let at = (e.span.line, e.span.column);
    view.sites.iter().any(|c| {
        (matches!(&c.site.ttl, Ttl::Missing { .. })
            || c.site.via.is_some() && !matches!(&c.site.ttl, Ttl::Known { .. }))
            && same_key(&c.site, e)
            && c.site.region.start <= at
            && (e.span.line <= c.site.region.start.0 + 4
                || c.site
                    .function
                    .as_ref()
                    .is_some_and(|f| f.path == e.function)
                    && c.site
                        .region
                        .long_work
                        .as_ref()
                        .is_none_or(|(w, _)| at < (w.line, w.column)))
    })
}

const UNCHECKED_HELP: &str = "renew with an owner check (compare the stored token in one script, or fenced-lock's renew) and stop the work when renewal fails";
const OBJECT_HELP: &str = "renew under a precondition that fails once another process holds the lock (the `resourceVersion` read while this process was the holder), and stop the work when it fails";
const UNHEEDED_HELP: &str = "when renewal fails or finds another holder, tell the work holding the lock (a cancellation token, a watch channel, fenced-lock's keeper) and stop it";

pub fn check(view: &FileView<'_>, _: &RuleOptions) -> Vec<Violation> {
    let mut out = Vec::new();
    for e in view
        .events
        .iter()
        .filter(|e| matches!(e.kind, CallKind::Renew | CallKind::KeepAlive))
    {
        // Raw commands act on any key; they concern us only on a lock's key. A lock object
        // (a Kubernetes Lease) is a lock whatever its name.
        let locks = e.lock_object || lock_key(view, e);
        if completes_setnx(view, e) || !e.owner_checked && !locks {
            continue;
        }
        let mut fix = None;
        // An owner-checked renewal whose failure goes unheeded needs only the failure told to
        // the work; an unchecked one needs the check first.
        let (message, help) = if !e.owner_checked && e.lock_object {
            (
                format!("`{}` renews the lock without checking who holds it", e.api),
                OBJECT_HELP,
            )
        } else if !e.owner_checked && locks {
            fix = owner_checked(e);
            (
                format!("`{}` renews the lock without checking who holds it", e.api),
                UNCHECKED_HELP,
            )
        } else if let Failure::Ignored { reason } = &e.failure {
            (
                format!("`{}` renews the lock, but {reason}", e.api),
                UNHEEDED_HELP,
            )
        } else {
            continue;
        };
        out.push(Violation {
            span: e.span,
            message,
            help: help.into(),
            fn_line: Some(e.fn_line),
            context: e.function.clone(),
            fix,
        });
    }
    out
}

/// `EXPIRE key s` / `PEXPIRE key ms` on a connection the code names, with the token the lock was
/// taken with still in scope: the same call as a script that re-expires the key only while it
/// holds that token. Its reply is an integer like the command's (1 renewed, 0 not).
fn owner_checked(e: &Event) -> Option<Fix> {
    let c = e.command.as_ref()?;
    let owner = e.owner.as_ref()?;
    let conn = c.conn.as_ref()?;
    let krate = c.krate.as_ref()?;
    let cmd = match c.name.as_str() {
        "EXPIRE" => "expire",
        "PEXPIRE" => "pexpire",
        _ => return None,
    };
    let [key, ttl] = c.args.as_slice() else {
        return None;
    };
    let invoke = if c.is_async { "invoke_async" } else { "invoke" };
    let text = format!(
        "{krate}Script::new(r#\"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('{cmd}', KEYS[1], ARGV[2]) else return 0 end\"#).key({}).arg({owner}).arg({}).{invoke}({conn})",
        key.text, ttl.text
    );
    Some(Fix {
        message: format!("renew only while the key holds `{owner}`"),
        edits: vec![Edit::replace(c.span, text)],
    })
}
