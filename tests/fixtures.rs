//! The UI-test harness: every `.rs` file under `fixtures/` carries its expectations inline, as a
//! trailing `//~ rule-id [rule-id…]` on the line a finding concerns. The analyzer must report
//! exactly those findings, no more and no fewer (rule and line exact). Folders with a
//! `lockaudit.toml` are analysed with it, as `lockaudit check fixtures/` would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use lockaudit::cli::Format;
use lockaudit::engine;
use lockaudit::lints::Level;
use lockaudit::settings::CheckSettings;

fn settings(paths: Vec<PathBuf>) -> CheckSettings {
    CheckSettings {
        paths,
        format: Format::Json,
        output: None,
        config: None,
        select: None,
        ignore: Default::default(),
        fail_on: Some(Level::Warning),
        threads: 2,
        color: false,
        verbose: false,
        report_suppressed: false,
        prefilter: true,
        cache_dir: None,
    }
}

/// Copies these files (relative paths) of `from` into `to`, making their folders.
fn copy_files(from: &Path, to: &Path, rels: &[&str]) {
    for rel in rels {
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from.join(rel), dest).unwrap();
    }
}

/// (path, line) -> rules expected there.
fn expectations(root: &Path) -> BTreeMap<(String, usize), BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for entry in walk(root) {
        let Ok(text) = std::fs::read_to_string(&entry) else {
            continue;
        };
        let display = entry.to_string_lossy().replace('\\', "/");
        for (i, line) in text.lines().enumerate() {
            if let Some(pos) = line.find("//~") {
                let rules: BTreeSet<String> = line[pos + 3..]
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
                assert!(
                    !rules.is_empty(),
                    "{display}:{}: `//~` without a rule id",
                    i + 1
                );
                out.insert((display.clone(), i + 1), rules);
            }
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)
            .expect("fixture folders are readable")
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn fixtures_report_exactly_the_expected_findings() {
    let root = Path::new("fixtures");
    let expected = expectations(root);
    let outcome = engine::check(&settings(vec![root.to_path_buf()])).expect("the fixtures run");
    let report = &outcome.report;
    assert!(
        report.errors.is_empty(),
        "fixtures must all parse: {:?}",
        report.errors
    );
    let mut got: BTreeMap<(String, usize), BTreeSet<String>> = BTreeMap::new();
    for f in report.active() {
        got.entry((f.path.clone(), f.line))
            .or_default()
            .insert(f.rule.to_string());
    }
    let mut problems = Vec::new();
    for key in expected.keys().chain(got.keys()).collect::<BTreeSet<_>>() {
        let e = expected.get(key).cloned().unwrap_or_default();
        let g = got.get(key).cloned().unwrap_or_default();
        for missing in e.difference(&g) {
            problems.push(format!(
                "{}:{}: expected `{missing}`, not reported",
                key.0, key.1
            ));
        }
        for extra in g.difference(&e) {
            let msg = report
                .findings
                .iter()
                .find(|f| f.path == key.0 && f.line == key.1 && f.rule == extra)
                .map_or("", |f| f.message.as_str());
            problems.push(format!("{}:{}: unexpected `{extra}`: {msg}", key.0, key.1));
        }
    }
    assert!(
        problems.is_empty(),
        "{} fixture mismatches:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The harness is only as good as its coverage: every rule has positive cases.
    let fired: BTreeSet<&str> = report.findings.iter().map(|f| f.rule).collect();
    for rule in lockaudit::lints::RULES {
        assert!(
            fired.contains(rule.id),
            "no fixture exercises `{}`",
            rule.id
        );
    }
}

#[test]
fn negative_fixtures_have_no_sites() {
    let outcome =
        engine::check(&settings(vec![PathBuf::from("fixtures/negatives")])).expect("runs");
    assert!(
        outcome.report.sites.is_empty(),
        "look-alikes must not be sites: {:#?}",
        outcome.report.sites
    );
    assert!(outcome.report.findings.is_empty());
}

#[test]
fn wrapper_calls_are_sites_with_via() {
    let outcome = engine::check(&settings(vec![PathBuf::from("fixtures/wrappers")])).expect("runs");
    let via = |line: usize| {
        outcome
            .report
            .sites
            .iter()
            .find(|s| s.path.ends_with("src/jobs.rs") && s.line == line)
            .and_then(|s| s.via.clone())
    };
    assert_eq!(
        via(6).as_deref(),
        Some("locks::Locks::acquire_import"),
        "a wrapper of a wrapper"
    );
    assert_eq!(
        via(14).as_deref(),
        Some("locks::Locks::with_lock"),
        "a scoped wrapper"
    );
    assert_eq!(
        via(26).as_deref(),
        Some("locks::advisory"),
        "a SQL helper used from another file"
    );
    assert_eq!(
        via(41).as_deref(),
        Some("crate::locks::acquire_dyn"),
        "declared with [[lock]]"
    );
    // The primitives stay listed, without a `via`.
    assert!(
        outcome
            .report
            .sites
            .iter()
            .any(|s| s.path.ends_with("src/locks.rs")
                && s.api == "pg_try_advisory_lock"
                && s.via.is_none())
    );
}

#[test]
fn migration_helpers_take_the_migrators_lock() {
    let outcome = engine::check(&settings(vec![PathBuf::from(
        "fixtures/shapes/migration-helpers",
    )]))
    .expect("runs");
    let site = |file: &str, line: usize| {
        outcome
            .report
            .sites
            .iter()
            .find(|s| s.path.ends_with(file) && s.line == line)
    };
    for (file, line, via) in [
        ("server/src/main.rs", 4, "db::migrations::run_migrations"),
        ("server/src/main.rs", 5, "db::migrations::migrate"),
        ("store/src/lib.rs", 7, "migrations::run_migrations"),
    ] {
        let s = site(file, line).unwrap_or_else(|| panic!("a site at {file}:{line}"));
        assert_eq!(s.via.as_deref(), Some(via), "{file}:{line}");
        // The library's own purpose travels with its lock: no `unclassified-lock` here.
        assert_eq!(
            s.purpose,
            lockaudit::classify::Purpose::Correctness,
            "{file}:{line}"
        );
    }
    assert!(
        site("server/src/main.rs", 6).is_none(),
        "a migrator told not to lock takes none"
    );
    assert!(
        site("server/src/main.rs", 7).is_none(),
        "a function that migrates and then serves is no migration helper"
    );
}

#[test]
fn a_migrator_built_for_sqlite_alone_takes_no_lock() {
    let outcome = engine::check(&settings(vec![PathBuf::from(
        "fixtures/shapes/sqlite-backends",
    )]))
    .expect("runs");
    let at = |file: &str| {
        outcome
            .report
            .sites
            .iter()
            .filter(|s| s.path.ends_with(file))
            .map(|s| s.line)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at("cache/src/lib.rs"),
        Vec::<usize>::new(),
        "sqlx for SQLite alone"
    );
    assert_eq!(
        at("ledger/src/lib.rs"),
        [14],
        "PostgreSQL through the workspace's entry"
    );
    assert_eq!(
        at("app/src/main.rs"),
        [8],
        "no backend named: not known, kept"
    );
}

#[test]
fn a_workspace_is_one_program() {
    let outcome =
        engine::check(&settings(vec![PathBuf::from("fixtures/workspace")])).expect("runs");
    let via = |file: &str, line: usize| {
        outcome
            .report
            .sites
            .iter()
            .find(|s| s.path.ends_with(file) && s.line == line)
            .map(|s| s.via.clone().unwrap_or_default())
    };
    // A member reaching a wrapper of another member through a re-export, by the name its
    // manifest gives the dependency (`infra` for the package `acme-infra`).
    assert_eq!(
        via("crates/api/src/billing.rs", 11).as_deref(),
        Some("infra::dist_lock::manager::Locks::lock")
    );
    // Renamed again (`platform`), and a wrapper of a wrapper one crate further on.
    assert_eq!(
        via("crates/jobs/src/lib.rs", 20).as_deref(),
        Some("platform::db::try_advisory")
    );
    assert_eq!(
        via("crates/cli/src/main.rs", 6).as_deref(),
        Some("jobs::lock_import")
    );
    // An integration test names its own crate by the crate's name.
    assert_eq!(
        via("crates/jobs/tests/import.rs", 6).as_deref(),
        Some("lock_import")
    );
    // A crate excluded from the workspace, without the dependency, sees nothing of it.
    assert!(
        !outcome
            .report
            .sites
            .iter()
            .any(|s| s.path.contains("crates/legacy/"))
    );
    // The same with the prefilter off, and from the cache.
    let mut all = settings(vec![PathBuf::from("fixtures/workspace")]);
    all.prefilter = false;
    let plain = engine::check(&all).expect("runs");
    assert_eq!(
        format!("{:?}", plain.report.sites),
        format!("{:?}", outcome.report.sites)
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cached = settings(vec![PathBuf::from("fixtures/workspace")]);
    cached.cache_dir = Some(dir.path().to_path_buf());
    let cold = engine::check(&cached).expect("runs");
    let warm = engine::check(&cached).expect("runs");
    // The members that see each other are one unit; the excluded crate is another.
    assert_eq!(warm.stats.cached_crates, 2);
    assert_eq!(
        format!("{:?}", warm.report.sites),
        format!("{:?}", cold.report.sites)
    );
    assert_eq!(
        format!("{:?}", cold.report.sites),
        format!("{:?}", outcome.report.sites)
    );
}

#[test]
fn etcd_lock_without_lease_says_it_expires_while_held() {
    let outcome =
        engine::check(&settings(vec![PathBuf::from("fixtures/libs/etcd.rs")])).expect("runs");
    let missing: Vec<_> = outcome
        .report
        .findings
        .iter()
        .filter(|f| f.rule == "missing-deadline")
        .collect();
    assert!(!missing.is_empty());
    for f in missing {
        // etcd does not keep a lease-less lock forever: its own 60 s lease runs out while held.
        assert!(
            f.message.contains("60 s lease") && !f.message.contains("never expired"),
            "{}",
            f.message
        );
        assert!(f.help.contains("lease_keep_alive"), "{}", f.help);
    }
}

/// A crate that is the library a pack describes is analysed as itself: its own spellings of the
/// pack's paths are the pack's, and all its files are read. The same code in a crate of another
/// name takes no lock the packs know of.
#[test]
fn a_library_is_analysed_as_itself() {
    let dir = Path::new("fixtures/shapes/library-itself/zk-client");
    let line = std::fs::read_to_string(dir.join("src/client/mod.rs"))
        .expect("fixture")
        .lines()
        .position(|l| l.contains(".create(prefix, data, &CreateMode::EphemeralSequential"))
        .expect("the recipe's create")
        + 1;
    // Through one cache: the manifest decides which crate is the library, so it is in the key.
    let cache = tempfile::tempdir().expect("tempdir");
    let creates = |root: &Path| -> Vec<(usize, bool)> {
        let mut s = settings(vec![root.to_path_buf()]);
        s.cache_dir = Some(cache.path().to_path_buf());
        let outcome = engine::check(&s).expect("runs");
        outcome
            .report
            .sites
            .iter()
            .filter(|s| s.api == "Client::create")
            .map(|s| (s.line, s.wrapped))
            .collect()
    };
    // The primitive of `create_lock`, judged where it is (nothing in the crate calls that
    // wrapper); the persistent node created by `register` is none.
    assert_eq!(creates(dir), vec![(line, false)]);

    let fork = tempfile::tempdir().expect("tempdir");
    copy_files(
        dir,
        fork.path(),
        &["src/lib.rs", "src/error.rs", "src/client/mod.rs"],
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    std::fs::write(fork.path().join("Cargo.toml"), &manifest).unwrap();
    assert_eq!(
        creates(fork.path()),
        vec![(line, false)],
        "the same crate elsewhere"
    );
    let renamed = manifest.replace("name = \"zookeeper-client\"", "name = \"zk-fork\"");
    assert_ne!(manifest, renamed);
    std::fs::write(fork.path().join("Cargo.toml"), renamed).unwrap();
    assert_eq!(creates(fork.path()), vec![], "no pack describes `zk_fork`");
}

/// The SQL file a `query_file!` names is part of the file's cache key: editing only the SQL
/// changes the answer of a cached run.
#[test]
fn query_file_sql_is_in_the_cache_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("queries")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"workers\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nsqlx = \"0.8\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub async fn claim(pool: &sqlx::PgPool) -> sqlx::Result<u64> {\n    let r = sqlx::query_file!(\"queries/claim.sql\").execute(pool).await?;\n    Ok(r.rows_affected())\n}\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().expect("tempdir");
    let sites = || {
        let mut s = settings(vec![root.to_path_buf()]);
        s.cache_dir = Some(cache.path().to_path_buf());
        engine::check(&s).expect("runs").report.sites.len()
    };
    std::fs::write(root.join("queries/claim.sql"), "SELECT pg_advisory_lock(7)").unwrap();
    assert_eq!(sites(), 1);
    std::fs::write(root.join("queries/claim.sql"), "SELECT 1").unwrap();
    assert_eq!(sites(), 0, "a cached run must see the edited SQL file");
}

/// A wrapper called only from test code: its primitive is judged in place while test sites are
/// not reported, and at the test caller once `include-tests` turns them on. Either way each lock
/// is judged once: `acquire_default()` over `acquire()` leaves only `acquire`'s primitive judged.
#[test]
fn uncalled_wrappers_are_judged_once_where_they_are() {
    let src = Path::new("fixtures/shapes/uncalled-wrappers");
    let dir = tempfile::tempdir().expect("tempdir");
    copy_files(
        src,
        dir.path(),
        &[
            "Cargo.toml",
            "crates/locks/Cargo.toml",
            "crates/locks/src/lib.rs",
            "crates/app/Cargo.toml",
            "crates/app/src/lib.rs",
        ],
    );
    let lib = std::fs::read_to_string(src.join("crates/locks/src/lib.rs")).unwrap();
    let line_of = |needle: &str| lib.lines().position(|l| l.contains(needle)).expect(needle) + 1;
    let (lock_job, acquire, default_call) = (
        line_of(".arg(&key).arg(\"1\").arg(\"NX\")"),
        line_of(".arg(\"PX\").arg(ttl_ms)"),
        line_of("acquire(con, key, token, 10_000)"),
    );
    let wrapped_at = |include_tests: bool| -> Vec<(usize, bool, bool)> {
        let config = if include_tests {
            "include-tests = true\n"
        } else {
            ""
        };
        std::fs::write(dir.path().join("lockaudit.toml"), config).unwrap();
        let outcome = engine::check(&settings(vec![dir.path().to_path_buf()])).expect("runs");
        let report = &outcome.report;
        [lock_job, acquire, default_call]
            .into_iter()
            .map(|line| {
                let site = report
                    .sites
                    .iter()
                    .find(|s| s.path.ends_with("locks/src/lib.rs") && s.line == line)
                    .unwrap_or_else(|| panic!("a site at line {line}"));
                let judged = report
                    .active()
                    .any(|f| f.path.ends_with("locks/src/lib.rs") && f.line == line);
                (line, site.wrapped, judged)
            })
            .collect()
    };
    assert_eq!(
        wrapped_at(false),
        vec![
            (lock_job, false, true),
            (acquire, false, true),
            (default_call, true, false)
        ]
    );
    assert_eq!(
        wrapped_at(true),
        vec![
            (lock_job, true, false),
            (acquire, false, true),
            (default_call, true, false)
        ],
        "with test sites reported, the test's call judges `lock_job`"
    );
}

/// `m.set_locking(false)` before the run turns sqlx's migration lock off (the pack's `off-by`):
/// that run is no site; `set_locking(true)` leaves it one.
#[test]
fn a_migrator_told_not_to_lock_takes_no_lock() {
    let outcome = engine::check(&settings(vec![PathBuf::from(
        "fixtures/libs/sqlx-migrate.rs",
    )]))
    .expect("runs");
    let in_fn = |name: &str| {
        outcome
            .report
            .sites
            .iter()
            .filter(|s| s.function.as_deref().is_some_and(|f| f.ends_with(name)))
            .count()
    };
    assert_eq!(in_fn("own_lock_then_migrate"), 0);
    assert_eq!(in_fn("locking_on"), 1);
}
