use super::Violation;
use crate::directives::{Directive, DirectiveKind};

/// ## What it does
/// Flags a `lockaudit:` comment that lockaudit cannot read: an unknown purpose
/// (`// lockaudit: corectness`), malformed syntax, an unknown rule in `allow(…)`, or a suppression
/// without a reason.
///
/// ## Why it matters
/// An annotation that silently does nothing is worse than none: the author believes the lock is
/// classified or the finding justified, and it is not. A broken directive classifies nothing and
/// suppresses nothing, so the site it was meant for is still reported.
///
/// ## Example
/// ```rust
/// // lockaudit: corectness
/// // lockaudit: allow(long-deadline)
/// ```
///
/// ## Use instead
/// ```rust
/// // lockaudit: correctness
/// // lockaudit: allow(long-deadline) reason = "nightly batch, resource is partitioned by day"
/// ```
///
/// ## Known limits
/// Only comments that start with `lockaudit:` are read; a directive inside a block comment's later
/// lines is not.
pub struct InvalidAnnotation;

pub fn check(d: &Directive) -> Option<Violation> {
    let DirectiveKind::Invalid { message, help } = &d.kind else {
        return None;
    };
    Some(Violation {
        span: d.span,
        message: format!("invalid lockaudit annotation: {message}"),
        help: help.clone().unwrap_or_else(|| {
            "write `lockaudit: correctness`, `lockaudit: efficiency` (optionally `fenced-by = \"…\"`) or `lockaudit: allow(rule) reason = \"…\"`".into()
        }),
        ..Default::default()
    })
}
