//! The prefilter and the cache are shortcuts: they must never change a site or a finding.

use std::path::{Path, PathBuf};

use lockaudit::engine;
use lockaudit::settings::CheckSettings;

fn results(paths: &[PathBuf], prefilter: bool, cache: Option<&Path>) -> (String, engine::Stats) {
    let settings = CheckSettings {
        paths: paths.to_vec(),
        threads: 2,
        prefilter,
        cache_dir: cache.map(Path::to_path_buf),
        ..Default::default()
    };
    let o = engine::check(&settings).expect("runs");
    let sites = serde_json::to_string(&o.report.sites).expect("json");
    let findings = serde_json::to_string(&o.report.findings).expect("json");
    let errors = serde_json::to_string(&o.report.errors).expect("json");
    // Findings are shown with their source; a cached finding must be too.
    let shown: Vec<(&String, usize)> = o
        .report
        .sources
        .iter()
        .map(|(path, text)| (path, text.len()))
        .collect();
    (format!("{sites}\n{findings}\n{errors}\n{shown:?}"), o.stats)
}

#[test]
fn prefilter_agrees_with_parsing_everything_on_the_fixtures() {
    let p = [PathBuf::from("fixtures")];
    let (fast, _) = results(&p, true, None);
    let (full, _) = results(&p, false, None);
    assert_eq!(fast, full);
}

#[test]
fn prefilter_agrees_on_a_generated_corpus_and_skips_most_of_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    lockaudit::corpus::generate(dir.path(), 6, 40, 7).expect("corpus");
    let p = [dir.path().to_path_buf()];
    let (fast, stats) = results(&p, true, None);
    let (full, _) = results(&p, false, None);
    assert_eq!(fast, full);
    assert!(
        fast.contains("via"),
        "wrapper uses in files that never name the lock crate are found"
    );
    assert!(
        stats.parsed * 2 < stats.files,
        "most plain files are not parsed: {stats:?}"
    );
}

#[test]
fn cache_never_answers_differently_from_a_cold_run() {
    let corpus = tempfile::tempdir().expect("tempdir");
    lockaudit::corpus::generate(corpus.path(), 3, 12, 11).expect("corpus");
    let cache = tempfile::tempdir().expect("tempdir");
    let p = [corpus.path().to_path_buf()];
    let (cold, _) = results(&p, true, None);
    let (first, s1) = results(&p, true, Some(cache.path()));
    let (warm, s2) = results(&p, true, Some(cache.path()));
    assert_eq!(first, cold);
    assert_eq!(warm, cold);
    assert_eq!(s1.cached_crates, 0);
    assert_eq!(s2.cached_crates, 3);
    assert_eq!(s2.parsed, 0, "a warm run parses nothing");
    assert_eq!(s2.hashed_only, 3, "nor checks or scans a text");
    // A change in one crate recomputes that crate, and only it, with the same answer as cold.
    let state = corpus.path().join("crate1/src/state.rs");
    let text = std::fs::read_to_string(&state)
        .expect("read")
        .replace("90_000", "30_000");
    std::fs::write(&state, text).expect("write");
    let (cold, _) = results(&p, true, None);
    let (warm, s3) = results(&p, true, Some(cache.path()));
    assert_eq!(warm, cold);
    assert_eq!((s3.cached_crates, s3.hashed_only), (2, 2));
    // A config change is part of the key too.
    std::fs::write(
        corpus.path().join("lockaudit.toml"),
        "[rules.long-deadline]\nlevel = \"off\"\n",
    )
    .expect("write");
    let (cold, _) = results(&p, true, None);
    let (warm, s4) = results(&p, true, Some(cache.path()));
    assert_eq!(warm, cold);
    assert_eq!(s4.cached_crates, 0);
    assert!(!warm.contains("long-deadline"));
}

