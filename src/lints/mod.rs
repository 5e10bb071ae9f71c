//! The rules. One rule, one file: its doc comment (What it does / Why it matters / Example /
//! Use instead / Known limits) and its check. This table registers them; rule ids are a stable
//! contract.

pub mod advisory_lock_on_pool;
pub mod dropped_guard;
pub mod ignored_lock_failure;
pub mod invalid_annotation;
pub mod long_deadline;
pub mod missing_deadline;
pub mod non_consensus_correctness_lock;
pub mod unchecked_release;
pub mod unchecked_renewal;
pub mod unclassified_lock;
pub mod unfenced_correctness_lock;
pub mod unreleased_lock;
pub mod unrenewed_long_operation;
pub mod unused_suppression;
pub mod wall_clock_deadline;

use serde::Serialize;

use crate::classify::Classified;
use crate::config::RuleOptions;
use crate::directives::Directive;
use crate::source::Span;

/// How loud a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Off,
    Note,
    Warning,
    Error,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "error" => Level::Error,
            "warning" => Level::Warning,
            "note" => Level::Note,
            "off" => Level::Off,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Note => "note",
            Level::Off => "off",
        }
    }
}

/// What a rule reports, before severity and location are attached.
#[derive(Debug, Clone, Default)]
pub struct Violation {
    pub span: Span,
    pub message: String,
    pub help: String,
    /// Line of the enclosing function's `fn`, for suppressions above it.
    pub fn_line: Option<usize>,
    /// The enclosing function's path, for fingerprints.
    pub context: String,
    /// A mechanical fix (see `report::Fix`).
    pub fix: Option<crate::report::Fix>,
}

/// What file-level rules see: the file's classified sites, its other lock calls, and its
/// wall-clock reads.
pub struct FileView<'a> {
    pub sites: &'a [Classified],
    pub events: &'a [crate::region::Event],
    pub clocks: &'a [crate::sites::Clock],
}

/// How a rule looks at the code.
pub enum Check {
    /// Once per lock site.
    Site(fn(&Classified, &RuleOptions) -> Option<Violation>),
    /// Once per `lockaudit:` directive.
    Directive(fn(&Directive) -> Option<Violation>),
    /// Once per file, over its lock calls and wall-clock reads.
    File(fn(&FileView<'_>, &RuleOptions) -> Vec<Violation>),
    /// Computed by the engine after suppressions are applied.
    Engine,
}

pub struct RuleMeta {
    pub id: &'static str,
    pub default_level: Level,
    pub check: Check,
}

/// Every rule, in id order.
pub static RULES: &[RuleMeta] = &[
    RuleMeta {
        id: "advisory-lock-on-pool",
        default_level: Level::Error,
        check: Check::Site(advisory_lock_on_pool::check),
    },
    RuleMeta {
        id: "dropped-guard",
        default_level: Level::Error,
        check: Check::Site(dropped_guard::check),
    },
    RuleMeta {
        id: "ignored-lock-failure",
        default_level: Level::Error,
        check: Check::Site(ignored_lock_failure::check),
    },
    RuleMeta {
        id: "invalid-annotation",
        default_level: Level::Error,
        check: Check::Directive(invalid_annotation::check),
    },
    RuleMeta {
        id: "long-deadline",
        default_level: Level::Warning,
        check: Check::Site(long_deadline::check),
    },
    RuleMeta {
        id: "missing-deadline",
        default_level: Level::Error,
        check: Check::Site(missing_deadline::check),
    },
    RuleMeta {
        id: "non-consensus-correctness-lock",
        default_level: Level::Warning,
        check: Check::Site(non_consensus_correctness_lock::check),
    },
    RuleMeta {
        id: "unchecked-release",
        default_level: Level::Error,
        check: Check::File(unchecked_release::check),
    },
    RuleMeta {
        id: "unchecked-renewal",
        default_level: Level::Error,
        check: Check::File(unchecked_renewal::check),
    },
    RuleMeta {
        id: "unclassified-lock",
        default_level: Level::Warning,
        check: Check::Site(unclassified_lock::check),
    },
    RuleMeta {
        id: "unfenced-correctness-lock",
        default_level: Level::Error,
        check: Check::Site(unfenced_correctness_lock::check),
    },
    RuleMeta {
        id: "unreleased-lock",
        default_level: Level::Warning,
        check: Check::Site(unreleased_lock::check),
    },
    RuleMeta {
        id: "unrenewed-long-operation",
        default_level: Level::Warning,
        check: Check::Site(unrenewed_long_operation::check),
    },
    RuleMeta {
        id: "unused-suppression",
        default_level: Level::Warning,
        check: Check::Engine,
    },
    RuleMeta {
        id: "wall-clock-deadline",
        default_level: Level::Warning,
        check: Check::File(wall_clock_deadline::check),
    },
];

/// Rule ids, for suggestions.
pub const ALL_IDS: &[&str] = &[
    "advisory-lock-on-pool",
    "dropped-guard",
    "ignored-lock-failure",
    "invalid-annotation",
    "long-deadline",
    "missing-deadline",
    "non-consensus-correctness-lock",
    "unchecked-release",
    "unchecked-renewal",
    "unclassified-lock",
    "unfenced-correctness-lock",
    "unreleased-lock",
    "unrenewed-long-operation",
    "unused-suppression",
    "wall-clock-deadline",
];

/// Rule docs lifted from the rule files by `build.rs`: (id, markdown).
static DOCS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/rule_docs.rs"));

pub fn by_id(id: &str) -> Option<&'static RuleMeta> {
    RULES.iter().find(|r| r.id == id)
}

pub fn suggest(id: &str) -> Option<&'static str> {
    ALL_IDS
        .iter()
        .map(|c| (strsim::damerau_levenshtein(id, c), *c))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, c)| c)
}

/// The rule's full documentation (markdown).
pub fn doc(id: &str) -> Option<&'static str> {
    DOCS.iter().find(|(i, _)| *i == id).map(|(_, d)| *d)
}

/// The first paragraph under "What it does".
pub fn summary(id: &str) -> &'static str {
    let Some(doc) = doc(id) else { return "" };
    let body = doc.split("## What it does").nth(1).unwrap_or(doc);
    body.trim_start().split("\n\n").next().unwrap_or("").trim()
}

/// `` `LockManager::lock` (rslock) `` — how messages name a lock.
pub(crate) fn lock_name(c: &Classified) -> String {
    format!("`{}` ({})", c.site.api, c.site.library)
}

pub(crate) fn fmt_ms(ms: f64) -> String {
    let d = std::time::Duration::from_millis(ms.max(0.0).round() as u64);
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_docs_and_ids_agree() {
        let ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        assert_eq!(
            ids, ALL_IDS,
            "RULES and ALL_IDS list the same rules in id order"
        );
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(ids, sorted);
        for id in ids {
            let d = doc(id).unwrap_or_else(|| panic!("{id} has a rule file with a doc comment"));
            for heading in [
                "## What it does",
                "## Why it matters",
                "## Example",
                "## Use instead",
                "## Known limits",
            ] {
                assert!(d.contains(heading), "{id}'s doc lacks `{heading}`");
            }
            assert!(!summary(id).is_empty());
        }
        assert_eq!(DOCS.len(), RULES.len(), "every rule file is registered");
    }
}
