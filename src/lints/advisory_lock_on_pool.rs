use super::Violation;
use crate::classify::Classified;
use crate::config::RuleOptions;
use crate::sites::Fencing;

/// ## What it does
/// Flags a PostgreSQL advisory lock taken by a statement that runs on a connection pool
/// (`sqlx::query("SELECT pg_advisory_lock($1)").execute(&pool)`) instead of on one connection or
/// transaction the code keeps. The pool types are the pack's `pools` (sqlx's `PgPool` and `Pool`).
///
/// Also flags a session lock (PostgreSQL's `pg_advisory_lock`, MySQL's `GET_LOCK`) taken on a
/// connection the pool lent (`let mut conn = pool.acquire().await?`, deadpool's or bb8's
/// `pool.get()`, a transaction from `pool.begin()`: the pack's `checkouts`) that nothing unlocks
/// in the function, when the function neither hands the connection on (returns it, moves it into
/// a value or a call) nor closes it (`detach`): at the end of the function the connection goes
/// back to the pool holding the lock. This is judged at the statement even inside a wrapper: no
/// caller can see the connection. A helper that takes the lock on a connection its caller passes
/// (`acquire_lock(&mut conn, key) -> Result<bool>`) is judged at the call, on the caller's
/// connection.
///
/// And flags a call of the program's own lock function that hands back such a connection inside
/// its handle (`Ok(Guard { conn, key })` after `pool.acquire()` and `pg_try_advisory_lock`),
/// when the caller drops the handle without releasing it and the handle's type has no `Drop`
/// that unlocks: dropping gives the connection back to the pool with the lock on it.
///
/// ## Why it matters
/// An advisory lock belongs to the session or the transaction that took it, and a pool runs each
/// statement on whichever connection is free.
///
/// A session lock (`pg_advisory_lock`, `pg_try_advisory_lock`) stays with a connection that goes
/// back to the pool. The work that follows may run on other connections, the unlock too: it
/// returns `false` and unlocks nothing. The lock then stays held until that pooled connection is
/// closed, which a pool may not do for hours, and every other acquirer waits or fails.
///
/// A transaction lock (`pg_advisory_xact_lock`) taken outside a transaction ends with the
/// statement's own implicit transaction: it is released before the next line runs and protects
/// nothing.
///
/// ## Example
/// ```rust
/// sqlx::query("SELECT pg_advisory_lock($1)").bind(key).execute(&pool).await?;
/// run_migrations(&pool).await?;
/// sqlx::query("SELECT pg_advisory_unlock($1)").bind(key).execute(&pool).await?;
/// ```
///
/// ## Use instead
/// Hold one connection for the lock's whole life:
/// ```rust
/// let mut conn = pool.acquire().await?;
/// sqlx::query("SELECT pg_advisory_lock($1)").bind(key).execute(&mut *conn).await?;
/// run_migrations(&mut conn).await?;
/// sqlx::query("SELECT pg_advisory_unlock($1)").bind(key).execute(&mut *conn).await?;
/// ```
/// or take a transaction lock inside the transaction that does the work:
/// ```rust
/// let mut tx = pool.begin().await?;
/// sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(key).execute(&mut *tx).await?;
/// ```
///
/// ## Known limits
/// The executor's type must be known (a parameter, a field, a local with a written type or a known
/// constructor). A pool behind a wrapper type of the code's own is not recognised; declare such
/// types in a pack's `pools` (and their lending calls in `checkouts`). A lent connection counts as
/// handed on when it is moved anywhere, whatever the callee does with it; an unlock anywhere in
/// the function counts as the release, as for `unreleased-lock`.
pub struct AdvisoryLockOnPool;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    let site = &c.site;
    if !site.sql || !site.kind.is_acquisition() {
        return None;
    }
    let Some(pool) = site.pool.as_deref() else {
        return on_lent_connection(c);
    };
    // A helper's call given the pool (`try_lock(&pool, key)`): the statement inside, where the
    // pool runs it, is the one reported.
    if site.via.is_some() {
        return None;
    }
    let short = pool.rsplit("::").next().unwrap_or(pool);
    let (message, help) = if site.fencing == Fencing::Transaction {
        (
            format!(
                "`{}` runs on the pool `{short}`, outside any transaction: the lock ends with the statement and protects nothing",
                site.api
            ),
            "take it inside the transaction that does the work: `let mut tx = pool.begin().await?;` and run it on `&mut *tx`".to_string(),
        )
    } else {
        (
            format!(
                "`{}` runs on the pool `{short}`: the session lock stays with whichever connection ran it, so the work and the unlock may run on other connections and the lock stays held",
                site.api
            ),
            "hold one connection for the lock's whole life: `let mut conn = pool.acquire().await?;` and run the lock, the work and the unlock on it".to_string(),
        )
    };
    Some(Violation {
        span: site.span,
        message,
        help,
        ..Default::default()
    })
}

/// A session lock taken on a connection lent by a pool, still held when the function lets the
/// connection go back: judged at the statement, wrapped or not (no caller sees the connection).
fn on_lent_connection(c: &Classified) -> Option<Violation> {
    let site = &c.site;
    let conn = site.checkout.as_deref()?;
    if site.fencing == Fencing::Transaction || site.region.release.is_some() {
        return None;
    }
    let function = site.function.as_ref().map_or("the function", |f| {
        f.path.rsplit("::").next().unwrap_or(&f.path)
    });
    // A wrapper's handle carrying the lent connection (`Guard { conn, key }`): dropped without
    // its release, the connection goes back with the lock.
    if site.via.is_some() && site.lent_handle {
        let what = if conn == "_" {
            "the value it hands back is dropped at once".to_string()
        } else {
            format!("`{conn}` is dropped at the end of `{function}`")
        };
        return Some(Violation {
            span: site.span,
            message: format!(
                "`{}` hands back a session lock on a connection lent by a pool, and nothing releases it before {what}: dropping does not unlock, so the connection goes back to the pool still holding the lock, held for whoever uses it next",
                site.api
            ),
            help: "call the handle's release on every path before it is dropped, or give the handle a `Drop` that unlocks (or closes its connection)".into(),
            ..Default::default()
        });
    }
    Some(Violation {
        span: site.span,
        message: format!(
            "`{}` runs on `{conn}`, a connection lent by a pool, and nothing unlocks it before `{conn}` goes back to the pool at the end of `{function}`: the session lock stays with that pooled connection, held for whoever uses it next",
            site.api
        ),
        help: if site.library == "postgres" {
            format!(
                "unlock on `{conn}` before it is dropped, on every path, or take a transaction lock (`pg_advisory_xact_lock`) inside the transaction that does the work"
            )
        } else {
            format!("unlock on `{conn}` before it is dropped, on every path")
        },
        ..Default::default()
    })
}
