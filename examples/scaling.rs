//! How the cost of one run grows with input shapes that used to cost the square of their size:
//! for each shape, the time and peak memory of a run at N and at 4N, and their ratios. A linear
//! path shows ratios near 4 (less while fixed costs dominate), a quadratic one near 16.
//!
//! ```text
//! cargo run --release --example scaling            # every shape
//! cargo run --release --example scaling -- SHAPE N # one run, prints "seconds peak-KB"
//! ```
//!
//! Each run is a child process of its own, so that its peak memory is its own. This prints
//! numbers; it asserts nothing (the tests hold structure, never wall time).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use lockaudit::engine;
use lockaudit::settings::CheckSettings;

const LOCK: &str = "mgr.lock(b\"k\", Duration::from_secs(10)).await";
const HDR: &str = "use rslock::LockManager;\nuse std::time::Duration;\n\n";

/// (shape, N, what N counts).
const SHAPES: &[(&str, usize, &str)] = &[
    (
        "ifelse-locks",
        100,
        "else-if branches on one line, a lock in each",
    ),
    ("nested-if", 100, "nested ifs, a lock inside"),
    ("acquisitions", 500, "acquisitions in one function"),
    ("directives", 2000, "annotated functions in one file"),
    ("classify", 5000, "[[classify]] entries"),
    ("big-file", 4, "MB of generated functions in one file"),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [shape, n] = args.as_slice() {
        let n: usize = n.parse().expect("N is a number");
        let (secs, kb, bytes) = one(shape, n);
        println!("{secs:.3} {kb} {bytes}");
        return;
    }
    println!(
        "{:<14} {:>7} {:>9} {:>9} {:>10} {:>10} {:>6} {:>6}  what N counts",
        "shape", "N", "t(N) s", "t(4N) s", "rss(N) MB", "rss(4N) MB", "t x", "rss x"
    );
    for &(shape, n, what) in SHAPES {
        let (t1, m1, _) = child(shape, n);
        let (t4, m4, bytes) = child(shape, 4 * n);
        let mut line = format!(
            "{shape:<14} {n:>7} {t1:>9.3} {t4:>9.3} {:>10.1} {:>10.1} {:>6.1} {:>6.1}  {what}",
            m1 as f64 / 1024.0,
            m4 as f64 / 1024.0,
            t4 / t1.max(1e-9),
            m4 as f64 / (m1 as f64).max(1.0),
        );
        if shape == "big-file" {
            let _ = write!(
                line,
                " (peak memory {:.1}x the {:.1} MB file)",
                m4 as f64 * 1024.0 / bytes as f64,
                bytes as f64 / 1e6
            );
        }
        println!("{line}");
    }
}

fn child(shape: &str, n: usize) -> (f64, u64, u64) {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .args([shape, &n.to_string()])
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let mut next = || parts.next().unwrap_or("0").to_string();
    (
        next().parse().unwrap_or(0.0),
        next().parse().unwrap_or(0),
        next().parse().unwrap_or(0),
    )
}

/// One run over a generated crate: its time, the process's peak RSS and the input's size.
fn one(shape: &str, n: usize) -> (f64, u64, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"scaling\"\nversion = \"0.0.0\"\n",
    )
    .expect("write");
    let text = generate(shape, n, dir.path());
    let bytes = text.len() as u64;
    std::fs::write(src.join("lib.rs"), text).expect("write");
    let settings = CheckSettings {
        paths: vec![dir.path().to_path_buf()],
        threads: 1,
        ..Default::default()
    };
    let start = Instant::now();
    let o = engine::check(&settings).expect("runs");
    let secs = start.elapsed().as_secs_f64();
    assert!(o.report.errors.is_empty(), "{:?}", o.report.errors);
    (secs, peak_rss_kb(), bytes)
}

fn generate(shape: &str, n: usize, root: &Path) -> String {
    let func = |body: String| format!("{HDR}pub async fn f(mgr: &LockManager) {{\n{body}\n}}\n");
    match shape {
        "ifelse-locks" => func(format!(
            "    let x = 0;\n    {}{{ }}",
            (0..n)
                .map(|i| format!("if x == {i} {{ let _l = {LOCK}; }} else "))
                .collect::<String>()
        )),
        "nested-if" => func(format!(
            "    let x = 0;\n{}let _l = {LOCK};\n{}",
            (0..n).map(|i| format!("if x == {i} {{\n")).collect::<String>(),
            "}\n".repeat(n)
        )),
        "acquisitions" => func(
            (0..n)
                .map(|i| {
                    format!(
                        "    let l{i} = mgr.lock(b\"k{i}\", Duration::from_secs(10)).await.unwrap();\n    mgr.unlock(&l{i}).await;\n"
                    )
                })
                .collect(),
        ),
        "directives" => {
            let mut s = HDR.to_string();
            for i in 0..n {
                let _ = writeln!(
                    s,
                    "// lockaudit: efficiency\npub async fn f{i}(mgr: &LockManager) {{\n    let l = {LOCK}.unwrap();\n    mgr.unlock(&l).await;\n}}"
                );
            }
            s
        }
        "classify" => {
            let mut toml = String::new();
            for i in 0..n {
                let _ = writeln!(
                    toml,
                    "[[classify]]\nfunction = \"jobs::f{i}\"\npurpose = \"efficiency\"\n"
                );
            }
            std::fs::write(root.join("lockaudit.toml"), toml).expect("write");
            let mut s = HDR.to_string();
            for i in 0..100 {
                let _ = writeln!(
                    s,
                    "pub async fn f{i}(mgr: &LockManager) {{\n    let l = {LOCK}.unwrap();\n    mgr.unlock(&l).await;\n}}"
                );
            }
            s
        }
        "big-file" => {
            let mut s = HDR.to_string();
            let mut i = 0;
            while s.len() < n << 20 {
                let _ = writeln!(
                    s,
                    "/// Job {i}.\npub async fn job{i}(mgr: &LockManager, rows: &[u64]) -> u64 {{\n    let l = mgr.lock(b\"job{i}\", Duration::from_secs({})).await.unwrap();\n    let mut total = 0;\n    for r in rows {{\n        if *r > {i} {{ total += r * 2; }} else {{ total += 1; }}\n    }}\n    mgr.unlock(&l).await;\n    total\n}}",
                    10 + i % 100
                );
                i += 1;
            }
            s
        }
        other => panic!("unknown shape {other}"),
    }
}

/// The process's peak resident memory (Linux: VmHWM), in KB; 0 where unknown.
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
