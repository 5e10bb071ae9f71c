//! Reports: the finished analysis, rendered as miette diagnostics, JSON, SARIF 2.1.0, GitHub
//! Actions workflow commands, GitLab Code Quality, JUnit XML or reviewdog's rdjson. Everything
//! here is sorted before it is written.

mod fingerprint;
pub mod github;
pub mod gitlab;
pub mod human;
pub mod json;
pub mod junit;
pub mod rdjson;
pub mod sarif;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::classify::{Purpose, PurposeSource};
use crate::diag::FileError;
use crate::lints::Level;
use crate::packs::{CallKind, ReleaseStyle};
use crate::sites::Fencing;

pub use fingerprint::{assign_fingerprints, normalize_line};

/// One acquisition, as reported in `sites`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct SiteRecord {
    pub path: String,
    pub line: usize,
    pub column: usize,
    pub library: String,
    pub api: String,
    pub kind: CallKind,
    pub purpose: Purpose,
    pub purpose_source: PurposeSource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced_by: Option<String>,
    pub ttl_ms: Option<u64>,
    pub fencing: Fencing,
    pub function: Option<String>,
    pub key: Option<String>,
    /// For a call to a lock wrapper: the wrapper's path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// How the lock is released (`explicit`, `guard`, `session`, `lease`).
    pub release: ReleaseStyle,
    /// Does the lock's store replicate through consensus?
    pub consensus: bool,
    /// The store, when the code shows which of its pack's it is (`redis` for fenced-lock's
    /// `RedisBackend`); otherwise the pack's `backend` applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub renewal: Renewal,
    /// The primitive inside a wrapper (judged at the wrapper's call sites).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wrapped: bool,
    /// In test code (see `sites::test_code`): its findings are reported only with
    /// `include-tests = true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub test: bool,
    /// The primitive of a set-if-absent wrapper of the caller's key and value (see
    /// `Site::key_gate`): a lock only where a call says so, so not listed when no call does.
    #[serde(skip)]
    pub gated: bool,
}

/// How a lock is kept alive while held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Renewal {
    None,
    /// A renewal of this lock in its region.
    Renewed,
    /// A keeper, a lease keep-alive or an acquisition that renews itself.
    Keeper,
}

/// One finding.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    pub rule: &'static str,
    pub severity: Level,
    pub path: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub message: String,
    pub help: String,
    pub fingerprint: String,
    pub suppressed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppression_reason: Option<String>,
    /// The normalised text of the finding's line, for the fingerprint (not serialised).
    #[serde(skip)]
    pub line_text: String,
    /// The enclosing function, for the fingerprint (not serialised).
    #[serde(skip)]
    pub context: String,
    /// UTF-16 columns, for SARIF.
    #[serde(skip)]
    pub utf16: (usize, usize),
    /// A mechanical, behaviour-preserving fix, when the rule knows one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

/// A fix: edits to apply together, all in the finding's file.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Fix {
    /// What the fix does, imperative (`Use one SET … NX PX`).
    pub message: String,
    /// Non-overlapping edits, sorted by `start`.
    pub edits: Vec<Edit>,
}

/// Replace `start..end` (byte offsets into the file as read) with `replacement`. The line and
/// column pairs (1-based lines, 0-based character columns, unlike findings' 1-based ones) locate
/// the same range for formats that want them.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub start_line: usize,
    pub start_column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub replacement: String,
}

impl Edit {
    /// Replace `span` (1-based columns, as spans have them) with `replacement`. The byte offsets
    /// are filled in from the file's text when the finding is made (`Edit::locate`).
    pub fn replace(span: crate::source::Span, replacement: String) -> Edit {
        Edit {
            start: 0,
            end: 0,
            start_line: span.line,
            start_column: span.column.saturating_sub(1),
            end_line: span.end_line,
            end_column: span.end_column.saturating_sub(1),
            replacement,
        }
    }

    /// Delete whole lines `first..=last`, with their line breaks.
    pub fn delete_lines(first: usize, last: usize) -> Edit {
        Edit {
            start: 0,
            end: 0,
            start_line: first,
            start_column: 0,
            end_line: last + 1,
            end_column: 0,
            replacement: String::new(),
        }
    }

    /// Sets the byte offsets from the line and column pairs.
    pub fn locate(&mut self, src: &crate::source::SourceFile) {
        self.start = src.offset(self.start_line, self.start_column + 1);
        self.end = src.offset(self.end_line, self.end_column + 1);
    }
}

/// The whole result of a run.
#[derive(Debug, Default)]
pub struct Report {
    pub sites: Vec<SiteRecord>,
    pub findings: Vec<Finding>,
    pub errors: Vec<FileError>,
    pub files_analyzed: usize,
    /// Texts of files with findings, for the human renderer's snippets.
    pub sources: BTreeMap<String, Arc<str>>,
}

impl Report {
    /// Sorts everything and fixes fingerprints; call once, before rendering.
    pub fn finish(&mut self) {
        self.sites.sort_by(|a, b| {
            (&a.path, a.line, a.column, &a.api).cmp(&(&b.path, b.line, b.column, &b.api))
        });
        self.findings.sort_by(|a, b| {
            (&a.path, a.line, a.column, a.rule).cmp(&(&b.path, b.line, b.column, b.rule))
        });
        self.findings.dedup_by(|a, b| {
            a.path == b.path && a.line == b.line && a.column == b.column && a.rule == b.rule
        });
        self.errors.sort();
        assign_fingerprints(&mut self.findings);
    }

    /// Findings that are not suppressed.
    pub fn active(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.suppressed)
    }

    pub fn count(&self, level: Level) -> usize {
        self.active().filter(|f| f.severity == level).count()
    }

    pub fn suppressed(&self) -> usize {
        self.findings.iter().filter(|f| f.suppressed).count()
    }

    /// Does any unsuppressed finding reach the level that fails the run?
    pub fn fails(&self, fail_on: Option<Level>) -> bool {
        fail_on.is_some_and(|min| self.active().any(|f| f.severity >= min))
    }
}