/// A crate the cache has seen is hashed before it is read as text: its key must not depend on
/// which way it was read, or a file that is not UTF-8 would keep its crate out of the cache.
#[test]
fn warm_runs_serve_crates_with_files_that_are_not_text() {
    let corpus = tempfile::tempdir().expect("tempdir");
    lockaudit::corpus::generate(corpus.path(), 2, 6, 5).expect("corpus");
    let latin1 = corpus.path().join("crate0/src/latin1.rs");
    std::fs::write(&latin1, b"// caf\xe9\nfn f() {}\n").expect("write");
    let cache = tempfile::tempdir().expect("tempdir");
    let p = [corpus.path().to_path_buf()];
    let (cold, _) = results(&p, true, None);
    assert!(cold.contains("not valid UTF-8"), "{cold}");
    let (first, s1) = results(&p, true, Some(cache.path()));
    let (warm, s2) = results(&p, true, Some(cache.path()));
    assert_eq!(first, cold);
    assert_eq!(warm, cold);
    assert_eq!((s1.cached_crates, s2.cached_crates), (0, 2));
    assert_eq!(
        s2.hashed_only, 2,
        "the same key whichever way a crate is read"
    );
    // Changed (the bad byte moves to line 2): that crate is read again, the other still served.
    std::fs::write(&latin1, b"// ok\n// caf\xe9\n").expect("write");
    let (cold, _) = results(&p, true, None);
    let (warm, s3) = results(&p, true, Some(cache.path()));
    assert!(cold.contains("line 2"), "{cold}");
    assert_eq!(warm, cold);
    assert_eq!((s3.cached_crates, s3.hashed_only), (1, 1));
}

/// A crate that keeps changing keeps only its newest few entries; the others are untouched.
#[test]
fn the_cache_keeps_a_few_entries_per_crate() {
    let corpus = tempfile::tempdir().expect("tempdir");
    lockaudit::corpus::generate(corpus.path(), 2, 6, 3).expect("corpus");
    let cache = tempfile::tempdir().expect("tempdir");
    let p = [corpus.path().to_path_buf()];
    let state = corpus.path().join("crate1/src/state.rs");
    let original = std::fs::read_to_string(&state).expect("read");
    for i in 0..7 {
        std::fs::write(&state, format!("{original}\n// edit {i}\n")).expect("write");
        results(&p, true, Some(cache.path()));
    }
    let count = |krate: &str| {
        let tag = lockaudit::cache::crate_tag(&corpus.path().join(krate));
        std::fs::read_dir(cache.path().join(format!("v{}", env!("CARGO_PKG_VERSION"))))
            .expect("cache dir")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(&format!("{tag}-")) && n.ends_with(".json"))
            .count()
    };
    assert_eq!(count("crate0"), 1, "an unchanged crate has its one entry");
    assert_eq!(count("crate1"), 4, "seven versions, the newest four kept");
    // The newest is the one a warm run is served from.
    let (_, warm) = results(&p, true, Some(cache.path()));
    assert_eq!((warm.cached_crates, warm.hashed_only), (2, 2));
}

#[test]
fn names_in_comments_and_strings_do_not_make_a_file_relevant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"m\"\n").expect("write");
    let files = [
        // Mentions only: a doc comment, a comment, a string. Not parsed.
        (
            "docs.rs",
            "//! Like [mini-redis], but smaller.\n/* redis::Client */\npub fn name() -> &'static str { \"redis\" }\n",
        ),
        // A real use, and advisory-lock SQL inside a raw string: both parsed.
        (
            "lock.rs",
            "pub fn f(c: &mut redis::Connection) { let _: bool = redis::cmd(\"SET\").arg(\"k\").arg(\"v\").arg(\"NX\").query(c).unwrap_or(false); }\n",
        ),
        (
            "pg.rs",
            "pub async fn g(db: &sqlx::PgPool) { let _ = sqlx::query(r#\"SELECT pg_advisory_lock(1)\"#).execute(db).await; }\n",
        ),
        // SQL named in a comment only: not parsed.
        (
            "notes.rs",
            "// pg_advisory_lock would block here\npub fn h() {}\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).expect("write");
    }
    let p = [dir.path().to_path_buf()];
    let (fast, stats) = results(&p, true, None);
    let (full, all) = results(&p, false, None);
    assert_eq!(fast, full);
    assert_eq!(all.parsed, 4);
    assert_eq!(stats.parsed, 2, "{stats:?}");
    assert!(fast.contains("lock.rs") && fast.contains("pg.rs"), "{fast}");
}

