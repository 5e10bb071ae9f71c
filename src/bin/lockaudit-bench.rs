//! `lockaudit-bench DIR [--threads N]`: how lockaudit's speed compares, in one run on the same
//! files, with a bare "read + syn::parse_file every file" pass; how it scales with the corpus and
//! with threads; what a warm cache buys; its peak memory; and whether the shortcuts (prefilter,
//! cache) change any result. `lockaudit-bench --generate DIR --crates N --files M` writes a
//! synthetic corpus.
//!
//! Times are wall-clock seconds of child `lockaudit check` processes (the real binary, end to
//! end) and of the in-process parse pass; ratios are what the goals are stated in.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use rayon::prelude::*;

fn usage() -> ! {
    eprintln!(
        "usage: lockaudit-bench DIR [--threads N] [--runs N]\n       lockaudit-bench --generate DIR [--crates N] [--files M] [--seed S]"
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(MEASURE) {
        measure(&args[1..]);
    }
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let num = |name: &str, default: usize| {
        flag(name).map_or(default, |v| v.parse().unwrap_or_else(|_| usage()))
    };
    if let Some(dir) = flag("--generate") {
        let n = lockaudit::corpus::generate(
            Path::new(&dir),
            num("--crates", 20),
            num("--files", 100),
            num("--seed", 1) as u64,
        )
        .unwrap_or_else(|e| {
            eprintln!("cannot write the corpus: {e}");
            std::process::exit(2)
        });
        println!("wrote {n} files under {dir}");
        return;
    }
    let Some(dir) = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
    else {
        usage()
    };
    let threads = num("--threads", 2);
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("lockaudit")))
        .filter(|p| p.exists());
    let Some(exe) = exe else {
        eprintln!("build the lockaudit binary next to this one first (cargo build --release)");
        std::process::exit(2)
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let files = match lockaudit::discover::discover(std::slice::from_ref(&dir), &cwd, threads) {
        Ok(d) => d.files,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2)
        }
    };
    let paths: Vec<PathBuf> = files.iter().map(|f| f.abs.clone()).collect();
    let (bytes, lines) = paths.iter().fold((0usize, 0usize), |(b, l), p| {
        let t = std::fs::read(p).unwrap_or_default();
        (b + t.len(), l + t.iter().filter(|&&c| c == b'\n').count())
    });
    println!(
        "corpus: {} ({} files, {:.1} MB, {} lines); {} threads",
        dir.display(),
        paths.len(),
        bytes as f64 / 1e6,
        lines,
        threads
    );

    // The bare pass: read and parse every file with syn, same thread count, nothing else.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .stack_size(64 << 20)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        });
    let t = Instant::now();
    let parsed: usize = pool.install(|| {
        paths
            .par_iter()
            .map(|p| {
                let ok = std::fs::read_to_string(p)
                    .ok()
                    .map(|t| syn::parse_file(&t).is_ok())
                    .unwrap_or(false);
                proc_macro2::extra::invalidate_current_thread_spans();
                usize::from(ok)
            })
            .sum()
    });
    let bare = t.elapsed().as_secs_f64();
    println!(
        "bare read + syn::parse_file: {bare:.2} s ({:.0} lines/s; {parsed} files parse)",
        lines as f64 / bare
    );

    let tmp = std::env::temp_dir().join(format!("lockaudit-bench-{}", std::process::id()));
    // Each timed configuration runs `runs` times; the median is reported, against noise from
    // whatever else the machine does.
    let runs = num("--runs", 3).max(1);
    let run = |extra: &[&str], targets: &[PathBuf], t: usize, n: usize| -> Run {
        median(
            (0..n)
                .map(|_| run_check(&exe, extra, targets, t, &tmp))
                .collect(),
        )
    };
    let whole = std::slice::from_ref(&dir);
    // One untimed run first, so that every timed run finds the same warm page cache.
    run(&["--no-cache"], whole, threads, 1);
    let cold = run(&["--no-cache"], whole, threads, runs);
    let one = run(&["--no-cache"], whole, 1, runs);
    let full = run(&["--no-cache", "--no-prefilter"], whole, threads, 1);
    // Cold and warm alternate: each cold run starts from an empty cache directory.
    let cache_dir = tmp.join("cache");
    let cache_arg = cache_dir.to_string_lossy().into_owned();
    let (mut firsts, mut warms) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let _ = std::fs::remove_dir_all(&cache_dir);
        firsts.push(run(&["--cache-dir", &cache_arg], whole, threads, 1));
        warms.push(run(&["--cache-dir", &cache_arg], whole, threads, 1));
    }
    let first = median(firsts);
    let warm = median(warms);
    // Scaling: a quarter and a half of the corpus, drawn as every 4th and every 2nd file so that
    // each keeps the corpus's mix of code. (Whole crates are shown too, for information: there
    // the time follows how many lock-relevant files the chosen crates happen to hold.)
    let every_file = |n: usize| -> Vec<PathBuf> { paths.iter().step_by(n).cloned().collect() };
    let (q, h) = (every_file(4), every_file(2));
    let quarter = run(&["--no-cache"], &q, threads, runs);
    let half = run(&["--no-cache"], &h, threads, runs);
    let quarter_lines = count_lines(&q);
    let half_lines = count_lines(&h);
    let mut tops: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    tops.sort();
    let every_crate = |n: usize| -> Vec<PathBuf> { tops.iter().step_by(n).cloned().collect() };
    let (qc, hc) = (every_crate(4), every_crate(2));
    let quarter_crates = run(&["--no-cache"], &qc, threads, runs);
    let half_crates = run(&["--no-cache"], &hc, threads, runs);
    let quarter_crate_lines = count_lines(&qc);
    let half_crate_lines = count_lines(&hc);
    let _ = std::fs::remove_dir_all(&tmp);

    println!();
    println!(
        "{:<44} {:>9} {:>12} {:>10}",
        "run", "seconds", "lines/s", "peak MB"
    );
    for (name, r, l) in [
        ("lockaudit check (prefilter, no cache)", &cold, lines),
        ("lockaudit check, 1 thread", &one, lines),
        ("lockaudit check --no-prefilter", &full, lines),
        ("lockaudit check, cache cold", &first, lines),
        ("lockaudit check, cache warm", &warm, lines),
        ("lockaudit check, every 4th file", &quarter, quarter_lines),
        ("lockaudit check, every 2nd file", &half, half_lines),
        (
            "lockaudit check, every 4th crate",
            &quarter_crates,
            quarter_crate_lines,
        ),
        (
            "lockaudit check, every 2nd crate",
            &half_crates,
            half_crate_lines,
        ),
    ] {
        println!(
            "{:<44} {:>9.2} {:>12.0} {:>10.1}",
            name,
            r.secs,
            l as f64 / r.secs,
            r.peak_kb as f64 / 1024.0
        );
    }
    let per_line = |r: &Run, l: usize| r.secs / l.max(1) as f64;
    let scale_q = per_line(&quarter, quarter_lines) / per_line(&cold, lines);
    let scale_h = per_line(&half, half_lines) / per_line(&cold, lines);
    let scale_qc = per_line(&quarter_crates, quarter_crate_lines) / per_line(&cold, lines);
    let scale_hc = per_line(&half_crates, half_crate_lines) / per_line(&cold, lines);
    let same_prefilter = cold.results == full.results;
    let same_cache = first.results == cold.results && warm.results == cold.results;
    println!();
    println!("goal                                          measured    target    ok");
    let row = |goal: &str, v: f64, target: &str, ok: bool| {
        println!(
            "{goal:<45} {v:>8.2}    {target:<9} {}",
            if ok { "yes" } else { "NO" }
        )
    };
    row(
        "check / bare parse (same threads)",
        cold.secs / bare,
        "<= 0.50",
        cold.secs / bare <= 0.5,
    );
    row(
        "1 thread / 2 threads",
        one.secs / cold.secs,
        ">= 1.70",
        one.secs / cold.secs >= 1.7,
    );
    row(
        "time per line, 1/4 corpus vs full",
        scale_q,
        "0.85-1.15",
        (0.85..=1.15).contains(&scale_q),
    );
    row(
        "time per line, 1/2 corpus vs full",
        scale_h,
        "0.85-1.15",
        (0.85..=1.15).contains(&scale_h),
    );
    println!(
        "{:<45} {scale_qc:>8.2} / {scale_hc:.2} (for information)",
        "time per line, 1/4 and 1/2 crates vs full"
    );
    row(
        "cold / warm cache",
        first.secs / warm.secs,
        ">= 5.00",
        first.secs / warm.secs >= 5.0,
    );
    row(
        "peak RSS, MB",
        cold.peak_kb as f64 / 1024.0,
        "< 300",
        (cold.peak_kb as f64 / 1024.0) < 300.0,
    );
    println!(
        "{:<45} {:>8}    {:<9} {}",
        "same sites and findings as --no-prefilter",
        same_prefilter,
        "true",
        if same_prefilter { "yes" } else { "NO" }
    );
    println!(
        "{:<45} {:>8}    {:<9} {}",
        "same sites and findings from the cache",
        same_cache,
        "true",
        if same_cache { "yes" } else { "NO" }
    );
    if !same_prefilter || !same_cache {
        std::process::exit(1);
    }
}

