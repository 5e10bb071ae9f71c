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
            let Some(comment) = new.split_inclusive('\n').nth(stmt - 1) else {
                continue;
            };
            out.push(CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("Classify this lock as {purpose} ({why})"),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: (!unclassified.is_empty()).then(|| unclassified.clone()),
                edit: Some(edit(uri, vec![insert_line(stmt - 1, comment.to_string())])),
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
        let line = f.line - 1;
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
