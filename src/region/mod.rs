//! The lock region: where a lock is (believed) held, from its acquisition to its release (an
//! explicit release call, `drop(guard)`, a move into a call or struct), or to the end of the block
//! that binds it. The walker records what happens in a function as plain facts (lock events,
//! exits, loops, sleeps, rebindings, moves); a region is computed from them, once, and every flow
//! rule reads it.
//!
//! Positions are compared textually (line, column): a statement is in the region when it lies
//! between the acquisition and the release. Closures and `async` blocks are not exits of the
//! function; a `break` leaves the region only when it leaves a loop around the acquisition.

use std::collections::HashSet;

use crate::packs::CallKind;
use crate::sites::Failure;
use crate::source::Span;

/// A (line, column) position.
pub type Pos = (usize, usize);

pub fn start_of(s: Span) -> Pos {
    (s.line, s.column)
}

pub fn end_of(s: Span) -> Pos {
    (s.end_line, s.end_column)
}

/// A pack call that is not an acquisition: renewal, release, token read, keeper, lease grant.
#[derive(Debug, Clone)]
pub struct Event {
    pub kind: CallKind,
    pub pack: usize,
    pub api: String,
    pub span: Span,
    /// Identifiers in the receiver and arguments: which values the call acts on.
    pub mentions: HashSet<String>,
    /// The key argument, evaluated or as written.
    pub key: Option<String>,
    /// For renewals: whether a failed renewal stops the work.
    pub failure: Failure,
    /// The name the call's result is bound to (`let t = lease.token();`).
    pub result_var: Option<String>,
    /// The call's result is passed straight into another call.
    pub passed_on: bool,
    /// Renews by itself while held (a keeper, rslock's `using`).
    pub auto_renew: bool,
    /// Raw commands and trait methods that act on a key without proving ownership.
    pub owner_checked: bool,
    /// Line of the enclosing function's `fn`, for suppressions above it.
    pub fn_line: usize,
    pub function: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerKind {
    /// A `loop`, `while` or `for`.
    Loop,
    /// `sleep(..)`.
    Sleep,
    /// A call configured as long-running.
    LongCall(String),
    /// `?`, `return`, `break`, `continue`.
    Exit(&'static str),
    /// `let name = …` (or any pattern binding `name`): the old value is no longer reachable by name.
    Rebind(String),
    /// `name` moved: passed by value, stored, returned.
    Escape(String),
    /// `drop(name)`.
    Drop(String),
    /// A call whose arguments mention these identifiers.
    CallArgs(Vec<String>),
    /// The function calls (or awaits) a closure or future its caller passed in.
    Callback,
}

#[derive(Debug, Clone)]
pub struct Marker {
    pub kind: MarkerKind,
    pub span: Span,
    /// Identifiers in the conditions of the `if`/`match`/`let … else` around it.
    pub guards: Vec<String>,
    pub in_closure: bool,
    /// The loop a `break`/`continue` leaves.
    pub target_loop: Option<Span>,
}

/// How the acquisition's value is held.
#[derive(Debug, Clone, Default)]
pub struct Holding {
    /// The names the lock (or the result that tells whether it was taken) is bound to, and names
    /// derived from them.
    pub names: HashSet<String>,
    /// For locks known by key (raw commands, SQL): the key.
    pub key: Option<String>,
    /// The value was handed on at the acquisition itself (returned, passed, stored).
    pub escapes_at_site: bool,
    pub scope_end: Pos,
    /// The end of the acquiring expression (`mgr.lock(k, t).await?`): the region starts after it.
    pub start: Pos,
    /// Loops around the acquisition.
    pub loops: Vec<Span>,
    pub auto_renew: bool,
    /// The acquisition returns a lock value (a handle or guard), not only a reply about a key.
    pub handle: bool,
    /// The lease the lock is attached to (etcd): keeping it alive keeps the lock.
    pub lease_names: HashSet<String>,
}

/// What happens while the lock is held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Region {
    pub start: Pos,
    pub end: Pos,
    pub release: Option<Span>,
    /// Moved, returned or stored: someone else releases it.
    pub escapes: bool,
    /// Exits of the function (or of a loop around the acquisition) before the release.
    pub leaks: Vec<Span>,
    pub renewed: bool,
    pub keeper: bool,
    pub token_passed: bool,
    pub fenced_writes: bool,
    /// The first loop, sleep or long call in the region, and what it is.
    pub long_work: Option<(Span, String)>,
    /// The lock is held by a value bound to a name (not only known by its key).
    pub by_name: bool,
}

impl Holding {
    fn acts_on(&self, e: &Event, sql_pack: bool) -> bool {
        if self.names.iter().any(|n| e.mentions.contains(n)) {
            return true;
        }
        // Revoking the lease the lock is attached to deletes the lock's key.
        if e.kind == CallKind::Release && self.lease_names.iter().any(|n| e.mentions.contains(n)) {
            return true;
        }
        match (&self.key, &e.key) {
            (Some(a), Some(b)) => a == b,
            // Session advisory locks are released by key in SQL we cannot match: any unlock counts.
            _ => sql_pack && e.kind == CallKind::Release,
        }
    }
}

/// Computes the region of one acquisition at `site` (its span) from the function's facts.
pub fn compute(
    site: Span,
    h: &Holding,
    events: &[Event],
    markers: &[Marker],
    site_pack: usize,
    sql: bool,
) -> Region {
    let start = h.start.max(end_of(site));
    let mut end = h.scope_end.max(start);
    let within = |p: Pos, end: Pos| p > start && p <= end;
    // A rebinding of every name the lock has ends what can still act on it.
    let rebound = markers
        .iter()
        .filter(|m| within(start_of(m.span), end))
        .filter_map(|m| match &m.kind {
            MarkerKind::Rebind(n) if h.names.contains(n) && h.names.len() == 1 => {
                Some(start_of(m.span))
            }
            _ => None,
        })
        .min();
    let reach = rebound.unwrap_or(end);
    let mut release: Option<Span> = None;
    let mut escapes = h.escapes_at_site;
    for e in events {
        let p = start_of(e.span);
        if e.kind == CallKind::Release
            && within(p, reach)
            && e.pack == site_pack
            && h.acts_on(e, sql)
            && release.is_none_or(|r| p < start_of(r))
        {
            release = Some(e.span);
        }
    }
    let mut moved: Option<Pos> = None;
    for m in markers {
        let p = start_of(m.span);
        if !within(p, reach) {
            continue;
        }
        match &m.kind {
            MarkerKind::Drop(n)
                if h.names.contains(n) && release.is_none_or(|r| p < start_of(r)) =>
            {
                release = Some(m.span)
            }
            // Handing the lock to its own release (`backend.release(lease)`) is not an escape.
            MarkerKind::Escape(n)
                if h.names.contains(n)
                    && !m.in_closure
                    && !events
                        .iter()
                        .any(|e| e.span == m.span && e.kind == CallKind::Release) =>
            {
                escapes = true;
                moved = Some(moved.map_or(p, |q| q.min(p)));
            }
            _ => {}
        }
    }
    // The region ends where the lock is released or handed on.
    if let Some(r) = release {
        end = start_of(r);
    }
    if let Some(p) = moved {
        end = end.min(p);
    }
    let guarded = |m: &Marker| m.guards.iter().any(|g| h.names.contains(g));
    let leaks = markers
        .iter()
        .filter(|m| within(start_of(m.span), end) && !m.in_closure && !guarded(m))
        .filter(|m| match (&m.kind, m.target_loop) {
            (MarkerKind::Exit("break" | "continue"), Some(l)) => h.loops.contains(&l),
            (MarkerKind::Exit(_), _) => true,
            _ => false,
        })
        .map(|m| m.span)
        .collect();
    let acting = |k: &'static [CallKind]| {
        events.iter().filter(move |e| {
            k.contains(&e.kind) && within(start_of(e.span), end.max(reach)) && h.acts_on(e, false)
        })
    };
    // A keep-alive of the lock's lease renews it wherever it is set up (often before the lock).
    let lease_kept = events.iter().any(|e| {
        e.kind == CallKind::KeepAlive && h.lease_names.iter().any(|n| e.mentions.contains(n))
    });
    let renewed = h.auto_renew
        || lease_kept
        || acting(&[CallKind::Renew, CallKind::KeepAlive])
            .next()
            .is_some();
    let keeper = acting(&[CallKind::Keeper]).next().is_some();
    let fenced_writes = acting(&[CallKind::FencedWrite]).next().is_some();
    let token_passed = acting(&[CallKind::Token]).any(|t| {
        t.passed_on
            || t.result_var.as_ref().is_some_and(|v| {
                markers.iter().any(|m| {
                    start_of(m.span) > start_of(t.span)
                        && matches!(&m.kind, MarkerKind::CallArgs(args) if args.contains(v))
                        && !events.iter().any(|e| {
                            matches!(e.kind, CallKind::Release | CallKind::Renew)
                                && e.span == m.span
                        })
                })
            })
    });
    let long_work = markers
        .iter()
        .filter(|m| within(start_of(m.span), end) && !m.in_closure)
        .find_map(|m| match &m.kind {
            MarkerKind::Loop => Some((m.span, "a loop".to_string())),
            MarkerKind::Sleep => Some((m.span, "a sleep".to_string())),
            MarkerKind::LongCall(name) => Some((m.span, format!("a call to `{name}`"))),
            _ => None,
        });
    let by_name = h.handle && !h.names.is_empty();
    Region {
        start,
        end,
        release,
        escapes,
        leaks,
        renewed,
        keeper,
        token_passed,
        fenced_writes,
        long_work,
        by_name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CrateIndex, Imports};
    use crate::packs::{self, PackSet};
    use crate::sites::{FileCx, analyze_file};
    use crate::source::SourceFile;

