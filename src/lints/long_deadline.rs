use super::{Violation, fmt_ms, lock_name};
use crate::classify::Classified;
use crate::config::RuleOptions;
use crate::sites::Ttl;

/// ## What it does
/// Flags an acquisition whose TTL resolves (from literals, `Duration::from_*`, constants of the crate
/// and the pack's unit) to more than `max-ttl` (60 s unless configured in
/// `[rules.long-deadline]`).
///
/// ## Why it matters
/// A long TTL is usually a workaround for work that takes long. It does not make the lock safer: a
/// holder can still stall past any TTL (a GC pause, a suspended VM, a slow disk). What it does do is
/// keep the resource blocked that long after a holder dies. The importer in the incident behind
/// lockaudit had its TTL raised from 60 s to 5 minutes, and still imported rows twice.
///
/// ## Example
/// ```rust
/// let lock = manager.lock(b"import", Duration::from_secs(600)).await?;
/// ```
///
/// ## Use instead
/// A short TTL, renewed while the work runs by something that notices when renewal fails:
/// ```rust
/// let lease = backend.acquire("import", Duration::from_secs(15), wait).await?;
/// let keeper = Keeper::start(backend.clone(), lease);
/// keeper.run(import(file)).await?;
/// ```
///
/// A wrapper that takes its TTL as a parameter (`fn lock(&self, key: &str, ttl: Duration)`) is
/// judged at each call, by the argument passed there.
///
/// ## Known limits
/// TTLs computed at run time (from configuration, arithmetic on unknown values) are not judged.
pub struct LongDeadline;

pub fn check(c: &Classified, opts: &RuleOptions) -> Option<Violation> {
    // A wrapper's call site that inherits the TTL: the finding belongs to the primitive inside
    // it. One that passes the TTL (`lock(&key, ONE_DAY)`) is judged here.
    let Ttl::Known {
        ms,
        inherited: false,
        ..
    } = c.site.ttl
    else {
        return None;
    };
    if ms <= opts.max_ttl_ms as f64 {
        return None;
    }
    Some(Violation {
        span: c.site.span,
        message: format!(
            "{} holds the lock for {}, over the {} limit",
            lock_name(c),
            fmt_ms(ms),
            fmt_ms(opts.max_ttl_ms as f64)
        ),
        help: "a long TTL keeps the resource blocked after a holder dies and still cannot outlast every pause; use a short TTL renewed by a keeper".into(),
        ..Default::default()
    })
}
