//! Findings and file problems as LSP diagnostics: the rule's level is the severity, the rule id
//! the code, and the code links to the rule's documentation.

use std::path::{Path, PathBuf};

use lsp_types::{
    CodeDescription, Diagnostic, DiagnosticSeverity, NumberOrString, Position, Range, Url,
};

use super::workspace::FileResults;
use crate::diag::{FileError, ToolError};
use crate::lints::Level;
use crate::report::Finding;

pub const SOURCE: &str = "lockaudit";

pub fn severity(level: Level) -> DiagnosticSeverity {
    match level {
        Level::Error => DiagnosticSeverity::ERROR,
        Level::Warning => DiagnosticSeverity::WARNING,
        Level::Note | Level::Off => DiagnosticSeverity::INFORMATION,
    }
}

/// The range of a finding (1-based lines, 1-based UTF-16 columns in `utf16`) in LSP terms.
pub fn range(f: &Finding) -> Range {
    let at = |line: usize, col: usize| {
        Position::new(line.saturating_sub(1) as u32, col.saturating_sub(1) as u32)
    };
    Range::new(at(f.line, f.utf16.0), at(f.end_line, f.utf16.1))
}

/// Where the rule documentation is written for links: `<dir>/<rule>.md`.
pub struct DocLinks {
    pub dir: PathBuf,
}

impl DocLinks {
    /// Writes the rule pages (the text of `lockaudit explain`) into `dir`, once per version; in
    /// a temporary folder when `dir` cannot be written (a read-only checkout).
    pub fn write(dir: PathBuf) -> DocLinks {
        let fallback =
            std::env::temp_dir().join(format!("lockaudit-{}-rules", env!("CARGO_PKG_VERSION")));
        for dir in [dir, fallback] {
            if dir.join("README.md").is_file() || crate::commands::docs::write(&dir).is_ok() {
                return DocLinks { dir };
            }
        }
        // Without the pages the links lead nowhere; nothing else breaks.
        DocLinks {
            dir: std::env::temp_dir(),
        }
    }

    pub fn url(&self, rule: &str) -> Option<Url> {
        Url::from_file_path(self.dir.join(format!("{rule}.md"))).ok()
    }
}

pub fn of_finding(f: &Finding, docs: &DocLinks) -> Diagnostic {
    let mut message = f.message.clone();
    if !f.help.is_empty() {
        message.push_str("\nhelp: ");
        message.push_str(&f.help);
    }
    Diagnostic {
        range: range(f),
        severity: Some(severity(f.severity)),
        code: Some(NumberOrString::String(f.rule.to_string())),
        code_description: docs.url(f.rule).map(|href| CodeDescription { href }),
        source: Some(SOURCE.into()),
        message,
        ..Diagnostic::default()
    }
}

/// A file that could not be analysed: on its line when the problem has one.
pub fn of_error(e: &FileError) -> Diagnostic {
    let line = e.line.unwrap_or(1).saturating_sub(1) as u32;
    let note = e.message.starts_with("note:");
    Diagnostic {
        range: Range::new(Position::new(line, 0), Position::new(line + 1, 0)),
        severity: Some(if note {
            DiagnosticSeverity::INFORMATION
        } else {
            DiagnosticSeverity::ERROR
        }),
        source: Some(SOURCE.into()),
        message: e.message.clone(),
        ..Diagnostic::default()
    }
}

/// A configuration or rule pack that stops the analysis, on its file.
pub fn of_tool_error(e: &ToolError, path: &Path) -> Option<Diagnostic> {
    let (p, line, column, message) = match e {
        ToolError::Config {
            path,
            line,
            column,
            message,
        }
        | ToolError::Pack {
            path,
            line,
            column,
            message,
        } => (path, *line, *column, message),
        _ => return None,
    };
    if !path.ends_with(p) && p != path {
        return None;
    }
    let at = Position::new(
        line.saturating_sub(1) as u32,
        column.saturating_sub(1) as u32,
    );
    Some(Diagnostic {
        range: Range::new(at, at),
        severity: Some(DiagnosticSeverity::ERROR),
        source: Some(SOURCE.into()),
        message: format!("{message} (lockaudit cannot analyse the workspace until this is fixed)"),
        ..Diagnostic::default()
    })
}

/// A file's diagnostics: unsuppressed findings, then problems.
pub fn of_file(r: Option<&FileResults>, docs: &DocLinks) -> Vec<Diagnostic> {
    let Some(r) = r else {
        return Vec::new();
    };
    r.findings
        .iter()
        .filter(|f| !f.suppressed && f.severity != Level::Off)
        .map(|f| of_finding(f, docs))
        .chain(r.errors.iter().map(of_error))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_become_severities_and_problems_sit_on_their_line() {
        assert_eq!(severity(Level::Error), DiagnosticSeverity::ERROR);
        assert_eq!(severity(Level::Warning), DiagnosticSeverity::WARNING);
        assert_eq!(severity(Level::Note), DiagnosticSeverity::INFORMATION);
        let d = of_error(&FileError {
            path: "a.rs".into(),
            line: Some(3),
            message: "cannot parse: expected `;`".into(),
        });
        assert_eq!(d.range.start, Position::new(2, 0));
        assert_eq!(d.severity, Some(DiagnosticSeverity::ERROR));
        let e = ToolError::Config {
            path: "lockaudit.toml".into(),
            line: 2,
            column: 1,
            message: "unknown rule".into(),
        };
        assert!(of_tool_error(&e, Path::new("/w/lockaudit.toml")).is_some());
        assert!(of_tool_error(&e, Path::new("/w/src/lib.rs")).is_none());
    }
}
