//! `check --fix` and `check --diff`: the findings' mechanical fixes applied to the files they
//! were found in. A file is changed only when it still holds exactly the text that was analysed;
//! a fix whose edits overlap one already taken in the same file waits for the next run; a file
//! that would no longer parse is left as it is.

use std::collections::BTreeMap;
use std::path::Path;

use crate::report::{Edit, Finding, Fix, Report};

/// What the fixes of a report do to each file.
#[derive(Debug, Default)]
pub struct Plan {
    /// Display path -> (text as analysed, text with the fixes, fixes taken in it).
    pub files: BTreeMap<String, (String, String, usize)>,
    /// Fixes taken.
    pub fixes: usize,
    /// Why a fix or a file was left out, one line each.
    pub skipped: Vec<String>,
}

impl Plan {
    /// The fixes of the report's unsuppressed findings.
    pub fn of(report: &Report) -> Plan {
        let mut by_file: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
        for f in report.active().filter(|f| f.fix.is_some()) {
            by_file.entry(&f.path).or_default().push(f);
        }
        let mut plan = Plan::default();
        for (path, findings) in by_file {
            let Some(analysed) = report.sources.get(path) else {
                plan.skipped.push(format!(
                    "{path}: its analysed text is not at hand; not fixed"
                ));
                continue;
            };
            match std::fs::read(Path::new(path)) {
                Ok(now) if now == analysed.as_bytes() => {}
                Ok(_) => {
                    plan.skipped
                        .push(format!("{path}: changed since it was analysed; not fixed"));
                    continue;
                }
                Err(e) => {
                    plan.skipped.push(format!("{path}: cannot read: {e}"));
                    continue;
                }
            }
            let fixes: Vec<(&Finding, &Fix)> = findings
                .iter()
                .filter_map(|f| Some((*f, f.fix.as_ref()?)))
                .collect();
            let (new, taken, notes) = apply(analysed, &fixes);
            plan.skipped
                .extend(notes.into_iter().map(|n| format!("{path}: {n}")));
            if taken == 0 {
                continue;
            }
            if let Err(e) = syn::parse_file(&new) {
                plan.skipped.push(format!(
                    "{path}: the fixed text would not parse ({e}); not fixed"
                ));
                continue;
            }
            plan.fixes += taken;
            plan.files
                .insert(path.to_string(), (analysed.to_string(), new, taken));
        }
        plan
    }

    /// The changes as one unified diff, file by file.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for (path, (old, new, _)) in &self.files {
            let diff = similar::TextDiff::from_lines(old.as_str(), new.as_str());
            out.push_str(
                &diff
                    .unified_diff()
                    .context_radius(3)
                    .header(&format!("a/{path}"), &format!("b/{path}"))
                    .to_string(),
            );
        }
        out
    }

    /// Writes the fixed files; returns the fixes written. A file that cannot be written is
    /// reported on standard error and its fixes are not counted.
    pub fn write(&self) -> usize {
        let mut written = 0;
        for (path, (_, new, n)) in &self.files {
            match std::fs::write(Path::new(path), new) {
                Ok(()) => written += n,
                Err(e) => eprintln!("lockaudit: {path}: cannot write: {e}"),
            }
        }
        written
    }
}

/// Applies the fixes that fit (in order of their first edit; one that overlaps an edit already
/// taken is left for the next run). Returns the text, how many fixes were taken, and notes.
fn apply(text: &str, fixes: &[(&Finding, &Fix)]) -> (String, usize, Vec<String>) {
    let mut ordered: Vec<&(&Finding, &Fix)> = fixes.iter().collect();
    ordered.sort_by_key(|(f, fix)| (fix.edits.first().map(|e| e.start), f.line, f.column));
    let mut taken: Vec<&Edit> = Vec::new();
    let mut count = 0;
    let mut notes = Vec::new();
    for (finding, fix) in ordered {
        let valid = fix.edits.windows(2).all(|w| w[0].end <= w[1].start)
            && fix.edits.iter().all(|e| {
                e.start <= e.end
                    && e.end <= text.len()
                    && text.is_char_boundary(e.start)
                    && text.is_char_boundary(e.end)
            });
        let overlaps = fix
            .edits
            .iter()
            .any(|e| taken.iter().any(|t| e.start < t.end && t.start < e.end));
        if !valid || overlaps {
            notes.push(format!(
                "{}:{}: {}: fix left for another run ({})",
                finding.line,
                finding.column,
                finding.rule,
                if valid {
                    "it overlaps another fix"
                } else {
                    "its edits do not fit the file"
                }
            ));
            continue;
        }
        taken.extend(fix.edits.iter());
        count += 1;
    }
    taken.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for e in taken {
        out.push_str(&text[at..e.start]);
        out.push_str(&e.replacement);
        at = e.end;
    }
    out.push_str(&text[at..]);
    (out, count, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(start: usize, end: usize, r: &str) -> Edit {
        Edit {
            start,
            end,
            start_line: 1,
            start_column: start,
            end_line: 1,
            end_column: end,
            replacement: r.into(),
        }
    }

    fn finding(line: usize) -> Finding {
        Finding {
            rule: "unchecked-release",
            severity: crate::lints::Level::Error,
            path: "x.rs".into(),
            line,
            column: 1,
            end_line: line,
            end_column: 2,
            message: String::new(),
            help: String::new(),
            fingerprint: String::new(),
            suppressed: false,
            suppression_reason: None,
            line_text: String::new(),
            context: String::new(),
            utf16: (1, 2),
            fix: None,
        }
    }

    #[test]
    fn edits_apply_back_to_front_and_overlaps_wait() {
        let text = "abcdefghij";
        let a = Fix {
            message: "a".into(),
            edits: vec![edit(0, 2, "AB"), edit(8, 10, "")],
        };
        let b = Fix {
            message: "b".into(),
            edits: vec![edit(4, 6, "x")],
        };
        // Overlaps `b`'s edit: left out.
        let c = Fix {
            message: "c".into(),
            edits: vec![edit(5, 7, "y")],
        };
        let (f1, f2, f3) = (finding(1), finding(2), finding(3));
        let (out, n, notes) = apply(text, &[(&f1, &a), (&f2, &b), (&f3, &c)]);
        assert_eq!(out, "ABcdxgh");
        assert_eq!(n, 2);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("overlaps"), "{notes:?}");
    }

    #[test]
    fn edits_outside_the_text_are_refused() {
        let f = finding(1);
        let bad = Fix {
            message: "bad".into(),
            edits: vec![edit(3, 99, "")],
        };
        let (out, n, notes) = apply("short", &[(&f, &bad)]);
        assert_eq!((out.as_str(), n), ("short", 0));
        assert!(notes[0].contains("do not fit"));
    }
}
