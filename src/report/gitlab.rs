//! `--format gitlab`: a GitLab Code Quality report (the subset of the Code Climate issue format
//! that GitLab reads): a JSON array of `{description, check_name, fingerprint, severity,
//! location {path, lines {begin, end}}}`. Suppressed findings are left out; a file that could not
//! be analysed is an issue of its own (`check_name` `analysis-error`), so the widget shows it.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Report;
use crate::lints::Level;

#[derive(Serialize)]
struct Issue<'a> {
    description: String,
    check_name: &'a str,
    fingerprint: String,
    severity: &'static str,
    location: Location<'a>,
}

#[derive(Serialize)]
struct Location<'a> {
    path: &'a str,
    lines: Lines,
}

#[derive(Serialize)]
struct Lines {
    begin: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<usize>,
}

/// GitLab's scale is info < minor < major < critical < blocker. An error-level finding is a lock
/// that can let two holders write at once, which GitLab's docs place at `critical`; `blocker` is
/// left for nothing, since lockaudit has no level above error.
fn severity(l: Level) -> &'static str {
    match l {
        Level::Error => "critical",
        Level::Warning => "major",
        Level::Note | Level::Off => "minor",
    }
}

/// Same shape as the findings' fingerprints (16 hex digits of a SHA-256), from what names the
/// failure; no line number, so it survives edits above it.
fn error_fingerprint(path: &str, message: &str) -> String {
    let mut h = Sha256::new();
    for part in ["analysis-error", path, message] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    let hex: String = h
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{hex}:0")
}

pub fn render(report: &Report) -> String {
    let mut issues: Vec<Issue> = report
        .active()
        .map(|f| Issue {
            description: format!("{} (help: {})", f.message, f.help),
            check_name: f.rule,
            fingerprint: f.fingerprint.clone(),
            severity: severity(f.severity),
            location: Location {
                path: &f.path,
                lines: Lines {
                    begin: f.line.max(1),
                    end: (f.end_line > f.line).then_some(f.end_line),
                },
            },
        })
        .collect();
    issues.extend(report.errors.iter().map(|e| Issue {
        description: format!("lockaudit could not analyse this file: {}", e.message),
        check_name: "analysis-error",
        fingerprint: error_fingerprint(&e.path, &e.message),
        severity: "major",
        location: Location {
            path: &e.path,
            lines: Lines {
                begin: e.line.unwrap_or(1).max(1),
                end: None,
            },
        },
    }));
    // Findings and errors are each sorted already; one order across both keeps the file stable.
    issues.sort_by(|a, b| {
        (a.location.path, a.location.lines.begin, a.check_name).cmp(&(
            b.location.path,
            b.location.lines.begin,
            b.check_name,
        ))
    });
    let mut s = serde_json::to_string_pretty(&issues).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}
