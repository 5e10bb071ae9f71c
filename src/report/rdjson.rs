//! `--format rdjson`: reviewdog's Diagnostic Format (`DiagnosticResult`), for
//! `reviewdog -f=rdjson`. Positions are 1-based lines and 1-based columns counted in UTF-8 bytes
//! (reviewdog.proto's `Position`), end exclusive; findings carry character columns, so they are
//! converted on the file's text. A finding's `fix` becomes `suggestions`, located from its byte
//! offsets (the one unit both sides agree on).

use serde::Serialize;

use super::{Finding, Report};
use crate::lints::Level;

const DOCS: &str = "https://github.com/lockaudit/lockaudit/blob/main/docs/rules";

#[derive(Serialize)]
struct DiagnosticResult<'a> {
    source: Source,
    severity: &'static str,
    diagnostics: Vec<Diagnostic<'a>>,
}

#[derive(Serialize)]
struct Source {
    name: &'static str,
    url: &'static str,
}

#[derive(Serialize)]
struct Diagnostic<'a> {
    message: String,
    location: Location<'a>,
    severity: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<Code>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    suggestions: Vec<Suggestion<'a>>,
}

#[derive(Serialize)]
struct Location<'a> {
    path: &'a str,
    range: Range,
}

#[derive(Serialize)]
struct Range {
    start: Position,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<Position>,
}

#[derive(Serialize, Clone, Copy)]
struct Position {
    line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    column: Option<usize>,
}

#[derive(Serialize)]
struct Code {
    value: &'static str,
    url: String,
}

#[derive(Serialize)]
struct Suggestion<'a> {
    range: Range,
    text: &'a str,
}

fn severity(l: Level) -> &'static str {
    match l {
        Level::Error => "ERROR",
        Level::Warning => "WARNING",
        Level::Note | Level::Off => "INFO",
    }
}

/// A file's text with its line starts, for column and offset conversions.
struct Text<'t> {
    text: &'t str,
    starts: Vec<usize>,
}

impl<'t> Text<'t> {
    fn new(text: &'t str) -> Text<'t> {
        let starts = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
            .collect();
        Text { text, starts }
    }

    fn line(&self, line: usize) -> Option<&'t str> {
        let start = *self.starts.get(line.checked_sub(1)?)?;
        let end = self
            .starts
            .get(line)
            .map_or(self.text.len(), |&e| e.saturating_sub(1));
        Some(&self.text[start..end.max(start)])
    }

    /// A 1-based character column as a 1-based UTF-8 byte column.
    fn byte_column(&self, line: usize, column: usize) -> usize {
        let Some(text) = self.line(line) else {
            return column.max(1);
        };
        let chars = column.saturating_sub(1);
        let bytes: usize = text.chars().take(chars).map(char::len_utf8).sum();
        // Past the end of the line (a span ending after its last character) keeps its distance.
        bytes + chars.saturating_sub(text.chars().count()) + 1
    }

    /// A byte offset as a position; `None` when it is not in the text.
    fn position(&self, offset: usize) -> Option<Position> {
        if offset > self.text.len() || !self.text.is_char_boundary(offset) {
            return None;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        Some(Position {
            line,
            column: Some(offset - self.starts[line - 1] + 1),
        })
    }
}

fn suggestions<'a>(f: &'a Finding, text: Option<&Text>) -> Vec<Suggestion<'a>> {
    let (Some(fix), Some(text)) = (&f.fix, text) else {
        return Vec::new();
    };
    let located: Option<Vec<Suggestion>> = fix
        .edits
        .iter()
        .map(|e| {
            Some(Suggestion {
                range: Range {
                    start: text.position(e.start)?,
                    end: Some(text.position(e.end)?),
                },
                text: &e.replacement,
            })
        })
        .collect();
    // A fix is applied whole or not at all: one edit that does not fit the file drops them all.
    located.unwrap_or_default()
}

