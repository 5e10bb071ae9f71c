//! Code actions at a place: classify a lock site (the edit `lockaudit annotate` makes), suppress
//! a finding with a reason, open a rule's documentation, and a finding's own fix.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, Command, Diagnostic, Position, Range,
    TextEdit, Url, WorkspaceEdit,
};

use super::diagnostics::{self, DocLinks};
use super::documents::Lines;
use super::workspace::FileResults;
use crate::classify::Purpose;
use crate::commands::annotate;
use crate::report::Finding;

/// The command that opens a rule's documentation; its argument is the page's URL.
pub const OPEN_RULE_DOC: &str = "lockaudit.openRuleDoc";

fn edit(uri: &Url, edits: Vec<TextEdit>) -> WorkspaceEdit {
    WorkspaceEdit {
        changes: Some(HashMap::from([(uri.clone(), edits)])),
        ..WorkspaceEdit::default()
    }
}

fn insert_line(line: usize, text: String) -> TextEdit {
    let at = Position::new(line as u32, 0);
    TextEdit {
        range: Range::new(at, at),
        new_text: text,
    }
}

/// The actions for the 0-based line range `range` of a file whose text is `text`.
pub fn at(
    uri: &Url,
    text: &str,
    results: &FileResults,
    range: Range,
    docs: &DocLinks,
) -> Vec<CodeActionOrCommand> {
    let (first, last) = (range.start.line as usize + 1, range.end.line as usize + 1);
    let lines = Lines::new(text);
    let in_range = |start: usize, end: usize| start <= last && end >= first;
    let findings: Vec<&Finding> = results
        .findings
        .iter()
        .filter(|f| !f.suppressed && in_range(f.line, f.end_line))
        .collect();
    let diagnostic = |f: &Finding| -> Diagnostic { diagnostics::of_finding(f, docs) };
    let mut out = Vec::new();

    // The finding's own fix first: it is the one to prefer.
    for f in &findings {
        let Some(fix) = &f.fix else { continue };
        let edits = fix
            .edits
            .iter()
            .map(|e| TextEdit {
                range: Range::new(lines.position(e.start), lines.position(e.end)),
                new_text: e.replacement.clone(),
            })
            .collect();
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: fix.message.clone(),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![diagnostic(f)]),
            edit: Some(edit(uri, edits)),
            is_preferred: Some(true),
            ..CodeAction::default()
        }));
    }

    // Classify: one comment above the statement holding the site, as `annotate` writes it.
    let sites: Vec<_> = results
        .sites
        .iter()
        .filter(|s| s.purpose == Purpose::Unclassified && !s.wrapped && in_range(s.line, s.line))
        .collect();
    let mut statements: BTreeSet<usize> = BTreeSet::new();
    for (stmt, _) in annotate::statement_lines(text, &sites).unwrap_or_default() {
        statements.extend(stmt);
    }
    for stmt in statements {
        let unclassified: Vec<Diagnostic> = findings
            .iter()
            .filter(|f| f.rule == "unclassified-lock")
            .map(|f| diagnostic(f))
            .collect();
        for (purpose, why) in [
            ("efficiency", "running twice only wastes work"),
            ("correctness", "running twice corrupts state"),
        ] {
            let new = annotate::insert_comments(text, &BTreeMap::from([(stmt, purpose)]));
            if !annotate::same_tokens(text, &new) {
                continue;
            }
            let Some(comment) = new.split_inclusive('\n').nth(stmt.saturating_sub(1)) else {
                continue;
            };
            out.push(CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("Classify this lock as {purpose} ({why})"),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: (!unclassified.is_empty()).then(|| unclassified.clone()),
                edit: Some(edit(
                    uri,
                    vec![insert_line(stmt.saturating_sub(1), comment.to_string())],
                )),
                ..CodeAction::default()
            }));
        }
    }

    // Suppress, with a reason to write between the quotes (an empty one is reported until then).
    let mut rules: BTreeSet<&str> = BTreeSet::new();
    for f in &findings {
        rules.insert(f.rule);
        if f.rule == "unused-suppression" {
            continue;
        }
        let line = f.line.saturating_sub(1);
        let comment = format!(
            "{}// lockaudit: allow({}) reason = \"\"{}",
            lines.indent(line),
            f.rule,
            lines.eol()
        );
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: format!("Suppress `{}` here (write the reason)", f.rule),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![diagnostic(f)]),
            edit: Some(edit(uri, vec![insert_line(line, comment)])),
            ..CodeAction::default()
        }));
    }

    for rule in rules {
        let Some(url) = docs.url(rule) else { continue };
        let title = format!("Open the documentation of `{rule}`");
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: title.clone(),
            kind: None,
            command: Some(Command {
                title,
                command: OPEN_RULE_DOC.into(),
                arguments: Some(vec![serde_json::Value::String(url.to_string())]),
            }),
            ..CodeAction::default()
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lints::Level;
    use crate::report::{Edit, Fix};

    fn finding(rule: &'static str, line: usize, fix: Option<Fix>) -> Finding {
        Finding {
            rule,
            severity: Level::Warning,
            path: "src/lib.rs".into(),
            line,
            column: 5,
            end_line: line,
            end_column: 9,
            message: "m".into(),
            help: String::new(),
            fingerprint: String::new(),
            suppressed: false,
            suppression_reason: None,
            line_text: String::new(),
            context: String::new(),
            utf16: (5, 9),
            fix,
        }
    }

    fn titles(actions: &[CodeActionOrCommand]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                CodeActionOrCommand::CodeAction(a) => a.title.clone(),
                CodeActionOrCommand::Command(c) => c.title.clone(),
            })
            .collect()
    }

    #[test]
    fn a_fix_becomes_a_preferred_quickfix_with_utf16_positions() {
        // Line 2 starts with a two-unit character; the edit replaces `old` after it.
        let text = "fn f() {\n    \u{1F512}old();\n}\n";
        let start = text.find("old").expect("old");
        let fix = Fix {
            message: "Use new".into(),
            edits: vec![Edit {
                start,
                end: start + 3,
                start_line: 2,
                start_column: 5,
                end_line: 2,
                end_column: 8,
                replacement: "new".into(),
            }],
        };
        let results = FileResults {
            findings: vec![finding("long-deadline", 2, Some(fix))],
            ..FileResults::default()
        };
        let uri = Url::parse("file:///w/src/lib.rs").expect("url");
        let docs = DocLinks {
            dir: "/docs".into(),
        };
        let line2 = Range::new(Position::new(1, 0), Position::new(1, 0));
        let actions = at(&uri, text, &results, line2, &docs);
        let CodeActionOrCommand::CodeAction(first) = &actions[0] else {
            panic!("{actions:?}")
        };
        assert_eq!(first.title, "Use new");
        assert_eq!(first.is_preferred, Some(true));
        let edits = &first
            .edit
            .as_ref()
            .expect("edit")
            .changes
            .as_ref()
            .expect("changes")[&uri];
        assert_eq!(
            edits[0].range,
            Range::new(Position::new(1, 6), Position::new(1, 9))
        );
        assert_eq!(edits[0].new_text, "new");
        assert_eq!(
            titles(&actions),
            [
                "Use new",
                "Suppress `long-deadline` here (write the reason)",
                "Open the documentation of `long-deadline`"
            ]
        );
        // The suppression goes above the finding's line, indented like it.
        let CodeActionOrCommand::CodeAction(suppress) = &actions[1] else {
            panic!()
        };
        let edit = &suppress
            .edit
            .as_ref()
            .expect("edit")
            .changes
            .as_ref()
            .expect("c")[&uri][0];
        assert_eq!(
            edit.new_text,
            "    // lockaudit: allow(long-deadline) reason = \"\"\n"
        );
        assert_eq!(edit.range.start, Position::new(1, 0));
        // Elsewhere in the file: nothing.
        let line3 = Range::new(Position::new(2, 0), Position::new(2, 0));
        assert!(at(&uri, text, &results, line3, &docs).is_empty());
    }

    #[test]
    fn suppressed_findings_offer_nothing() {
        let mut f = finding("long-deadline", 1, None);
        f.suppressed = true;
        let results = FileResults {
            findings: vec![f],
            ..FileResults::default()
        };
        let uri = Url::parse("file:///w/src/lib.rs").expect("url");
        let docs = DocLinks {
            dir: "/docs".into(),
        };
        let r = Range::new(Position::new(0, 0), Position::new(0, 0));
        assert!(at(&uri, "fn f() {}\n", &results, r, &docs).is_empty());
    }
}
