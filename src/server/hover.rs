//! Hover on a lock site: what the analysis knows about it (the inventory's row) and the findings
//! on its line.

use std::path::Path;

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind};

use super::workspace::FileResults;
use crate::classify::PurposeSource;
use crate::report::{Report, SiteRecord};

/// The kebab-case name serde gives a unit variant.
pub fn name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn source_words(s: PurposeSource) -> &'static str {
    match s {
        PurposeSource::Annotation => "a `// lockaudit:` annotation on the statement",
        PurposeSource::Function => "an annotation on the enclosing fn",
        PurposeSource::File => "a file-level annotation",
        PurposeSource::Config => "`[[classify]]` in the configuration",
        PurposeSource::Library => "the library's rule pack",
        PurposeSource::Default => "nothing: not classified yet",
    }
}

fn ttl(ms: Option<u64>) -> String {
    match ms {
        None => "none found".into(),
        Some(ms) => humantime::format_duration(std::time::Duration::from_millis(ms)).to_string(),
    }
}

/// The hover for a 1-based line: its sites and its findings; `None` when it has neither.
pub fn at_line(results: &FileResults, line: usize, root: &Path) -> Option<Hover> {
    let sites: Vec<&SiteRecord> = results.sites.iter().filter(|s| s.line == line).collect();
    if sites.is_empty() {
        return None;
    }
    let findings: Vec<_> = results
        .findings
        .iter()
        .filter(|f| f.line == line)
        .cloned()
        .collect();
    // The inventory's rows: the site's backend is its pack's when the code does not say.
    let report = Report {
        sites: sites.iter().map(|s| (*s).clone()).collect(),
        findings: findings.clone(),
        ..Report::default()
    };
    let rows = crate::commands::inventory::rows(&report, root, None).unwrap_or_default();
    let mut md = String::new();
    for (i, s) in sites.iter().enumerate() {
        if i > 0 {
            md.push_str("\n---\n\n");
        }
        let backend = rows
            .get(i)
            .and_then(|r| r.backend.clone())
            .or_else(|| s.backend.clone())
            .unwrap_or_else(|| "unknown".into());
        md.push_str(&format!(
            "**lock site**: `{}` — {} `{}`\n\n",
            s.library,
            name(&s.kind),
            s.api
        ));
        if let Some(via) = &s.via {
            md.push_str(&format!("through the wrapper `{via}`\n\n"));
        }
        if s.wrapped {
            md.push_str("inside a lock wrapper: judged where the wrapper is called\n\n");
        }
        let rows_md = [
            (
                "backend",
                format!(
                    "{backend} ({})",
                    if s.consensus {
                        "replicated through consensus"
                    } else {
                        "no consensus"
                    }
                ),
            ),
            (
                "key",
                s.key
                    .as_deref()
                    .map_or_else(|| "not a literal".into(), |k| format!("`{k}`")),
            ),
            ("TTL", ttl(s.ttl_ms)),
            (
                "purpose",
                format!(
                    "{} (from {})",
                    name(&s.purpose),
                    source_words(s.purpose_source)
                ),
            ),
            (
                "fencing",
                match &s.fenced_by {
                    Some(by) => format!("{} (fenced by {by})", name(&s.fencing)),
                    None => name(&s.fencing),
                },
            ),
            ("renewal", name(&s.renewal)),
            ("release", name(&s.release)),
        ];
        for (k, v) in rows_md {
            md.push_str(&format!("- {k}: {v}\n"));
        }
        if let Some(f) = &s.function {
            md.push_str(&format!("- in: `{f}`\n"));
        }
    }
    let active: Vec<_> = findings.iter().filter(|f| !f.suppressed).collect();
    let suppressed: Vec<_> = findings.iter().filter(|f| f.suppressed).collect();
    if active.is_empty() && suppressed.is_empty() {
        md.push_str("\nno findings here\n");
    }
    if !active.is_empty() {
        md.push_str("\n**findings**\n\n");
        for f in active {
            md.push_str(&format!(
                "- `{}` ({}): {}\n",
                f.rule,
                f.severity.as_str(),
                f.message
            ));
        }
    }
    for f in suppressed {
        md.push_str(&format!(
            "- `{}` suppressed: {}\n",
            f.rule,
            f.suppression_reason.as_deref().unwrap_or("")
        ));
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: md,
        }),
        range: None,
    })
}