    /// The region of every acquisition in `body` (wrapped in an async fn with an rslock manager).
    fn regions(body: &str) -> Vec<Region> {
        let text = format!(
            "use rslock::LockManager; use std::time::Duration;\nasync fn f(mgr: &LockManager, pool: &sqlx::PgPool) -> Result<(), E> {{\n{body}\n}}\n"
        );
        let file: syn::File = syn::parse_str(&text).expect("test source parses");
        let src = SourceFile::new("t.rs".into(), "t.rs".into(), text.clone());
        let mut imports = Imports::new("crate".into());
        imports.add_items(&file.items);
        let packs = PackSet::new(packs::builtin().expect("builtin packs")).expect("pack set");
        let index = CrateIndex::default();
        let cx = FileCx {
            source: &src,
            imports: &imports,
            index: &index,
            packs: &packs,
            long_call: &|_| false,
        };
        analyze_file(&file, &cx)
            .sites
            .into_iter()
            .map(|s| s.region)
            .collect()
    }

    fn one(body: &str) -> Region {
        let mut r = regions(body);
        assert_eq!(r.len(), 1, "one acquisition in {body}");
        r.remove(0)
    }

    #[test]
    fn released_without_exits() {
        let r = one(
            "let l = mgr.lock(\"k\", Duration::from_secs(1)).await?; work(); mgr.unlock(&l).await; Ok(())",
        );
        assert!(r.release.is_some());
        assert!(r.leaks.is_empty());
        assert!(r.by_name);
    }

