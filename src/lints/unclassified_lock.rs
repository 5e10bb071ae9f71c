use super::{Violation, lock_name};
use crate::classify::{Classified, Purpose};
use crate::config::RuleOptions;

/// ## What it does
/// Flags a lock acquisition whose purpose nobody declared: neither an annotation in the code nor a
/// `[[classify]]` entry in `lockaudit.toml` says whether it is an efficiency or a correctness lock.
///
/// ## Why it matters
/// The two need different things. An efficiency lock only saves duplicate work, and a lock with a
/// deadline is enough. A correctness lock protects state that double execution would corrupt, and a
/// deadline alone cannot protect it: a holder paused past its TTL resumes and writes after someone
/// else acquired. Until the purpose is written down, nobody can tell which guarantees are needed,
/// and lockaudit cannot check them.
///
/// ## Example
/// ```rust
/// let lock = manager.lock(b"import:42", Duration::from_secs(30)).await?;
/// ```
///
/// ## Use instead
/// ```rust
/// // lockaudit: efficiency
/// let lock = manager.lock(b"report:daily", Duration::from_secs(30)).await?;
///
/// // lockaudit: correctness fenced-by = "rows are keyed by (file, line) with a unique index"
/// let lock = manager.lock(b"import:42", Duration::from_secs(30)).await?;
/// ```
/// or classify whole modules in `lockaudit.toml` (`[[classify]] path = "src/billing/**"`), or run
/// `lockaudit annotate`.
///
/// ## Known limits
/// Only acquisitions the rule packs describe are seen; a lock taken through a library without a pack
/// is invisible until a pack or `[[lock]]` entry describes it.
pub struct UnclassifiedLock;

pub fn check(c: &Classified, _: &RuleOptions) -> Option<Violation> {
    (c.purpose == Purpose::Unclassified && !c.site.wrapped).then(|| Violation {
        span: c.site.span,
        message: format!("{} is not classified as an efficiency or a correctness lock", lock_name(c)),
        help: "add `// lockaudit: efficiency` or `// lockaudit: correctness` above the statement, or a [[classify]] entry in lockaudit.toml".into(),
        ..Default::default()
    })
}
