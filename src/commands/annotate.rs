//! `lockaudit annotate`: writes `// lockaudit: <purpose>` on the line above the statement of each
//! unclassified site, with the statement's indentation (so rustfmt leaves it alone). Only comment
//! lines are inserted; a file is written only when it still parses and its token stream is
//! unchanged.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use quote::ToTokens;
use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::classify::Purpose;
use crate::cli::{AnnotateArgs, AnnotatePurpose};
use crate::diag::ToolError;
use crate::engine;
use crate::report::SiteRecord;

impl AnnotatePurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            AnnotatePurpose::Efficiency => "efficiency",
            AnnotatePurpose::Correctness => "correctness",
        }
    }
}

/// What happened, for the summary line and the exit status.
#[derive(Debug, Default)]
pub struct Outcome {
    pub annotated: usize,
    pub files: usize,
    pub skipped_files: usize,
    /// `--dry-run`: the unified diff of every file that would change.
    pub diff: String,
}

pub fn run(a: AnnotateArgs) -> Result<Outcome, ToolError> {
    if a.interactive && !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Err(ToolError::Usage(
            "--interactive needs a terminal; use --purpose efficiency|correctness in scripts"
                .into(),
        ));
    }
    let settings = super::analysis_settings(super::Analysis {
        paths: a.paths.clone(),
        config: a.config.clone(),
        manifest_path: a.manifest_path.clone(),
        threads: None,
        verbose: a.verbose,
        cache_dir: (!a.no_cache).then(|| a.cache_dir.clone()),
    })?;
    let outcome = engine::check(&settings)?;
    if a.verbose {
        super::print_verbose(&outcome);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| ToolError::Usage(format!("cannot read the current directory: {e}")))?;
    // The primitive inside a wrapper is judged at the wrapper's call sites: not annotated.
    let mut by_file: BTreeMap<&str, Vec<&SiteRecord>> = BTreeMap::new();
    for s in &outcome.report.sites {
        if s.purpose == Purpose::Unclassified && !s.wrapped {
            by_file.entry(s.path.as_str()).or_default().push(s);
        }
    }
    let mut result = Outcome::default();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut stderr = std::io::stderr();
    'files: for (display, sites) in by_file {
        let abs = cwd.join(display);
        let Ok(text) = crate::read::text(&abs, crate::read::Kind::Source) else {
            eprintln!("lockaudit: {display}: cannot read; not annotated");
            result.skipped_files += 1;
            continue;
        };
        let Some(stmts) = statement_lines(&text, &sites) else {
            eprintln!("lockaudit: {display}: does not parse; not annotated");
            result.skipped_files += 1;
            continue;
        };
        let mut inserts: BTreeMap<usize, &'static str> = BTreeMap::new();
        // One question per statement, however many sites it holds.
        let mut seen = std::collections::HashSet::new();
        for (line, at) in &stmts {
            let Some(line) = line else {
                eprintln!(
                    "lockaudit: {display}:{}: no statement holds this site; annotate it by hand",
                    at.line
                );
                continue;
            };
            if !seen.insert(*line) {
                continue;
            }
            let purpose = match a.purpose {
                Some(p) => p,
                None => {
                    let together: Vec<&SiteRecord> = stmts
                        .iter()
                        .filter(|(l, _)| l == &Some(*line))
                        .map(|(_, s)| *s)
                        .collect();
                    match ask(&mut input, &mut stderr, display, &text, *line, &together) {
                        Answer::Purpose(p) => p,
                        Answer::Skip => continue,
                        Answer::Quit => {
                            if !inserts.is_empty() {
                                write_file(&a, display, &abs, &text, &inserts, &mut result);
                            }
                            break 'files;
                        }
                    }
                }
            };
            inserts.insert(*line, purpose.as_str());
        }
        if !inserts.is_empty() {
            write_file(&a, display, &abs, &text, &inserts, &mut result);
        }
    }
    Ok(result)
}