    #[test]
    fn early_return_and_question_mark_leak() {
        let r = one(
            "let l = mgr.lock(\"k\", D).await?; if x { return Ok(()); } step()?; mgr.unlock(&l).await; Ok(())",
        );
        assert_eq!(r.leaks.len(), 2, "{r:?}");
        // Exits after the release are outside the region.
        let r = one("let l = mgr.lock(\"k\", D).await?; mgr.unlock(&l).await; step()?; Ok(())");
        assert!(r.leaks.is_empty(), "{r:?}");
    }

    #[test]
    fn breaks_leave_only_their_own_loop() {
        let r = one(
            "loop { let l = mgr.lock(\"k\", D).await?; if x { break; } mgr.unlock(&l).await; } Ok(())",
        );
        assert_eq!(r.leaks.len(), 1, "{r:?}");
        let r = one(
            "let l = mgr.lock(\"k\", D).await?; for i in xs { if i { break; } } mgr.unlock(&l).await; Ok(())",
        );
        assert!(r.leaks.is_empty(), "{r:?}");
        assert!(r.long_work.is_some(), "the inner loop is long work");
    }

    #[test]
    fn match_arms_failure_paths_hold_nothing() {
        let r = one(
            "let l = match mgr.lock(\"k\", D).await { Ok(l) => l, Err(_) => return Ok(()) }; mgr.unlock(&l).await; Ok(())",
        );
        assert!(r.leaks.is_empty(), "{r:?}");
        assert!(r.release.is_some());
        // The lock is held in the success arm only.
        let r = one(
            "match mgr.lock(\"k\", D).await { Ok(l) => { work(); mgr.unlock(&l).await; } Err(_) => { sleep(S).await; } } Ok(())",
        );
        assert!(r.release.is_some());
        assert!(
            r.long_work.is_none(),
            "the sleep is on the failure path: {r:?}"
        );
    }

    #[test]
    fn closures_and_async_blocks_do_not_exit() {
        let r = one(
            "let l = mgr.lock(\"k\", D).await?; let f = |x: u8| -> Result<u8, E> { Err(x)? }; let g = async { step()? }; mgr.unlock(&l).await; Ok(())",
        );
        assert!(r.leaks.is_empty(), "{r:?}");
    }

    #[test]
    fn drop_ends_a_guard_region() {
        let r = one(
            "let lock = sqlx::postgres::PgAdvisoryLock::new(\"k\"); let g = lock.acquire(pool).await?; work(); drop(g); sleep(S).await; Ok(())",
        );
        assert!(r.release.is_some(), "{r:?}");
        assert!(r.long_work.is_none(), "the sleep is after drop(g)");
    }

    #[test]
    fn shadowing_loses_the_lock_but_rebinding_from_it_does_not() {
        let r = one("let l = mgr.lock(\"k\", D).await?; let l = 5; mgr.unlock(&l).await; Ok(())");
        assert!(
            r.release.is_none(),
            "the unlock names a different `l`: {r:?}"
        );
        let r = one(
            "let l = mgr.lock(\"k\", D).await?; let l = mgr.extend(&l, D).await?; mgr.unlock(&l).await; Ok(())",
        );
        assert!(r.release.is_some(), "{r:?}");
        assert!(r.renewed);
    }

    #[test]
    fn moved_into_a_struct_or_returned_escapes() {
        let r = one("let l = mgr.lock(\"k\", D).await?; let h = Holder { l }; keep(h); Ok(())");
        assert!(r.escapes, "{r:?}");
        let r = one("let l = mgr.lock(\"k\", D).await?; consume(l); Ok(())");
        assert!(r.escapes, "{r:?}");
        let r = one("let l = mgr.lock(\"k\", D).await?; inspect(&l); Ok(())");
        assert!(!r.escapes, "a borrow is not a move: {r:?}");
    }
}
