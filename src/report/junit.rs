//! `--format junit`: JUnit XML for CI systems that read test reports (Jenkins, Azure Pipelines,
//! CircleCI, GitLab's test report). One `<testsuite>` per rule with findings, one `<testcase>` per
//! file in it, failing with the file's findings as the failure text; clean rule/file pairs are not
//! listed. Files that could not be analysed are `<error>` cases in the `lockaudit` suite. A run
//! with neither still writes one passing case, since some consumers reject an empty report.
//! No `time` or `timestamp`: the output must be byte-identical across runs.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Finding, Report};

/// Escapes for both text and attribute values, and replaces what XML 1.0 cannot hold at all
/// (control characters other than tab, LF and CR) by U+FFFD: user code's strings reach messages.
fn esc(s: &str) -> String {
    esc_as(s, true)
}

/// Element text keeps its line breaks readable; attributes need them as references.
fn esc_text(s: &str) -> String {
    esc_as(s, false)
}

fn esc_as(s: &str, attr: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // In attributes a raw line break would be normalised to a space by the parser.
            '\n' if attr => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attr => out.push_str("&#9;"),
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn finding_text(f: &Finding) -> String {
    format!(
        "{}:{}:{}: {}: {}\n  help: {}\n",
        f.path,
        f.line,
        f.column,
        f.severity.as_str(),
        f.message,
        f.help
    )
}

pub fn render(report: &Report) -> String {
    // rule -> file -> findings; BTreeMaps keep both levels sorted.
    let mut by_rule: BTreeMap<&str, BTreeMap<&str, Vec<&Finding>>> = BTreeMap::new();
    for f in report.active() {
        by_rule
            .entry(f.rule)
            .or_default()
            .entry(f.path.as_str())
            .or_default()
            .push(f);
    }
    let mut suites = String::new();
    let (mut tests, mut failures) = (0, 0);
    for (rule, files) in &by_rule {
        let _ = writeln!(
            suites,
            r#"  <testsuite name="{}" tests="{n}" failures="{n}" errors="0" skipped="0">"#,
            esc(rule),
            n = files.len()
        );
        for (path, findings) in files {
            let text: String = findings.iter().map(|f| finding_text(f)).collect();
            let _ = writeln!(
                suites,
                r#"    <testcase name="{p}" classname="lockaudit.{r}" file="{p}">"#,
                p = esc(path),
                r = esc(rule)
            );
            let _ = writeln!(
                suites,
                r#"      <failure message="{}" type="{}">{}</failure>"#,
                esc(&format!(
                    "{} finding(s) of {rule} in {path}",
                    findings.len()
                )),
                esc(rule),
                esc_text(&text)
            );
            suites.push_str("    </testcase>\n");
        }
        suites.push_str("  </testsuite>\n");
        tests += files.len();
        failures += files.len();
    }
    let errors = report.errors.len();
    if errors > 0 || by_rule.is_empty() {
        let n = errors.max(1);
        let _ = writeln!(
            suites,
            r#"  <testsuite name="lockaudit" tests="{n}" failures="0" errors="{errors}" skipped="0">"#
        );
        if errors == 0 {
            suites.push_str("    <testcase name=\"analysis\" classname=\"lockaudit.analysis\"/>\n");
        }
        for e in &report.errors {
            let at = e.line.map(|l| format!(":{l}")).unwrap_or_default();
            let _ = writeln!(
                suites,
                r#"    <testcase name="{p}" classname="lockaudit.analysis" file="{p}">"#,
                p = esc(&e.path)
            );
            let _ = writeln!(
                suites,
                r#"      <error message="lockaudit could not analyse this file" type="analysis-error">{}</error>"#,
                esc_text(&format!("{}{at}: {}\n", e.path, e.message))
            );
            suites.push_str("    </testcase>\n");
        }
        suites.push_str("  </testsuite>\n");
        tests += n;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"lockaudit\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n\
         {suites}</testsuites>\n"
    )
}
