//! `lockaudit inventory`: one row per lock site, with what the analysis knows about it and the
//! findings at it, then counts. The starting point for classifying an existing codebase.
//!
//! Release style, consensus, renewal and backend are the site's own (call-level pack overrides
//! and the receiver type's `backend` included, and inherited by a wrapper's call sites); without
//! a type's backend, the site's is its rule pack's (`[pack] backend`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::classify::Purpose;
use crate::cli::InventoryFormat;
use crate::config::Configs;
use crate::diag::{FileError, ToolError};
use crate::packs::{self, PackMeta};
use crate::report::{Report, SiteRecord};
use crate::sites::Fencing;

mod html;

#[derive(Debug, Serialize)]
pub struct Row<'r> {
    #[serde(flatten)]
    pub site: &'r SiteRecord,
    pub backend: Option<String>,
    /// Rules of the unsuppressed findings on the site's line.
    pub findings: Vec<&'static str>,
}

#[derive(Debug, Serialize, Default)]
pub struct Summary {
    pub sites: usize,
    pub by_purpose: BTreeMap<String, usize>,
    pub by_library: BTreeMap<String, usize>,
    /// `path:line` of correctness locks without any fencing.
    pub unfenced_correctness: Vec<String>,
}

#[derive(Serialize)]
struct JsonDoc<'r> {
    sites: &'r [Row<'r>],
    summary: &'r Summary,
    errors: &'r [FileError],
}

/// Builds the rows. `config` is `--config`, as the analysis used it, to find each site's pack.
pub fn rows<'r>(
    report: &'r Report,
    cwd: &Path,
    config: Option<&Path>,
) -> Result<Vec<Row<'r>>, ToolError> {
    let mut configs = Configs::new(packs::builtin()?, config)?;
    let mut metas: HashMap<(PathBuf, String), Option<PackMeta>> = HashMap::new();
    let mut at: HashMap<(&str, usize), Vec<&'static str>> = HashMap::new();
    for f in report.active() {
        at.entry((f.path.as_str(), f.line))
            .or_default()
            .push(f.rule);
    }
    let mut out = Vec::new();
    for s in &report.sites {
        let dir = cwd
            .join(&s.path)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let key = (dir.clone(), s.library.clone());
        if !metas.contains_key(&key) {
            // A config that fails here failed the analysis first; no pack info is not fatal.
            let meta = configs.for_dir(&dir).ok().and_then(|c| {
                c.packs
                    .packs
                    .iter()
                    .find(|p| p.pack.name == s.library)
                    .map(|p| p.pack.clone())
            });
            metas.insert(key.clone(), meta);
        }
        let meta = metas.get(&key).and_then(Option::as_ref);
        let findings = at
            .get(&(s.path.as_str(), s.line))
            .cloned()
            .unwrap_or_default();
        out.push(Row {
            site: s,
            backend: s
                .backend
                .clone()
                .or_else(|| meta.map(|m| m.backend.clone()))
                .filter(|b| !b.is_empty()),
            findings,
        });
    }
    Ok(out)
}

pub fn summary(rows: &[Row]) -> Summary {
    let mut s = Summary {
        sites: rows.len(),
        ..Default::default()
    };
    for r in rows {
        *s.by_purpose
            .entry(purpose(r.site.purpose).to_string())
            .or_default() += 1;
        *s.by_library.entry(r.site.library.clone()).or_default() += 1;
        if r.site.purpose == Purpose::Correctness && r.site.fencing == Fencing::None {
            s.unfenced_correctness
                .push(format!("{}:{}", r.site.path, r.site.line));
        }
    }
    s
}

/// `cwd` is where relative site paths are read from (the HTML page's snippets).
pub fn render(
    format: InventoryFormat,
    rows: &[Row],
    summary: &Summary,
    report: &Report,
    cwd: &Path,
) -> String {
    let errors = report.errors.as_slice();
    match format {
        InventoryFormat::Html => html::render(rows, summary, report, cwd),
        InventoryFormat::Json => {
            let mut s = serde_json::to_string_pretty(&JsonDoc {
                sites: rows,
                summary,
                errors,
            })
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            s.push('\n');
            s
        }
        InventoryFormat::Csv => {
            let mut s = String::new();
            push_csv(&mut s, &HEADER.map(String::from));
            for r in rows {
                push_csv(&mut s, &cells(r));
            }
            s
        }
        InventoryFormat::Markdown => markdown(rows, summary, errors),
    }
}