pub fn render(report: &Report) -> String {
    let mut diagnostics = Vec::new();
    let mut current: Option<(&str, Option<Text>)> = None;
    for f in report.active() {
        if current.as_ref().is_none_or(|(p, _)| *p != f.path) {
            let text = report.sources.get(&f.path).map(|t| Text::new(t));
            current = Some((f.path.as_str(), text));
        }
        let text = current.as_ref().and_then(|(_, t)| t.as_ref());
        let col = |line: usize, column: usize| {
            Some(text.map_or(column.max(1), |t: &Text| t.byte_column(line, column)))
        };
        diagnostics.push(Diagnostic {
            message: format!("{} (help: {})", f.message, f.help),
            location: Location {
                path: &f.path,
                range: Range {
                    start: Position {
                        line: f.line.max(1),
                        column: col(f.line, f.column),
                    },
                    end: Some(Position {
                        line: f.end_line.max(1),
                        column: col(f.end_line, f.end_column),
                    }),
                },
            },
            severity: severity(f.severity),
            code: Some(Code {
                value: f.rule,
                url: format!("{DOCS}/{}.md", f.rule),
            }),
            suggestions: suggestions(f, text),
        });
    }
    for e in &report.errors {
        diagnostics.push(Diagnostic {
            message: format!("lockaudit could not analyse this file: {}", e.message),
            location: Location {
                path: &e.path,
                range: Range {
                    start: Position {
                        line: e.line.unwrap_or(1).max(1),
                        column: None,
                    },
                    end: None,
                },
            },
            severity: "ERROR",
            code: None,
            suggestions: Vec::new(),
        });
    }
    let worst = report
        .active()
        .map(|f| f.severity)
        .chain((!report.errors.is_empty()).then_some(Level::Error))
        .max();
    let doc = DiagnosticResult {
        source: Source {
            name: "lockaudit",
            url: "https://github.com/lockaudit/lockaudit",
        },
        severity: worst.map_or("INFO", severity),
        diagnostics,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_utf8_bytes_from_one() {
        // proto example: in 'a𐐀b' the column of b is 6.
        let t = Text::new("x\na𐐀b\n");
        assert_eq!(t.byte_column(2, 1), 1);
        assert_eq!(t.byte_column(2, 2), 2);
        assert_eq!(t.byte_column(2, 3), 6);
        // One past the end of the line (an exclusive end).
        assert_eq!(t.byte_column(2, 4), 7);
        let p = t.position(2 + 5).expect("in the text");
        assert_eq!((p.line, p.column), (2, Some(6)));
        assert!(t.position(2 + 2).is_none(), "inside the 4-byte character");
        let end = t.position(t.text.len()).expect("end of text");
        assert_eq!((end.line, end.column), (3, Some(1)));
    }

    fn finding(fix: Option<crate::report::Fix>) -> Finding {
        Finding {
            rule: "non-atomic-acquire",
            severity: Level::Error,
            path: "src/a.rs".into(),
            line: 2,
            column: 9,
            end_line: 2,
            end_column: 12,
            message: "m".into(),
            help: "h".into(),
            fingerprint: "0:0".into(),
            suppressed: false,
            suppression_reason: None,
            line_text: String::new(),
            context: String::new(),
            utf16: (9, 12),
            fix,
        }
    }

    #[test]
    fn a_fix_becomes_suggestions_located_by_byte_offsets() {
        use crate::report::{Edit, Fix};
        let text = "fn f() {\n    /*é*/ SETNX k 1;\n}\n";
        let at = text.find("SETNX").unwrap();
        let edit = |start: usize, end: usize, replacement: &str| Edit {
            start,
            end,
            // Deliberately wrong: the suggestion must come from the byte offsets.
            start_line: 99,
            start_column: 99,
            end_line: 99,
            end_column: 99,
            replacement: replacement.into(),
        };
        let fix = Fix {
            message: "Use one SET … NX PX".into(),
            edits: vec![
                edit(at, at + 5, "SET"),
                edit(at + 10, at + 10, " NX PX 30000"),
            ],
        };
        let mut report = Report::default();
        report.findings.push(finding(Some(fix)));
        report
            .sources
            .insert("src/a.rs".into(), std::sync::Arc::from(text));
        let doc: serde_json::Value = serde_json::from_str(&render(&report)).unwrap();
        let s = &doc["diagnostics"][0]["suggestions"];
        // `    /*é*/ ` is 11 bytes (é is 2): SETNX starts at byte column 12 of line 2.
        assert_eq!(
            s[0],
            serde_json::json!({"range": {"start": {"line": 2, "column": 12}, "end": {"line": 2, "column": 17}}, "text": "SET"})
        );
        assert_eq!(s[1]["range"]["start"], s[1]["range"]["end"], "an insertion");
        assert_eq!(s[1]["range"]["start"]["column"], 22);

        // An edit outside the file drops the whole fix, never a half-applied one.
        let mut report = Report::default();
        let bad = Fix {
            message: "x".into(),
            edits: vec![
                edit(at, at + 5, "SET"),
                edit(text.len() + 1, text.len() + 2, ""),
            ],
        };
        report.findings.push(finding(Some(bad)));
        report
            .sources
            .insert("src/a.rs".into(), std::sync::Arc::from(text));
        let doc: serde_json::Value = serde_json::from_str(&render(&report)).unwrap();
        assert!(doc["diagnostics"][0].get("suggestions").is_none(), "{doc}");
        // Suppressed findings are left out.
        let mut report = Report::default();
        let mut f = finding(None);
        f.suppressed = true;
        report.findings.push(f);
        let doc: serde_json::Value = serde_json::from_str(&render(&report)).unwrap();
        assert_eq!(doc["diagnostics"], serde_json::json!([]));
    }
}