fn median(mut runs: Vec<Run>) -> Run {
    let peak_kb = runs.iter().map(|r| r.peak_kb).max().unwrap_or(0);
    runs.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    let mut mid = runs.swap_remove(runs.len() / 2);
    mid.peak_kb = peak_kb;
    mid
}

struct Run {
    secs: f64,
    peak_kb: i64,
    /// The `sites` and `findings` of the JSON report (errors differ by design: the prefilter does
    /// not parse files that cannot matter).
    results: String,
}

/// Lines of the Rust files under these paths, as lockaudit would find them.
fn count_lines(paths: &[PathBuf]) -> usize {
    let cwd = std::env::current_dir().unwrap_or_default();
    let files = lockaudit::discover::discover(paths, &cwd, 2)
        .map(|d| d.files)
        .unwrap_or_default();
    files
        .iter()
        .map(|f| {
            std::fs::read(&f.abs)
                .map(|t| t.iter().filter(|&&c| c == b'\n').count())
                .unwrap_or(0)
        })
        .sum()
}

fn run_check(exe: &Path, extra: &[&str], targets: &[PathBuf], threads: usize, tmp: &Path) -> Run {
    let _ = std::fs::create_dir_all(tmp);
    let out = tmp.join("report.json");
    let Ok(me) = std::env::current_exe() else {
        eprintln!("cannot find this benchmark's own executable");
        std::process::exit(2)
    };
    let mut cmd = Command::new(me);
    cmd.arg(MEASURE)
        .arg(exe)
        .args([
            "check",
            "--format",
            "json",
            "--fail-on",
            "never",
            "--threads",
            &threads.to_string(),
            "--output",
        ])
        .arg(&out)
        .args(extra)
        .args(targets)
        .stderr(Stdio::inherit());
    let measured = cmd.output().ok().and_then(|o| {
        let line = String::from_utf8_lossy(&o.stdout).into_owned();
        let mut f = line.split_whitespace();
        let secs: f64 = f.next()?.parse().ok()?;
        let peak_kb: i64 = f.next()?.parse().ok()?;
        (f.next()? == "ok").then_some((secs, peak_kb))
    });
    let Some((secs, peak_kb)) = measured else {
        eprintln!("lockaudit check failed ({extra:?})");
        std::process::exit(2)
    };
    let json: serde_json::Value = std::fs::read(&out)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let results = format!("{}{}", json["sites"], json["findings"]);
    Run {
        secs,
        peak_kb,
        results,
    }
}