#[test]
fn cached_findings_in_files_the_closure_brought_in_keep_their_source() {
    // jobs.rs never names the lock crate: the prefilter skips it until the closure finds that it
    // uses `Locks`, which holds a lock manager.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"w\"\n").expect("write");
    std::fs::write(src.join("lib.rs"), "pub mod jobs;\npub mod locks;\n").expect("write");
    std::fs::write(
        src.join("locks.rs"),
        "pub struct Locks {\n    pub manager: rslock::LockManager,\n}\n",
    )
    .expect("write");
    std::fs::write(
        src.join("jobs.rs"),
        "use crate::locks::Locks;\n\npub async fn import(l: &Locks, file: &str) {\n    let _lock = l.manager.lock(file.as_bytes(), std::time::Duration::from_secs(60)).await;\n}\n",
    )
    .expect("write");
    let cache = tempfile::tempdir().expect("tempdir");
    let p = [dir.path().to_path_buf()];
    let (cold, _) = results(&p, true, None);
    assert!(cold.contains("src/jobs.rs"), "{cold}");
    let (first, _) = results(&p, true, Some(cache.path()));
    let (warm, stats) = results(&p, true, Some(cache.path()));
    assert_eq!(stats.cached_crates, 1);
    assert_eq!(first, cold);
    assert_eq!(warm, cold);
}