fn write_file(
    a: &AnnotateArgs,
    display: &str,
    abs: &Path,
    text: &str,
    inserts: &BTreeMap<usize, &'static str>,
    result: &mut Outcome,
) {
    let new = insert_comments(text, inserts);
    if !same_tokens(text, &new) {
        eprintln!("lockaudit: {display}: annotating would change its code; not annotated");
        result.skipped_files += 1;
        return;
    }
    if a.dry_run {
        let diff = similar::TextDiff::from_lines(text, &new);
        result.diff.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{display}"), &format!("b/{display}"))
                .to_string(),
        );
    } else if let Err(e) = std::fs::write(abs, &new) {
        eprintln!("lockaudit: {display}: cannot write: {e}");
        result.skipped_files += 1;
        return;
    }
    result.annotated += inserts.len();
    result.files += 1;
}

/// For each site, the first line of the innermost statement holding it (`None`: none does, e.g. a
/// `const` initialiser). `None` overall when the file does not parse.
pub fn statement_lines<'s>(
    text: &str,
    sites: &[&'s SiteRecord],
) -> Option<Vec<(Option<usize>, &'s SiteRecord)>> {
    // A file nesting too deeply to parse safely was not analysed; it has no sites to annotate.
    if crate::lex::too_deep(text).is_some() {
        return None;
    }
    let file = syn::parse_file(text).ok()?;
    let out = sites
        .iter()
        .map(|s| {
            let mut f = Finder {
                target: (s.line, s.column.saturating_sub(1)),
                depth: 0,
                best: None,
            };
            f.visit_file(&file);
            (f.best.map(|(_, line)| line), *s)
        })
        .collect();
    Some(out)
}

struct Finder {
    /// 1-based line, 0-based character column (proc-macro2's convention).
    target: (usize, usize),
    depth: usize,
    /// (block depth, first line) of the innermost statement holding the target so far.
    best: Option<(usize, usize)>,
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.depth += 1;
        for stmt in &b.stmts {
            let span = stmt.span();
            let (start, end) = (span.start(), span.end());
            if (start.line, start.column) <= self.target
                && self.target < (end.line, end.column)
                && self.best.is_none_or(|(d, _)| self.depth >= d)
            {
                self.best = Some((self.depth, start.line));
            }
        }
        syn::visit::visit_block(self, b);
        self.depth -= 1;
    }
}

/// Inserts `// lockaudit: <purpose>` above each given 1-based line, indented like it, with the
/// file's line ending.
pub fn insert_comments(text: &str, inserts: &BTreeMap<usize, &str>) -> String {
    let mut out = String::with_capacity(text.len() + inserts.len() * 32);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if let Some(purpose) = inserts.get(&(i + 1)) {
            let indent: String = line
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect();
            let eol = if line.ends_with("\r\n") { "\r\n" } else { "\n" };
            out.push_str(&format!("{indent}// lockaudit: {purpose}{eol}"));
        }
        out.push_str(line);
    }
    out
}

/// Do both texts parse to the same tokens (comments are not tokens; doc comments are)?
pub fn same_tokens(old: &str, new: &str) -> bool {
    if crate::lex::too_deep(old).is_some() || crate::lex::too_deep(new).is_some() {
        return false;
    }
    match (syn::parse_file(old), syn::parse_file(new)) {
        (Ok(a), Ok(b)) => a.to_token_stream().to_string() == b.to_token_stream().to_string(),
        _ => false,
    }
}

#[derive(Debug, PartialEq)]
pub enum Answer {
    Purpose(AnnotatePurpose),
    Skip,
    Quit,
}

