//! Terminal output: rustc-style diagnostics rendered by miette, then a summary line. The
//! findings at one place share one snippet: the first (most severe) is the diagnostic, the
//! others follow it as related diagnostics, without repeating the code. `--format concise` is
//! one line per finding.

use std::fmt::{self, Write};
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, Severity,
    SourceCode,
};

use super::{Finding, Report};
use crate::lints::Level;

#[derive(Debug)]
struct Diag {
    message: String,
    code: String,
    severity: Severity,
    help: String,
    /// `None` for the findings that follow the first at the same place.
    src: Option<NamedSource<Arc<str>>>,
    labels: Vec<LabeledSpan>,
    related: Vec<Diag>,
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Diag {}

impl Diagnostic for Diag {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }
    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.help))
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.src.as_ref().map(|s| s as &dyn SourceCode)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            return None;
        }
        Some(Box::new(self.labels.iter().cloned()))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(self.related.iter().map(|d| d as &dyn Diagnostic)))
    }
}

/// Byte offset of a 1-based line and character column.
fn offset(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let rest = &text[start.min(text.len())..];
    let line_text = rest.split('\n').next().unwrap_or("");
    start
        + line_text
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(line_text.len(), |(i, _)| i)
}

/// What the finding's span is: most rules point at the acquisition, some at a release, a
/// renewal, a clock read or a directive.
fn label_for(f: &Finding) -> &'static str {
    match f.rule {
        "invalid-annotation" | "unused-suppression" => "this directive",
        "unchecked-release" => "lock released here",
        "unchecked-renewal" => "lease renewed here",
        "wall-clock-deadline" => "clock read here",
        _ => "lock acquired here",
    }
}

fn severity(l: Level) -> Severity {
    match l {
        Level::Error => Severity::Error,
        Level::Warning => Severity::Warning,
        _ => Severity::Advice,
    }
}

/// The unsuppressed findings with a snippet to show, in groups on one line (one snippet, a label
/// per distinct span), the most severe first within a group.
fn groups(report: &Report) -> Vec<Vec<&Finding>> {
    let mut out: Vec<Vec<&Finding>> = Vec::new();
    for f in report.active() {
        if !report.sources.contains_key(&f.path) {
            continue;
        }
        let same = |g: &Finding| (&g.path, g.line) == (&f.path, f.line);
        match out.last_mut() {
            Some(g) if same(g[0]) => g.push(f),
            _ => out.push(vec![f]),
        }
    }
    for g in &mut out {
        // Stable: rules stay in id order within a severity.
        g.sort_by_key(|f| std::cmp::Reverse(f.severity));
    }
    out
}

/// `--format concise`: `path:line:col: rule: message`, one line per finding, then the
/// errors and the summary, as clippy and ruff users expect.
pub fn render_concise(report: &Report) -> String {
    let mut out = String::new();
    for f in report.active() {
        let _ = writeln!(
            out,
            "{}:{}:{}: {}: {}",
            f.path, f.line, f.column, f.rule, f.message
        );
    }
    errors_and_summary(report, &mut out);
    out
}

pub fn render(report: &Report, color: bool) -> String {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(110)
        .with_links(false)
        .with_show_related_as_nested(true);
    let mut out = String::new();
    for group in groups(report) {
        let f = group[0];
        let Some(text) = report.sources.get(&f.path) else {
            continue;
        };
        let mut labels: Vec<LabeledSpan> = Vec::new();
        for g in &group {
            let start = offset(text, g.line, g.column);
            let end = offset(text, g.end_line, g.end_column).max(start);
            let label = LabeledSpan::new_with_span(Some(label_for(g).to_string()), start..end);
            if !labels.contains(&label) {
                labels.push(label);
            }
        }
        labels.sort_by_key(|l| l.offset());
        let plain = |g: &Finding| Diag {
            message: g.message.clone(),
            code: format!("lockaudit::{}", g.rule),
            severity: severity(g.severity),
            help: g.help.clone(),
            src: None,
            labels: Vec::new(),
            related: Vec::new(),
        };
        let diag = Diag {
            src: Some(NamedSource::new(f.path.clone(), text.clone())),
            labels,
            related: group[1..].iter().map(|g| plain(g)).collect(),
            ..plain(f)
        };
        if handler.render_report(&mut out, &diag).is_err() {
            for g in &group {
                let _ = writeln!(
                    out,
                    "{}:{}:{}: {}: {} [{}]",
                    g.path,
                    g.line,
                    g.column,
                    g.severity.as_str(),
                    g.message,
                    g.rule
                );
            }
        }
        out.push('\n');
    }
    errors_and_summary(report, &mut out);
    out
}

fn errors_and_summary(report: &Report, out: &mut String) {
    let suppressed = report.suppressed();
    for e in &report.errors {
        match e.line {
            Some(l) => {
                let _ = writeln!(out, "error: {}:{l}: {}", e.path, e.message);
            }
            None => {
                let _ = writeln!(out, "error: {}: {}", e.path, e.message);
            }
        }
    }
    let n = report.active().count();
    let mut summary = format!(
        "{} in {} file{} ({} error{}, {} warning{}, {} note{})",
        plural(n, "finding"),
        report.files_analyzed,
        if report.files_analyzed == 1 { "" } else { "s" },
        report.count(Level::Error),
        if report.count(Level::Error) == 1 {
            ""
        } else {
            "s"
        },
        report.count(Level::Warning),
        if report.count(Level::Warning) == 1 {
            ""
        } else {
            "s"
        },
        report.count(Level::Note),
        if report.count(Level::Note) == 1 {
            ""
        } else {
            "s"
        },
    );
    // The sites findings are about; those inside wrappers (judged where the wrapper is called)
    // and in test code are counted apart, so that the numbers match what is shown.
    let (wrapped, rest): (Vec<_>, Vec<_>) = report.sites.iter().partition(|s| s.wrapped);
    let (tests, sites): (Vec<_>, Vec<_>) = rest.into_iter().partition(|s| s.test);
    let by = |p: crate::classify::Purpose| sites.iter().filter(|s| s.purpose == p).count();
    let _ = write!(
        summary,
        "; {}: {} correctness, {} efficiency, {} unclassified",
        plural(sites.len(), "lock site"),
        by(crate::classify::Purpose::Correctness),
        by(crate::classify::Purpose::Efficiency),
        by(crate::classify::Purpose::Unclassified)
    );
    if !wrapped.is_empty() {
        let _ = write!(
            summary,
            "; {} inside wrappers, judged at the wrappers' call sites",
            wrapped.len()
        );
    }
    if !tests.is_empty() {
        let _ = write!(summary, "; {} in test code", tests.len());
    }
    if suppressed > 0 {
        let _ = write!(summary, "; {suppressed} suppressed");
    }
    if !report.errors.is_empty() {
        let _ = write!(
            summary,
            "; {} could not be analysed",
            plural(report.errors.len(), "file")
        );
    }
    out.push_str(&summary);
    out.push('\n');
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