/// A small deterministic generator (SplitMix64): the crates below are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }

    fn flip(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// One crate from the pieces that decide what a site means across files: a constant in another
/// module (reached by its path, a `pub use keys::*`, a `pub use keys::TTL`, or a `use` of the
/// module), the crate's own `Result<T>` alias, a re-exported lock type, a wrapper in a module of
/// its own, and files that name no lock word at all. Where each piece lives is random.
fn piece_crate(root: &Path, seed: u64) {
    let mut r = Rng(seed);
    let write = |rel: &str, text: String| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "Cargo.toml",
        format!("[package]\nname = \"piece{seed}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n"),
    );
    let secs = *r.pick(&[5u64, 30, 900, 7200]);
    let ttl_def = format!(
        "use std::time::Duration;\n\npub const TTL: Duration = Duration::from_secs({secs});\n"
    );
    // Where the constant lives and how it is named from the jobs.
    let (ttl_path, locks_mod) = match r.next() % 4 {
        0 => ("crate::locks::TTL", "mod keys;\npub use keys::*;\n"),
        1 => ("crate::locks::TTL", "mod keys;\npub use keys::TTL;\n"),
        2 => ("crate::locks::keys::TTL", "pub mod keys;\n"),
        _ => ("locks::TTL", "mod keys;\npub use self::keys::*;\n"),
    };
    let alias = r.flip();
    let prelude = r.flip();
    let wrapper = r.flip();
    let wrapper_in_locks = r.flip();
    let mut lib = String::from("pub mod error;\npub mod jobs;\npub mod locks;\n");
    if prelude {
        lib.push_str("pub mod prelude;\n");
        write(
            "src/prelude.rs",
            "pub use rslock::LockManager as Manager;\n".into(),
        );
    }
    if wrapper && !wrapper_in_locks {
        lib.push_str("pub mod guard;\n");
    }
    // A plain module with no lock word, somewhere in the crate.
    lib.push_str("pub mod util;\n");
    write(
        "src/util.rs",
        "pub fn retries() -> u32 {\n    3\n}\n".into(),
    );
    write("src/lib.rs", lib);
    let mut locks = locks_mod.to_string();
    if wrapper && wrapper_in_locks {
        locks.push_str("pub mod guard;\n");
    }
    write("src/locks/mod.rs", locks);
    write("src/locks/keys.rs", ttl_def);
    let result = if alias {
        "crate::error::Result"
    } else {
        "std::result::Result"
    };
    let err = if alias { "" } else { ", rslock::LockError" };
    let mut error = String::from(
        "#[derive(Debug)]\npub enum Error {\n    Lock(rslock::LockError),\n}\n\nimpl From<rslock::LockError> for Error {\n    fn from(e: rslock::LockError) -> Self {\n        Error::Lock(e)\n    }\n}\n",
    );
    if alias {
        error.push_str("\npub type Result<T> = std::result::Result<T, Error>;\n");
    }
    write("src/error.rs", error);
    let manager = if prelude {
        "crate::prelude::Manager"
    } else {
        "rslock::LockManager"
    };
    let guard_mod = if wrapper_in_locks {
        "crate::locks::guard"
    } else {
        "crate::guard"
    };
    if wrapper {
        let file = if wrapper_in_locks {
            "src/locks/guard.rs"
        } else {
            "src/guard.rs"
        };
        let uses = if ttl_path.starts_with("locks::") {
            "use crate::locks;\n"
        } else {
            ""
        };
        write(
            file,
            format!(
                "{uses}\npub async fn acquire(m: &{manager}, key: &str) -> {result}<rslock::Lock{err}> {{\n    Ok(m.lock(key.as_bytes(), {ttl_path}).await?)\n}}\n"
            ),
        );
    }
    let purpose = r.pick(&["efficiency", "correctness"]);
    let uses = if ttl_path.starts_with("locks::") {
        "use crate::locks;\n"
    } else {
        ""
    };
    let take = if wrapper {
        format!("{guard_mod}::acquire(m, \"job\").await?")
    } else {
        format!("m.lock(b\"job\", {ttl_path}).await?")
    };
    write(
        "src/jobs.rs",
        format!(
            "{uses}\n// lockaudit: {purpose}\npub async fn run(m: &{manager}) -> {result}<(){err}> {{\n    let lock = {take};\n    step();\n    m.unlock(&lock).await;\n    Ok(())\n}}\n\nfn step() {{}}\n"
        ),
    );
}

#[test]
fn generated_crates_give_the_same_answer_with_and_without_shortcuts() {
    let corpus = tempfile::tempdir().expect("tempdir");
    for seed in 0..32 {
        piece_crate(&corpus.path().join(format!("crate{seed}")), seed);
    }
    let p = [corpus.path().to_path_buf()];
    let (fast, _) = results(&p, true, None);
    let (full, _) = results(&p, false, None);
    assert_eq!(fast, full, "the prefilter changes no site or finding");
    let cache = tempfile::tempdir().expect("tempdir");
    let (first, _) = results(&p, true, Some(cache.path()));
    let (warm, stats) = results(&p, true, Some(cache.path()));
    assert_eq!(first, full);
    assert_eq!(warm, full, "the cache serves what a cold run finds");
    assert_eq!(stats.cached_crates, 32);
    // The pieces are really combined: every crate has its site, TTLs are followed to the
    // constant in whichever module holds it, and no alias turns into a false finding.
    let sites = full.lines().next().expect("sites");
    let report: serde_json::Value = serde_json::from_str(sites).expect("json");
    let sites = report.as_array().expect("sites array");
    for seed in 0..32 {
        let dir = format!("crate{seed}/");
        assert!(
            sites
                .iter()
                .any(|s| s["path"].as_str().is_some_and(|p| p.contains(&dir))
                    && s["ttl_ms"].is_u64()),
            "crate{seed}: a site with its TTL known"
        );
    }
    assert!(full.contains("long-deadline"));
}
