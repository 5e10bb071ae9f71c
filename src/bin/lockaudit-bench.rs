//! `lockaudit-bench DIR [--threads N] [--runs ROUNDS]`: how lockaudit's speed compares, in one run
//! on the same files, with a bare "read + syn::parse_file every file" pass; how it scales with the
//! corpus and with threads; what a warm cache buys; its peak memory; and whether the shortcuts
//! (prefilter, cache) change any result. `lockaudit-bench --generate DIR --crates N --files M`
//! writes a synthetic corpus. `lockaudit-bench --server DIR [--edits N] [--file PATH]` drives
//! `lockaudit server` over standard input and output and times an edit to fresh diagnostics.
//!
//! Times are wall-clock seconds of child `lockaudit check` processes (the real binary, end to
//! end) and of the in-process parse pass. The checks run in rounds, every configuration once per
//! round; ratios are taken within a round and the median over rounds is printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use rayon::prelude::*;

fn usage() -> ! {
    eprintln!(
        "usage: lockaudit-bench DIR [--threads N] [--runs ROUNDS]\n       lockaudit-bench --generate DIR [--crates N] [--files M] [--seed S]\n       lockaudit-bench --server DIR [--edits N] [--file PATH]"
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
    if let Some(dir) = flag("--server") {
        server_bench::run(Path::new(&dir), num("--edits", 20), flag("--file"));
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
    let (bare, parsed) = bare_parse(&paths, threads);
    println!(
        "bare read + syn::parse_file: {bare:.2} s ({:.0} lines/s; {parsed} files parse)",
        lines as f64 / bare
    );
    // What the machine itself gives a second thread: the bare pass over every 4th file, with 1
    // and with 2 threads. (On a shared VM two busy vCPUs can each run slower than one.)
    let sample: Vec<PathBuf> = paths.iter().step_by(4).cloned().collect();
    let ceiling = bare_parse(&sample, 1).0 / bare_parse(&sample, 2).0;
    println!("the machine's own gain from a second thread (bare parse): {ceiling:.2}x");

    let tmp = std::env::temp_dir().join(format!("lockaudit-bench-{}", std::process::id()));
    // Timed in rounds: each round runs every configuration once, so that a machine that speeds
    // up or slows down during the benchmark (a shared VM does) affects all of them alike. Ratios
    // are taken within a round; the median over rounds is reported.
    let runs = num("--runs", 5).max(1);
    let whole = std::slice::from_ref(&dir);
    // Scaling: the corpus split into quarters and into halves, two ways. Time is linear in the
    // corpus when the parts together take as long as the whole: summing over a partition compares
    // the same files, where one part alone would depend on which few large relevant files it
    // happened to draw.
    // - Consecutive files (the sorted list cut in 4 or 2): a part is a slice of the tree, as a
    //   corpus a quarter the size would be.
    // - Every 4th / 2nd file, from each offset: each part keeps the corpus's mix, but touches most
    //   of its folders and crates, so per-folder and per-crate work is paid by every part.
    // (Whole crates are shown too, for information: there the time follows how many
    // lock-relevant files the chosen crates hold.)
    let every = |n: usize| -> Vec<Vec<PathBuf>> {
        (0..n)
            .map(|k| paths.iter().skip(k).step_by(n).cloned().collect())
            .collect()
    };
    let cut = |n: usize| -> Vec<Vec<PathBuf>> {
        paths
            .chunks(paths.len().div_ceil(n).max(1))
            .map(<[PathBuf]>::to_vec)
            .collect()
    };
    let partitions: [(&str, Vec<Vec<PathBuf>>); 4] = [
        ("quarters, consecutive files", cut(4)),
        ("halves, consecutive files", cut(2)),
        ("quarters, every 4th file", every(4)),
        ("halves, every 2nd file", every(2)),
    ];
    let mut tops: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    tops.sort();
    let every_crate = |n: usize| -> Vec<PathBuf> { tops.iter().step_by(n).cloned().collect() };
    let (qc, hc) = (every_crate(4), every_crate(2));
    let cache_dir = tmp.join("cache");
    let cache_arg = cache_dir.to_string_lossy().into_owned();
    let no_cache: &[&str] = &["--no-cache"];
    let with_cache: &[&str] = &["--cache-dir", &cache_arg];
    let configs: [Config; 6] = [
        (
            "lockaudit check (prefilter, no cache)",
            no_cache,
            whole,
            threads,
            lines,
        ),
        ("lockaudit check, 1 thread", no_cache, whole, 1, lines),
        (
            "lockaudit check, cache cold",
            with_cache,
            whole,
            threads,
            lines,
        ),
        (
            "lockaudit check, cache warm",
            with_cache,
            whole,
            threads,
            lines,
        ),
        (
            "lockaudit check, every 4th crate",
            no_cache,
            &qc,
            threads,
            count_lines(&qc),
        ),
        (
            "lockaudit check, every 2nd crate",
            no_cache,
            &hc,
            threads,
            count_lines(&hc),
        ),
    ];
    const COLD: usize = 0;
    const ONE: usize = 1;
    const FIRST: usize = 2;
    const WARM: usize = 3;
    // One untimed run first, so that every timed run finds the same warm page cache.
    run_check(&exe, no_cache, whole, threads, &tmp);
    let mut samples: Vec<Vec<Run>> = configs.iter().map(|_| Vec::new()).collect();
    // Per round and partition, the parts' summed seconds; and the parts' peak RSS.
    let mut part_sums: Vec<Vec<f64>> = vec![Vec::new(); partitions.len()];
    let mut parts_peak = 0;
    for _ in 0..runs {
        for (k, (_, extra, targets, t, _)) in configs.iter().enumerate() {
            if k == FIRST {
                // Each cold run starts from an empty cache; the warm run that follows reuses it.
                let _ = std::fs::remove_dir_all(&cache_dir);
            }
            samples[k].push(run_check(&exe, extra, targets, *t, &tmp));
        }
        for ((_, parts), sums) in partitions.iter().zip(&mut part_sums) {
            let timed: Vec<Run> = parts
                .iter()
                .map(|p| run_check(&exe, no_cache, p, threads, &tmp))
                .collect();
            parts_peak = timed.iter().map(|r| r.peak_kb).fold(parts_peak, i64::max);
            sums.push(timed.iter().map(|r| r.secs).sum::<f64>());
        }
    }
    let full = run_check(
        &exe,
        &["--no-cache", "--no-prefilter"],
        whole,
        threads,
        &tmp,
    );
    let _ = std::fs::remove_dir_all(&tmp);

    println!();
    println!(
        "{:<54} {:>9} {:>12} {:>10}",
        "run (median of rounds)", "seconds", "lines/s", "peak MB"
    );
    let secs = |k: usize| median(samples[k].iter().map(|r| r.secs).collect());
    let peak_mb = |rs: &[Run]| rs.iter().map(|r| r.peak_kb).max().unwrap_or(0) as f64 / 1024.0;
    for (k, (name, _, _, _, l)) in configs.iter().enumerate() {
        let s = secs(k);
        println!(
            "{name:<54} {s:>9.2} {:>12.0} {:>10.1}",
            *l as f64 / s,
            peak_mb(&samples[k])
        );
    }
    for ((name, _), sums) in partitions.iter().zip(&part_sums) {
        let s = median(sums.clone());
        println!(
            "{:<54} {s:>9.2} {:>12.0} {:>10.1}",
            format!("lockaudit check, {name} (summed)"),
            lines as f64 / s,
            parts_peak as f64 / 1024.0
        );
    }
    println!(
        "{:<54} {:>9.2} {:>12.0} {:>10.1}",
        "lockaudit check --no-prefilter (one run)",
        full.secs,
        lines as f64 / full.secs,
        full.peak_kb as f64 / 1024.0
    );
    // Per round: configuration `a` against `b`, time per line.
    let ratio = |a: usize, b: usize| {
        let (la, lb) = (configs[a].4.max(1) as f64, configs[b].4.max(1) as f64);
        median(
            samples[a]
                .iter()
                .zip(&samples[b])
                .map(|(x, y)| (x.secs / la) / (y.secs / lb))
                .collect(),
        )
    };
    let check_vs_bare = secs(COLD) / bare;
    let threads_gain = ratio(ONE, COLD);
    // The parts together against the whole, per round.
    let against_whole = |sums: &[f64]| {
        median(
            sums.iter()
                .zip(&samples[COLD])
                .map(|(sum, whole)| sum / whole.secs)
                .collect(),
        )
    };
    let (scale_qc, scale_hc) = (ratio(4, COLD), ratio(5, COLD));
    let cache_gain = ratio(FIRST, WARM);
    let rss = peak_mb(&samples[COLD]);
    let cold = &samples[COLD][0];
    let same_prefilter = samples[COLD].iter().all(|r| r.results == full.results);
    let same_cache = samples[FIRST]
        .iter()
        .chain(&samples[WARM])
        .all(|r| r.results == cold.results);
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
        check_vs_bare,
        "<= 0.50",
        check_vs_bare <= 0.5,
    );
    row(
        "1 thread / 2 threads",
        threads_gain,
        ">= 1.70",
        threads_gain >= 1.7,
    );
    println!(
        "{:<45} {ceiling:>8.2}    (for information)",
        "  the same for the bare parse"
    );
    for ((name, _), sums) in partitions.iter().zip(&part_sums) {
        let scale = against_whole(sums);
        row(
            &format!("time per line, {name}"),
            scale,
            "0.85-1.15",
            (0.85..=1.15).contains(&scale),
        );
    }
    println!(
        "{:<45} {scale_qc:>8.2} / {scale_hc:.2} (for information)",
        "time per line, every 4th / 2nd crate vs whole"
    );
    row(
        "cold / warm cache",
        cache_gain,
        ">= 5.00",
        cache_gain >= 5.0,
    );
    row("peak RSS, MB", rss, "< 300", rss < 300.0);
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

/// Reads and parses every file with syn on `threads` threads: seconds, and how many parsed.
fn bare_parse(paths: &[PathBuf], threads: usize) -> (f64, usize) {
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
    (t.elapsed().as_secs_f64(), parsed)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A timed configuration: name, extra arguments, paths, threads, lines.
type Config<'a> = (&'a str, &'a [&'a str], &'a [PathBuf], usize, usize);

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

/// `--server`: the editor's view of speed. An LSP session over pipes, as an editor holds it: the
/// time from `initialize` to the first answer (the whole workspace analysed), then, for each
/// edit of a file holding lock sites, from sending `didChange` to receiving its
/// `publishDiagnostics` (the debounce included), and the same with `didSave` (no debounce).
mod server_bench {
    use std::io::{BufRead, BufReader, Write};
    use std::path::{Path, PathBuf};
    use std::process::{ChildStdin, Command, Stdio};
    use std::sync::mpsc::{Receiver, channel};
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    fn read(r: &mut impl BufRead) -> Option<Value> {
        let mut length = None;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length:") {
                length = v.trim().parse::<usize>().ok();
            }
        }
        let mut body = vec![0; length?];
        r.read_exact(&mut body).ok()?;
        serde_json::from_slice(&body).ok()
    }

    fn write(w: &mut ChildStdin, v: &Value) {
        let body = serde_json::to_vec(v).unwrap_or_default();
        let _ = write!(w, "Content-Length: {}\r\n\r\n", body.len());
        let _ = w.write_all(&body);
        let _ = w.flush();
    }

    fn fail(msg: &str) -> ! {
        eprintln!("lockaudit-bench --server: {msg}");
        std::process::exit(2)
    }

    /// Waits for a message `pred` accepts, keeping the analysis times logged on the way.
    fn wait(rx: &Receiver<Value>, logged: &mut Vec<f64>, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let m = rx
                .recv_timeout(Duration::from_secs(300))
                .unwrap_or_else(|_| fail("the server stopped answering"));
            if m["method"] == "window/logMessage"
                && let Some(ms) = m["params"]["message"]
                    .as_str()
                    .filter(|s| s.contains("edited file"))
                    .and_then(|s| s.rsplit(" in ").next())
                    .and_then(|s| s.trim_end_matches(" ms").parse::<f64>().ok())
            {
                logged.push(ms);
            }
            if pred(&m) {
                return m;
            }
        }
    }

    fn stats(name: &str, mut ms: Vec<f64>) {
        if ms.is_empty() {
            return;
        }
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
        println!(
            "{name}: median {:.1} ms, p90 {:.1} ms, max {:.1} ms ({} edits)",
            at(0.5),
            at(0.9),
            ms[ms.len() - 1],
            ms.len()
        );
    }

    pub fn run(dir: &Path, edits: usize, file: Option<String>) {
        let dir = dir
            .canonicalize()
            .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
        let file: PathBuf = file.map(PathBuf::from).unwrap_or_else(|| {
            let mut crates: Vec<PathBuf> = std::fs::read_dir(&dir)
                .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            crates.sort();
            crates
                .into_iter()
                .map(|c| c.join("src/jobs.rs"))
                .find(|p| p.is_file())
                .unwrap_or_else(|| fail("no <crate>/src/jobs.rs (a generated corpus); give --file"))
        });
        let file = file.canonicalize().unwrap_or(file);
        let original = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| fail(&format!("{}: {e}", file.display())));
        // The edit: a classification comment above the first lock site's statement, on and off.
        let variant = match original.find("    let l = ") {
            Some(at) => format!(
                "{}    // lockaudit: correctness\n{}",
                &original[..at],
                &original[at..]
            ),
            None => format!("{original}\n// edited\n"),
        };
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("lockaudit")))
            .filter(|p| p.exists())
            .unwrap_or_else(|| fail("build the lockaudit binary next to this one first"));
        let files = lockaudit::discover::discover(std::slice::from_ref(&dir), &dir, 2)
            .map(|d| d.files.len())
            .unwrap_or(0);
        let cached = dir.join(".lockaudit_cache").exists();
        println!(
            "server: {} ({files} files; cache {}), editing {}",
            dir.display(),
            if cached { "present" } else { "empty" },
            file.display()
        );
        let mut child = Command::new(&exe)
            .arg("server")
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| fail(&format!("cannot start {}: {e}", exe.display())));
        let mut stdin = child.stdin.take().unwrap_or_else(|| fail("no stdin"));
        let mut stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| fail("no stdout")));
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            while let Some(m) = read(&mut stdout) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        let uri = format!("file://{}", file.display());
        let mut logged = Vec::new();
        let start = Instant::now();
        write(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "processId": null, "rootUri": format!("file://{}", dir.display()), "capabilities": {}}}),
        );
        wait(&rx, &mut logged, |m| m["id"] == 1);
        write(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        );
        // Answered once the first analysis of the whole workspace is done.
        write(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {
                "textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}}),
        );
        wait(&rx, &mut logged, |m| m["id"] == 2);
        println!(
            "initialize to the whole workspace analysed: {:.0} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        write(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": uri, "languageId": "rust", "version": 1, "text": original}}}),
        );
        wait(&rx, &mut logged, |m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"] == 1
        });
        let mut version = 1;
        let (mut changed, mut saved) = (Vec::new(), Vec::new());
        // The diagnostics' counts for the original text and for the edited one: the edit changes
        // what is reported, so fresh diagnostics are told from stale ones.
        let mut counts = [
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        ];
        for k in 0..edits * 2 {
            let on_save = k >= edits;
            version += 1;
            // Each text is new (a comment numbers it), so no edit is served by the disk cache.
            let text = format!(
                "{}// edit {version}\n",
                if version % 2 == 0 {
                    &variant
                } else {
                    &original
                }
            );
            if on_save {
                let _ = std::fs::write(&file, &text);
            }
            let t = Instant::now();
            write(
                &mut stdin,
                &json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": text}]}}),
            );
            if on_save {
                write(
                    &mut stdin,
                    &json!({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {
                        "textDocument": {"uri": uri}}}),
                );
            }
            let m = wait(&rx, &mut logged, |m| {
                m["method"] == "textDocument/publishDiagnostics"
                    && m["params"]["uri"] == uri
                    && m["params"]["version"] == version
            });
            let n = m["params"]["diagnostics"].as_array().map_or(0, Vec::len);
            counts[usize::from(version % 2 == 0)].insert(n);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if on_save {
                saved.push(ms)
            } else {
                changed.push(ms)
            }
            // Quiet between edits, as between a user's pauses.
            std::thread::sleep(Duration::from_millis(150));
        }
        let _ = std::fs::write(&file, &original);
        println!(
            "diagnostics on the file: {:?} as it was, {:?} edited",
            counts[0], counts[1]
        );
        stats(
            &format!(
                "edit (didChange) to fresh diagnostics, {} ms debounce included",
                lockaudit::server::DEBOUNCE.as_millis()
            ),
            changed,
        );
        stats("save (didChange + didSave) to fresh diagnostics", saved);
        stats("the server's analysis of an edit alone", logged);
        write(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": null}),
        );
        let mut none = Vec::new();
        wait(&rx, &mut none, |m| m["id"] == 3);
        write(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "method": "exit", "params": null}),
        );
        let _ = child.wait();
    }
}