const HEADER: [&str; 16] = [
    "location",
    "function",
    "library",
    "via",
    "key",
    "purpose",
    "purpose source",
    "fenced by",
    "ttl",
    "fencing",
    "renewal",
    "release",
    "consensus",
    "backend",
    "findings",
    "test",
];

fn cells(r: &Row) -> [String; 16] {
    let s = r.site;
    [
        format!("{}:{}", s.path, s.line),
        s.function.clone().unwrap_or_default(),
        s.library.clone(),
        s.via.clone().unwrap_or_default(),
        s.key.clone().unwrap_or_default(),
        purpose(s.purpose).to_string(),
        enum_str(&s.purpose_source),
        s.fenced_by.clone().unwrap_or_default(),
        s.ttl_ms.map(ttl).unwrap_or_default(),
        enum_str(&s.fencing),
        enum_str(&s.renewal),
        enum_str(&s.release),
        if s.consensus { "yes" } else { "no" }.to_string(),
        r.backend.clone().unwrap_or_default(),
        r.findings.join(" "),
        if s.test { "yes" } else { "no" }.to_string(),
    ]
}

fn purpose(p: Purpose) -> &'static str {
    match p {
        Purpose::Efficiency => "efficiency",
        Purpose::Correctness => "correctness",
        Purpose::Unclassified => "unclassified",
    }
}

/// A unit enum's serde name (`kebab-case` in this crate).
fn enum_str<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

fn ttl(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

/// RFC 4180: quote fields holding a comma, quote or line break; double the quotes.
fn push_csv(out: &mut String, cells: &[String]) {
    let line: Vec<String> = cells
        .iter()
        .map(|c| {
            if c.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c.clone()
            }
        })
        .collect();
    out.push_str(&line.join(","));
    out.push_str("\r\n");
}

fn md_cell(c: &str) -> String {
    let c = c.replace('|', "\\|").replace(['\n', '\r'], " ");
    if c.is_empty() { "-".into() } else { c }
}

/// A code span for a table cell: a `|` ends the cell even inside backticks (GitHub's tables), so
/// it is escaped; a line break would end the row, so it is shown as `\n`.
fn md_code(c: &str) -> String {
    let c = c
        .replace('`', "'")
        .replace('|', "\\|")
        .replace('\n', "\\n")
        .replace('\r', "\\r");
    format!("`{c}`")
}

fn markdown(rows: &[Row], summary: &Summary, errors: &[FileError]) -> String {
    let mut s = String::from("# Lock inventory\n\n");
    if rows.is_empty() {
        s.push_str("No lock sites found.\n");
    } else {
        s.push_str(&format!("| {} |\n", HEADER.join(" | ")));
        s.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
        for r in rows {
            let cs: Vec<String> = cells(r)
                .iter()
                .enumerate()
                .map(|(i, c)| match i {
                    // Code-like cells in backticks, so that `*` and `_` stay literal.
                    0 | 1 | 3 | 4 if !c.is_empty() => md_code(c),
                    _ => md_cell(c),
                })
                .collect();
            s.push_str(&format!("| {} |\n", cs.join(" | ")));
        }
    }
    s.push_str(&format!(
        "\n## Summary\n\n{} lock sites.\n\n",
        summary.sites
    ));
    if !summary.by_purpose.is_empty() {
        s.push_str("| purpose | sites |\n|---|---|\n");
        for (p, n) in &summary.by_purpose {
            s.push_str(&format!("| {p} | {n} |\n"));
        }
        s.push_str("\n| library | sites |\n|---|---|\n");
        for (l, n) in &summary.by_library {
            s.push_str(&format!("| {} | {n} |\n", md_cell(l)));
        }
        s.push('\n');
    }
    if summary.unfenced_correctness.is_empty() {
        s.push_str("Correctness locks without fencing: none.\n");
    } else {
        s.push_str(&format!(
            "Correctness locks without fencing: {}\n\n",
            summary.unfenced_correctness.len()
        ));
        for l in &summary.unfenced_correctness {
            s.push_str(&format!("- {}\n", md_code(l)));
        }
    }
    if !errors.is_empty() {
        s.push_str("\n## Files not analysed\n\n");
        for e in errors {
            let at = e.line.map(|l| format!(":{l}")).unwrap_or_default();
            s.push_str(&format!(
                "- {}: {}\n",
                md_code(&format!("{}{at}", e.path)),
                md_cell(&e.message)
            ));
        }
    }
    s
}
