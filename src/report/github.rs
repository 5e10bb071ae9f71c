//! `--format github`: GitHub Actions workflow commands (`::error file=…,line=…,col=…,title=…::…`),
//! which annotate the pull request diff without a SARIF upload.

use std::fmt::Write;

use super::Report;
use crate::lints::Level;

/// Workflow command values escape `%`, CR and LF; properties also `:` and `,`.
fn esc_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn esc_prop(s: &str) -> String {
    esc_data(s).replace(':', "%3A").replace(',', "%2C")
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for f in report.active() {
        let cmd = match f.severity {
            Level::Error => "error",
            Level::Warning => "warning",
            _ => "notice",
        };
        let _ = writeln!(
            out,
            "::{cmd} file={},line={},col={},endLine={},endColumn={},title={}::{}",
            esc_prop(&f.path),
            f.line,
            f.column,
            f.end_line,
            f.end_column,
            esc_prop(&format!("lockaudit {}", f.rule)),
            esc_data(&format!("{} (help: {})", f.message, f.help))
        );
    }
    for e in &report.errors {
        let line = e.line.map(|l| format!(",line={l}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "::error file={}{line},title=lockaudit could not analyse this file::{}",
            esc_prop(&e.path),
            esc_data(&e.message)
        );
    }
    out
}
