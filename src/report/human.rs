//! Terminal output: rustc-style diagnostics rendered by miette, then a summary line.

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
    src: NamedSource<Arc<str>>,
    label: LabeledSpan,
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
        Some(&self.src)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(self.label.clone())))
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

fn label_for(f: &Finding) -> &'static str {
    match f.rule {
        "invalid-annotation" | "unused-suppression" => "this directive",
        _ => "lock acquired here",
    }
}

pub fn render(report: &Report, color: bool) -> String {
    let suppressed = report.suppressed();
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(110)
        .with_links(false);
    let mut out = String::new();
    for f in report.active() {
        let Some(text) = report.sources.get(&f.path) else {
            continue;
        };
        let start = offset(text, f.line, f.column);
        let end = offset(text, f.end_line, f.end_column).max(start);
        let diag = Diag {
            message: f.message.clone(),
            code: format!("lockaudit::{}", f.rule),
            severity: match f.severity {
                Level::Error => Severity::Error,
                Level::Warning => Severity::Warning,
                _ => Severity::Advice,
            },
            help: f.help.clone(),
            src: NamedSource::new(f.path.clone(), text.clone()),
            label: LabeledSpan::new_with_span(Some(label_for(f).to_string()), start..end),
        };
        if handler.render_report(&mut out, &diag).is_err() {
            let _ = writeln!(
                out,
                "{}:{}:{}: {}: {} [{}]",
                f.path,
                f.line,
                f.column,
                f.severity.as_str(),
                f.message,
                f.rule
            );
        }
        out.push('\n');
    }
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
    let sites = &report.sites;
    let by = |p: crate::classify::Purpose| sites.iter().filter(|s| s.purpose == p).count();
    let _ = write!(
        summary,
        "; {}: {} correctness, {} efficiency, {} unclassified",
        plural(sites.len(), "lock site"),
        by(crate::classify::Purpose::Correctness),
        by(crate::classify::Purpose::Efficiency),
        by(crate::classify::Purpose::Unclassified)
    );
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
    out
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