/// The hidden mode in which this binary runs one command and prints `SECONDS PEAK_KB ok|failed`.
///
/// A child's peak RSS as the kernel reports it is at least its parent's RSS when it was spawned
/// (exec records the old address space's high-water mark), and the benchmark process holds the
/// corpus listing and the bare parse pass's allocations. A fresh, small launcher makes the
/// figure the checker's own.
const MEASURE: &str = "--measure-child";

fn measure(args: &[String]) -> ! {
    let Some((exe, rest)) = args.split_first() else {
        usage()
    };
    let t = Instant::now();
    let Ok(child) = Command::new(exe)
        .args(rest)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
    else {
        eprintln!("cannot run {exe}");
        std::process::exit(2)
    };
    let (peak_kb, ok) = wait_peak(child.id() as libc::pid_t);
    let secs = t.elapsed().as_secs_f64();
    println!("{secs} {peak_kb} {}", if ok { "ok" } else { "failed" });
    std::process::exit(0)
}

/// Waits for a child and returns its peak resident set size (kB) and whether it succeeded.
fn wait_peak(pid: libc::pid_t) -> (i64, bool) {
    let mut status = 0;
    // SAFETY: `rusage` is plain data that wait4 fills; `pid` is our own child, not yet waited for.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    (
        usage.ru_maxrss,
        r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    )
}
