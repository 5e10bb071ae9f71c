/// ## What it does
/// Flags a `// lockaudit: allow(rule) reason = "…"` suppression that suppressed nothing: the
/// finding it was written for is gone, or it sits on the wrong line.
///
/// ## Why it matters
/// A stale suppression is a lie in waiting: it documents an exception that no longer exists, and
/// the next finding that happens to land on its line is silenced without anyone reading it.
///
/// ## Example
/// ```rust
/// // lockaudit: allow(long-deadline) reason = "nightly batch"
/// let lock = manager.lock(b"batch", Duration::from_secs(30)).await?; // 30 s is not long
/// ```
///
/// ## Use instead
/// Delete the suppression.
///
/// ## Known limits
/// A suppression of a rule that is turned off (`level = "off"`, `--ignore`) is not reported.
/// Suppressions that are malformed are `invalid-annotation` findings instead, never this one.
pub struct UnusedSuppression;