/// Shows a statement's sites with five lines of context and asks until it gets an answer. End of
/// input is `quit`.
pub fn ask(
    input: &mut impl BufRead,
    out: &mut impl Write,
    display: &str,
    text: &str,
    stmt_line: usize,
    sites: &[&SiteRecord],
) -> Answer {
    let lines: Vec<&str> = text.lines().collect();
    let _ = writeln!(out);
    for s in sites {
        let _ = writeln!(
            out,
            "{display}:{}:{}: {} `{}`{}{}",
            s.line,
            s.column,
            s.library,
            s.api,
            s.function
                .as_deref()
                .map(|f| format!(" in {f}"))
                .unwrap_or_default(),
            s.key
                .as_deref()
                .map(|k| format!(", key {k:?}"))
                .unwrap_or_default()
        );
    }
    let last = sites.iter().map(|s| s.line).max().unwrap_or(stmt_line);
    let from = stmt_line.saturating_sub(3).max(1);
    let to = (last + 2).min(lines.len());
    for n in from..=to {
        let mark = if (stmt_line..=last).contains(&n) {
            '>'
        } else {
            ' '
        };
        let _ = writeln!(
            out,
            "{mark}{n:>5} | {}",
            lines.get(n - 1).copied().unwrap_or("")
        );
    }
    loop {
        let _ = write!(
            out,
            "purpose: [e]fficiency (double execution only wastes work), [c]orrectness (it corrupts state), [s]kip, [q]uit? "
        );
        let _ = out.flush();
        let mut answer = String::new();
        match input.read_line(&mut answer) {
            Ok(0) | Err(_) => return Answer::Quit,
            Ok(_) => {}
        }
        match answer.trim().to_ascii_lowercase().as_str() {
            "e" | "efficiency" => return Answer::Purpose(AnnotatePurpose::Efficiency),
            "c" | "correctness" => return Answer::Purpose(AnnotatePurpose::Correctness),
            "s" | "skip" | "" => return Answer::Skip,
            "q" | "quit" => return Answer::Quit,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_keeps_indentation_and_crlf() {
        let text = "fn f() {\r\n    let a = 1;\r\n}\r\n";
        let new = insert_comments(text, &BTreeMap::from([(2, "efficiency")]));
        assert_eq!(
            new,
            "fn f() {\r\n    // lockaudit: efficiency\r\n    let a = 1;\r\n}\r\n"
        );
        assert!(same_tokens(text, &new));
    }

    #[test]
    fn ask_reads_answers_and_retries() {
        let site = SiteRecord {
            path: "a.rs".into(),
            line: 2,
            column: 5,
            library: "rslock".into(),
            api: "LockManager::lock".into(),
            kind: crate::packs::CallKind::Acquire,
            purpose: Purpose::Unclassified,
            purpose_source: crate::classify::PurposeSource::Default,
            fenced_by: None,
            ttl_ms: None,
            fencing: crate::sites::Fencing::None,
            function: Some("run".into()),
            key: Some("k".into()),
            via: None,
            release: crate::packs::ReleaseStyle::Explicit,
            consensus: false,
            backend: None,
            renewal: crate::report::Renewal::None,
            wrapped: false,
            test: false,
            gated: false,
        };
        let text = "fn run() {\n    let l = m.lock();\n}\n";
        let mut out = Vec::new();
        let mut input = &b"x\nc\n"[..];
        assert_eq!(
            ask(&mut input, &mut out, "a.rs", text, 2, &[&site]),
            Answer::Purpose(AnnotatePurpose::Correctness)
        );
        let shown = String::from_utf8_lossy(&out);
        assert!(shown.contains(">    2 |     let l = m.lock();"), "{shown}");
        assert!(shown.contains("a.rs:2:5: rslock"), "{shown}");
        let mut input = &b"s\n"[..];
        assert_eq!(
            ask(&mut input, &mut Vec::new(), "a.rs", text, 2, &[&site]),
            Answer::Skip
        );
        let mut input = &b""[..];
        assert_eq!(
            ask(&mut input, &mut Vec::new(), "a.rs", text, 2, &[&site]),
            Answer::Quit
        );
    }
}
