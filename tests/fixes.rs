//! Mechanical fixes: on a copy of `fixtures/`, every fix is applied, the fixed files still
//! parse, and a second analysis finds the fixed findings gone and nothing new. The fixtures
//! under `fixtures/fixes/` also pin which findings carry a fix and which do not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use lockaudit::cli::Format;
use lockaudit::commands::fix::Plan;
use lockaudit::engine;
use lockaudit::lints::Level;
use lockaudit::report::{Edit, Finding, Report};
use lockaudit::settings::CheckSettings;

fn settings(paths: Vec<PathBuf>) -> CheckSettings {
    CheckSettings {
        paths,
        format: Format::Json,
        fail_on: Some(Level::Warning),
        threads: 2,
        prefilter: true,
        cache_dir: None,
        ..CheckSettings::default()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("readable").flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

fn analyse(root: &Path) -> Report {
    let report = engine::check(&settings(vec![root.to_path_buf()]))
        .expect("the fixtures run")
        .report;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    report
}

/// Where a line of the original text is after the edits (only edits that end on or before it
/// move it).
fn moved(line: usize, edits: &[&Edit]) -> usize {
    let mut delta: isize = 0;
    for e in edits.iter().filter(|e| e.end_line <= line) {
        delta += e.replacement.matches('\n').count() as isize;
        delta -= (e.end_line - e.start_line) as isize;
    }
    (line as isize + delta) as usize
}

/// (path relative to the copy, line, rule) of findings with a fix under `fixtures/fixes/`.
const EXPECTED: &[(&str, usize, &str)] = &[
    ("fixes/release.rs", 13, "unchecked-release"),
    ("fixes/release.rs", 24, "unchecked-release"),
    ("fixes/release.rs", 92, "unchecked-release"),
    ("fixes/release.rs", 116, "unchecked-release"),
    ("fixes/renewal.rs", 14, "unchecked-renewal"),
    ("fixes/renewal.rs", 19, "unchecked-renewal"),
    ("fixes/renewal.rs", 23, "unchecked-release"),
    ("fixes/setnx.rs", 8, "missing-deadline"),
    ("fixes/setnx.rs", 13, "unchecked-release"),
    ("fixes/setnx.rs", 19, "missing-deadline"),
    ("fixes/setnx.rs", 27, "missing-deadline"),
];

#[test]
fn every_fix_removes_its_finding_and_adds_none() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("fixtures");
    copy_dir(Path::new("fixtures"), &root);
    let prefix = format!("{}/", root.to_string_lossy().replace('\\', "/"));
    let rel = |p: &str| p.strip_prefix(&prefix).unwrap_or(p).to_string();

    let before = analyse(&root);
    let fixed: Vec<&Finding> = before.active().filter(|f| f.fix.is_some()).collect();
    let in_fixes: BTreeSet<(String, usize, String)> = fixed
        .iter()
        .map(|f| (rel(&f.path), f.line, f.rule.to_string()))
        .filter(|(p, _, _)| p.starts_with("fixes/"))
        .collect();
    let expected: BTreeSet<(String, usize, String)> = EXPECTED
        .iter()
        .map(|(p, l, r)| (p.to_string(), *l, r.to_string()))
        .collect();
    assert_eq!(
        in_fixes, expected,
        "which findings of fixtures/fixes carry a fix"
    );

    let plan = Plan::of(&before);
    assert!(plan.skipped.is_empty(), "{:?}", plan.skipped);
    assert_eq!(plan.fixes, fixed.len(), "every fix fits");
    for (path, (old, new, _)) in &plan.files {
        assert_ne!(old, new);
        if let Err(e) = syn::parse_file(new) {
            panic!("{path} does not parse after its fixes: {e}\n{new}");
        }
    }
    assert_eq!(plan.write(), fixed.len());

    let after = analyse(&root);
    let mut problems = Vec::new();
    for path in plan.files.keys() {
        let edits: Vec<&Edit> = fixed
            .iter()
            .filter(|f| &f.path == path)
            .flat_map(|f| f.fix.iter().flat_map(|x| x.edits.iter()))
            .collect();
        let key = |f: &Finding| (f.rule, moved(f.line, &edits));
        let kept: BTreeMap<(&str, usize), &Finding> = before
            .active()
            .filter(|f| &f.path == path && f.fix.is_none())
            .map(|f| (key(f), f))
            .collect();
        let gone: BTreeSet<(&str, usize)> = fixed
            .iter()
            .filter(|f| &f.path == path)
            .map(|f| key(f))
            .collect();
        for f in after.active().filter(|f| &f.path == path) {
            let k = (f.rule, f.line);
            if gone.contains(&k) && !kept.contains_key(&k) {
                problems.push(format!(
                    "{}:{}: {} is still there",
                    rel(path),
                    f.line,
                    f.rule
                ));
            } else if !kept.contains_key(&k) {
                problems.push(format!(
                    "{}:{}: new {}: {}",
                    rel(path),
                    f.line,
                    f.rule,
                    f.message
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Nothing is left to fix.
    assert_eq!(Plan::of(&after).fixes, 0);
}

#[test]
fn a_file_changed_after_the_analysis_is_not_fixed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("release.rs");
    std::fs::copy("fixtures/fixes/release.rs", &file).expect("copy");
    let report = analyse(tmp.path());
    assert!(Plan::of(&report).fixes > 0, "the fixture has fixes");
    let edited = std::fs::read_to_string(&file).expect("read") + "\n// edited\n";
    std::fs::write(&file, &edited).expect("write");
    let plan = Plan::of(&report);
    assert_eq!((plan.fixes, plan.files.len()), (0, 0));
    assert!(
        plan.skipped
            .iter()
            .any(|s| s.contains("changed since it was analysed")),
        "{:?}",
        plan.skipped
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), edited);
}
