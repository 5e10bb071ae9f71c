//! Inputs that used to abort the whole run: deep nesting of every kind. A file nesting too
//! deeply gets an error naming it, and the other files' findings are still reported; a file
//! just within the limit is analysed, without overflowing a worker's stack.

use std::path::{Path, PathBuf};

use lockaudit::engine;
use lockaudit::settings::CheckSettings;

const KINDS: &[&str] = &[
    "types",
    "blocks",
    "parens",
    "closures_lock",
    "ifelse",
    "chain",
    "mods",
];

/// The shapes of the reproducers (`deep_nesting/gen.py`), `n` levels deep.
fn generate(kind: &str, n: usize) -> String {
    let hdr = "use rslock::LockManager;\nuse std::time::Duration;\n\n";
    let lock = "let _l = mgr.lock(b\"k\", Duration::from_secs(10)).await;";
    let func = |body: String| format!("{hdr}pub async fn f(mgr: &LockManager) {{\n{body}\n}}\n");
    match kind {
        "types" => func(format!(
            "    {lock}\n    let _x: {}u8{} = None;",
            "Option<".repeat(n),
            ">".repeat(n)
        )),
        "blocks" => func(format!("{}{lock}{}", "{".repeat(n), "}".repeat(n))),
        "parens" => func(format!(
            "    {lock}\n    let _x = {}1{};",
            "(".repeat(n),
            ")".repeat(n)
        )),
        "closures_lock" => func(format!(
            "    let _c = {}{lock}{};",
            "|| async move {".repeat(n),
            "}".repeat(n)
        )),
        "ifelse" => func(format!(
            "    {lock}\n    let x = 0;\n    {}{{ }}",
            (0..n)
                .map(|i| format!("if x == {i} {{ drop(1) }} else "))
                .collect::<String>()
        )),
        "chain" => format!(
            "pub fn f(con: &mut redis::Connection) {{\n    let _: bool = redis::cmd(\"SET\").arg(\"lock:k\").arg(\"v\").arg(\"NX\"){}.query(con).unwrap();\n}}\n",
            (0..n).map(|i| format!(".arg({i})")).collect::<String>()
        ),
        "mods" => format!(
            "{}\n{hdr}pub async fn f(mgr: &LockManager) {{{lock}}}\n{}",
            "mod m {".repeat(n),
            "}".repeat(n)
        ),
        _ => unreachable!("unknown kind {kind}"),
    }
}

/// The deepest `n` of a kind that the pre-parse check accepts.
fn largest_accepted(kind: &str) -> usize {
    let ok =
        |n: usize| lockaudit::lex::nesting(&generate(kind, n)).depth <= lockaudit::lex::MAX_NESTING;
    let (mut lo, mut hi) = (1, 100_000);
    assert!(
        ok(lo) && !ok(hi),
        "{kind}: 1 level is accepted, 100,000 are not"
    );
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if ok(mid) { lo = mid } else { hi = mid }
    }
    lo
}

const GOOD: &str = "use rslock::LockManager;\nuse std::time::Duration;\n\n// lockaudit: efficiency\npub async fn g(mgr: &LockManager) -> Result<(), rslock::LockError> {\n    let l = mgr.lock(b\"good\", Duration::from_secs(600)).await?;\n    mgr.unlock(&l).await;\n    Ok(())\n}\n";

/// Runs the engine on a folder with the deep file among good ones.
fn run(deep: &str) -> (lockaudit::report::Report, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("good{i}.rs")), GOOD).expect("write");
    }
    let path = dir.path().join("deep.rs");
    std::fs::write(&path, deep).expect("write");
    let settings = CheckSettings {
        paths: vec![dir.path().to_path_buf()],
        threads: 2,
        prefilter: true,
        ..Default::default()
    };
    let o = engine::check(&settings).expect("the run completes");
    (o.report, path, dir)
}

fn is(display: &str, file: &Path) -> bool {
    file.file_name()
        .is_some_and(|n| display.ends_with(&*n.to_string_lossy()))
}

fn good_findings_reported(report: &lockaudit::report::Report) {
    for i in 0..3 {
        let name = format!("good{i}.rs");
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.path.ends_with(&name) && f.rule == "long-deadline"),
            "{name}'s finding is reported: {:?}",
            report.findings
        );
    }
}

#[test]
fn too_deep_files_get_an_error_and_the_run_goes_on() {
    for kind in KINDS {
        let (report, deep, _dir) = run(&generate(kind, 100_000));
        let errors: Vec<_> = report
            .errors
            .iter()
            .filter(|e| is(&e.path, &deep))
            .collect();
        assert_eq!(errors.len(), 1, "{kind}: {:?}", report.errors);
        assert!(
            errors[0].message.contains("nesting too deep to analyse"),
            "{kind}: {}",
            errors[0].message
        );
        assert!(errors[0].line.is_some(), "{kind}: the place is named");
        assert!(
            !report.sites.iter().any(|s| is(&s.path, &deep)),
            "{kind}: nothing is reported from a file not analysed"
        );
        good_findings_reported(&report);
    }
}

#[test]
fn the_deepest_accepted_files_are_analysed_without_overflow() {
    for kind in KINDS {
        let n = largest_accepted(kind);
        // Deep enough to matter: the kinds crashed at 1,300 to 100,000 levels before.
        assert!(n >= 400, "{kind}: only {n} levels accepted");
        let (report, deep, _dir) = run(&generate(kind, n));
        assert!(
            !report.errors.iter().any(|e| is(&e.path, &deep)),
            "{kind} at {n} levels: {:?}",
            report.errors
        );
        assert!(
            report.sites.iter().any(|s| is(&s.path, &deep)),
            "{kind} at {n} levels: its lock site is found"
        );
        good_findings_reported(&report);
        // One level more is refused.
        let (report, deep, _dir) = run(&generate(kind, n + 1));
        assert!(
            report.errors.iter().any(|e| is(&e.path, &deep)),
            "{kind} at {} levels is refused",
            n + 1
        );
    }
}

#[test]
fn threads_are_capped_with_a_clear_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args([
            "check",
            "--threads",
            "100000",
            "--no-cache",
            "fixtures/negatives",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--threads 100000 is more than the 256"),
        "{err}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args([
            "check",
            "--threads",
            "256",
            "--no-cache",
            "fixtures/negatives",
        ])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
