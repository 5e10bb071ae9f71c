//! The command-line contract: exit codes, formats, bad input, determinism.

use std::process::Command;

mod common;
use common::{json, lockaudit, root, stderr, stdout};

const UNFENCED: &str = r#"use rslock::LockManager;
use std::time::Duration;

pub async fn run(m: &LockManager) -> Result<(), rslock::LockError> {
    let l = m.lock("k", Duration::from_secs(600)).await?;
    m.unlock(&l).await;
    Ok(())
}
"#;

const CLEAN: &str = r#"use std::sync::Mutex;

pub fn run(m: &Mutex<u32>) {
    *m.lock().unwrap() += 1;
}
"#;

#[test]
fn exit_codes_follow_fail_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("clean.rs"), CLEAN).expect("write");
    let o = lockaudit(dir.path(), &["check", "."]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("0 findings in 1 file"),
        "{}",
        stdout(&o)
    );

    std::fs::write(dir.path().join("lock.rs"), UNFENCED).expect("write");
    // unclassified-lock and long-deadline are warnings.
    assert_eq!(lockaudit(dir.path(), &["check"]).status.code(), Some(1));
    assert_eq!(
        lockaudit(dir.path(), &["check", "--fail-on", "error"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        lockaudit(dir.path(), &["check", "--fail-on", "never"])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        lockaudit(dir.path(), &["check", "--select", "missing-deadline"])
            .status
            .code(),
        Some(0)
    );
    let o = lockaudit(
        dir.path(),
        &["check", "--ignore", "unclassified-lock", "--format", "json"],
    );
    let rules: Vec<String> = json(&o)["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["rule"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(rules, vec!["long-deadline"]);

    let o = lockaudit(dir.path(), &["check", "no/such/path"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no/such/path: no such file or directory"),
        "{}",
        stderr(&o)
    );
    let o = lockaudit(dir.path(), &["check", "--select", "long-dedline"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("did you mean `long-deadline`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_files_are_reported_and_the_run_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("good.rs"), UNFENCED).expect("write");
    // It names a lock crate, so the prefilter parses it (see `unparsable_irrelevant_files` below).
    std::fs::write(
        d.join("broken.rs"),
        "use rslock::LockManager;\nfn main() {\n    let x = ;\n}\n",
    )
    .expect("write");
    std::fs::write(d.join("latin1.rs"), b"// caf\xe9\nfn f() {}\n").expect("write");
    std::fs::write(d.join("empty.rs"), "").expect("write");
    std::os::unix::fs::symlink(d.join("gone.rs"), d.join("dangling.rs")).expect("symlink");
    let unreadable = d.join("unreadable.rs");
    std::fs::write(&unreadable, CLEAN).expect("write");
    std::fs::set_permissions(
        &unreadable,
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .expect("chmod");
    if std::fs::read(&unreadable).is_ok() {
        // Running as root: permissions do not stop reads, but /proc/self/mem does (EIO at offset 0).
        std::fs::remove_file(&unreadable).expect("rm");
        std::os::unix::fs::symlink("/proc/self/mem", &unreadable).expect("symlink");
    }
    // A large file (about 4 MB): long comments and string data around a few functions.
    let big: String = (0..20_000)
        .map(|i| {
            if i % 200 == 0 {
                format!("pub const S{i}: &str = \"{}\";\n", "y".repeat(180))
            } else {
                format!("// {}\n", "x".repeat(180))
            }
        })
        .collect();
    std::fs::write(d.join("huge.rs"), big).expect("write");

    let o = lockaudit(d, &["check", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "findings in good.rs decide the exit code; bad files alone do not make it 2\n{}",
        stderr(&o)
    );
    let v = json(&o);
    let errors = v["errors"].as_array().expect("errors");
    let find = |p: &str| {
        errors
            .iter()
            .find(|e| e["path"] == p)
            .unwrap_or_else(|| panic!("no error for {p}: {errors:?}"))
    };
    let broken = find("broken.rs");
    assert_eq!(broken["line"], 3);
    assert!(
        broken["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("cannot parse"),
        "{broken}"
    );
    let latin1 = find("latin1.rs");
    assert_eq!(latin1["line"], 1);
    assert!(
        latin1["message"]
            .as_str()
            .unwrap_or("")
            .contains("not valid UTF-8"),
        "{latin1}"
    );
    assert!(
        find("dangling.rs")["message"]
            .as_str()
            .unwrap_or("")
            .contains("broken symbolic link")
    );
    assert!(
        find("unreadable.rs")["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("cannot read")
    );
    assert_eq!(errors.len(), 4, "empty.rs and huge.rs are fine: {errors:?}");
    assert!(
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["path"] == "good.rs")
    );

    // Every format lists them.
    let human = stdout(&lockaudit(d, &["check"]));
    assert!(
        human.contains("error: broken.rs:3: cannot parse"),
        "{human}"
    );
    assert!(human.contains("4 files could not be analysed"), "{human}");
    let gh = stdout(&lockaudit(d, &["check", "--format", "github"]));
    assert!(gh.contains("::error file=latin1.rs,line=1,title=lockaudit could not analyse this file::not valid UTF-8"), "{gh}");
    let sarif: serde_json::Value =
        serde_json::from_slice(&lockaudit(d, &["check", "--format", "sarif"]).stdout)
            .expect("sarif is JSON");
    let notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
        .as_array()
        .expect("notifications");
    assert_eq!(notes.len(), 4);
}

#[test]
fn bad_config_and_bad_pack_stop_the_run_with_a_precise_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("lock.rs"), UNFENCED).expect("write");
    let cases: &[(&str, &str)] = &[
        (
            "default-purpose = \"efficiency\"\n[rules.long-deadline]\nmax-ttl = 60\n",
            "lockaudit.toml:3:1: [rules.long-deadline] max-ttl must be a duration string",
        ),
        (
            "[rules.long-dedline]\nlevel = \"off\"\n",
            "lockaudit.toml:1:8: unknown rule `long-dedline` in [rules] (did you mean `long-deadline`?)",
        ),
        ("\n\ndefault-purpose = [\n", "lockaudit.toml:3:"),
        (
            "[[classify]]\npath = \"src/**\"\npurpose = \"corectness\"\n",
            "lockaudit.toml:3:11: [[classify]] #1: `purpose` is `corectness`",
        ),
        (
            "unknown-key = 1\n",
            "lockaudit.toml:1:1: unknown field `unknown-key`",
        ),
        (
            "[rules.long-deadline]\nmax-ttl = \"sixty\"\n",
            "lockaudit.toml:2:11: [rules.long-deadline] max-ttl `sixty`",
        ),
    ];
    for (toml, want) in cases {
        std::fs::write(d.join("lockaudit.toml"), toml).expect("write");
        let o = lockaudit(d, &["check", "."]);
        assert_eq!(o.status.code(), Some(2), "{toml}");
        assert!(
            stderr(&o).contains(want),
            "for {toml:?} expected {want:?} in: {}",
            stderr(&o)
        );
    }
    std::fs::write(d.join("lockaudit.toml"), "packs = [\"mine.toml\"]\n").expect("write");
    std::fs::write(d.join("mine.toml"), "[pack]\nname = \"mine\"\nconsensus = false\nfencing = \"none\"\nrelease = \"explicit\"\n\n[[call]]\nkind = \"acquire\"\nmethod = \"grab\"\n").expect("write");
    let o = lockaudit(d, &["check", "."]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(
            "mine.toml:7:1: invalid rule pack: [[call]] #1 is a method call and needs `receiver`"
        ),
        "{}",
        stderr(&o)
    );
    std::fs::write(
        d.join("mine.toml"),
        "[pack]\nname = \"mine\"\nfencing = \"maybe\"\n",
    )
    .expect("write");
    let o = lockaudit(d, &["check", "."]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("mine.toml:3:11: invalid rule pack"),
        "{}",
        stderr(&o)
    );
    // --config pointing nowhere.
    std::fs::remove_file(d.join("lockaudit.toml")).expect("rm");
    let o = lockaudit(d, &["check", "--config", "nope.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("nope.toml: cannot read config: no such file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn json_contract_and_determinism() {
    let o = lockaudit(
        &root(),
        &["check", "fixtures", "--format", "json", "--threads", "2"],
    );
    let again = lockaudit(
        &root(),
        &["check", "fixtures", "--format", "json", "--threads", "1"],
    );
    assert_eq!(
        o.stdout, again.stdout,
        "output does not depend on scheduling"
    );
    let v = json(&o);
    assert_eq!(v["tool"]["name"], "lockaudit");
    let sites = v["sites"].as_array().expect("sites");
    assert!(sites.len() > 50);
    for s in sites {
        for key in [
            "path",
            "line",
            "column",
            "library",
            "api",
            "purpose",
            "purpose_source",
            "ttl_ms",
            "fencing",
        ] {
            assert!(s.get(key).is_some(), "site lacks {key}: {s}");
        }
        assert!(!s["path"].as_str().unwrap_or("").contains('\\'));
    }
    let keys: Vec<(String, u64)> = sites
        .iter()
        .map(|s| {
            (
                s["path"].as_str().unwrap_or("").to_string(),
                s["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sites are sorted by path then line");
    let findings = v["findings"].as_array().expect("findings");
    for f in findings {
        for key in [
            "rule",
            "severity",
            "path",
            "line",
            "column",
            "end_line",
            "end_column",
            "message",
            "fingerprint",
        ] {
            assert!(f.get(key).is_some(), "finding lacks {key}: {f}");
        }
    }
    let fps: std::collections::HashSet<&str> = findings
        .iter()
        .map(|f| f["fingerprint"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(fps.len(), findings.len(), "fingerprints are unique");
}

#[test]
fn fingerprints_survive_inserted_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("lock.rs"), UNFENCED).expect("write");
    let before = json(&lockaudit(dir.path(), &["check", "--format", "json"]));
    std::fs::write(
        dir.path().join("lock.rs"),
        format!("// a new header line\n\n{UNFENCED}"),
    )
    .expect("write");
    let after = json(&lockaudit(dir.path(), &["check", "--format", "json"]));
    let fp = |v: &serde_json::Value| {
        v["findings"]
            .as_array()
            .expect("f")
            .iter()
            .map(|f| f["fingerprint"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(fp(&before), fp(&after));
    assert_eq!(
        before["findings"][0]["line"].as_u64().map(|l| l + 2),
        after["findings"][0]["line"].as_u64()
    );
}

/// SARIF 2.1.0, typed for the subset lockaudit emits. Unknown fields are rejected, so a field
/// added to the output (or misspelt) must be added here, with its constraints, deliberately.
mod sarif {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Log {
        #[serde(rename = "$schema")]
        pub schema: String,
        pub version: String,
        pub runs: Vec<Run>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Run {
        pub tool: Tool,
        pub original_uri_base_ids: std::collections::BTreeMap<String, UriBase>,
        pub column_kind: String,
        pub results: Vec<SarifResult>,
        pub invocations: Vec<Invocation>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct UriBase {
        pub description: Text,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Tool {
        pub driver: Driver,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Driver {
        pub name: String,
        pub version: String,
        pub semantic_version: String,
        pub information_uri: String,
        pub rules: Vec<Rule>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Rule {
        pub id: String,
        pub name: String,
        pub short_description: Text,
        pub full_description: Text,
        pub help: Help,
        pub default_configuration: Configuration,
        pub properties: RuleProperties,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Text {
        pub text: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Help {
        pub text: String,
        pub markdown: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Configuration {
        pub level: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RuleProperties {
        pub tags: Vec<String>,
        pub precision: String,
        #[serde(rename = "problem.severity")]
        pub problem_severity: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct SarifResult {
        pub rule_id: String,
        pub rule_index: usize,
        pub level: String,
        pub message: Text,
        pub locations: Vec<Location>,
        pub partial_fingerprints: Fingerprints,
        #[serde(default)]
        pub suppressions: Vec<Suppression>,
        #[serde(default)]
        pub fixes: Vec<Fix>,
    }

    /// §3.55.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Fix {
        pub description: Text,
        pub artifact_changes: Vec<ArtifactChange>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct ArtifactChange {
        pub artifact_location: Artifact,
        pub replacements: Vec<Replacement>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Replacement {
        pub deleted_region: Region,
        pub inserted_content: Option<Text>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Suppression {
        pub kind: String,
        pub justification: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Location {
        pub physical_location: Physical,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Physical {
        pub artifact_location: Artifact,
        pub region: Option<Region>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Artifact {
        pub uri: String,
        pub uri_base_id: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Region {
        pub start_line: usize,
        pub start_column: Option<usize>,
        pub end_line: Option<usize>,
        pub end_column: Option<usize>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Fingerprints {
        pub primary_location_line_hash: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Invocation {
        pub execution_successful: bool,
        pub tool_execution_notifications: Vec<Notification>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Notification {
        pub level: String,
        pub message: Text,
        pub locations: Vec<Location>,
    }

    fn uri_ok(a: &Artifact, bases: &std::collections::BTreeMap<String, UriBase>) {
        assert!(!a.uri.is_empty(), "empty artifact URI");
        assert!(
            !a.uri.contains(' ') && !a.uri.contains('\\'),
            "URI not encoded: {}",
            a.uri
        );
        match &a.uri_base_id {
            Some(base) => {
                assert!(bases.contains_key(base), "undeclared uriBaseId {base}");
                assert!(!a.uri.starts_with('/'), "relative URI expected: {}", a.uri);
            }
            None => assert!(
                a.uri.starts_with("file://"),
                "absolute URI expected: {}",
                a.uri
            ),
        }
    }

    /// What the schema and GitHub code scanning require beyond the shape.
    pub fn check(log: &Log) {
        assert_eq!(log.version, "2.1.0");
        assert!(log.schema.contains("sarif-2.1.0"), "{}", log.schema);
        assert_eq!(log.runs.len(), 1);
        let run = &log.runs[0];
        assert_eq!(run.column_kind, "utf16CodeUnits");
        let d = &run.tool.driver;
        assert_eq!(d.name, "lockaudit");
        assert!(!d.version.is_empty() && d.semantic_version.split('.').count() == 3);
        assert!(d.information_uri.starts_with("https://"));
        assert!(!d.rules.is_empty());
        for r in &d.rules {
            assert!(!r.id.is_empty() && !r.name.is_empty());
            assert!(
                !r.name.contains('-'),
                "rule name is an identifier: {}",
                r.name
            );
            assert!(!r.short_description.text.is_empty());
            assert!(r.short_description.text.chars().count() <= 1000);
            assert!(r.full_description.text.chars().count() <= 1000);
            assert!(!r.help.text.is_empty());
            assert!(r.help.markdown.contains("## Why it matters"), "{}", r.id);
            assert!(matches!(
                r.default_configuration.level.as_str(),
                "error" | "warning" | "note" | "none"
            ));
            assert!(matches!(
                r.properties.problem_severity.as_str(),
                "error" | "warning" | "recommendation"
            ));
            assert!(!r.properties.tags.is_empty() && !r.properties.precision.is_empty());
        }
        assert!(!run.results.is_empty(), "the fixtures have findings");
        for res in &run.results {
            let rule = d
                .rules
                .get(res.rule_index)
                .unwrap_or_else(|| panic!("ruleIndex {} out of range", res.rule_index));
            assert_eq!(rule.id, res.rule_id, "ruleIndex points at another rule");
            assert!(matches!(res.level.as_str(), "error" | "warning" | "note"));
            assert!(!res.message.text.is_empty());
            assert!(
                !res.partial_fingerprints
                    .primary_location_line_hash
                    .is_empty()
            );
            assert_eq!(res.locations.len(), 1);
            let p = &res.locations[0].physical_location;
            uri_ok(&p.artifact_location, &run.original_uri_base_ids);
            for f in &res.fixes {
                assert!(!f.description.text.is_empty());
                assert!(!f.artifact_changes.is_empty());
                for c in &f.artifact_changes {
                    uri_ok(&c.artifact_location, &run.original_uri_base_ids);
                    assert_eq!(c.artifact_location.uri, p.artifact_location.uri);
                    assert!(!c.replacements.is_empty());
                    for r in &c.replacements {
                        let d = &r.deleted_region;
                        let start = (d.start_line, d.start_column.expect("startColumn"));
                        let end = (
                            d.end_line.expect("endLine"),
                            d.end_column.expect("endColumn"),
                        );
                        assert!(start.0 >= 1 && start.1 >= 1 && end.1 >= 1);
                        assert!(end >= start, "deletedRegion ends before it starts");
                        let inserted = r.inserted_content.as_ref().map(|t| t.text.as_str());
                        assert!(start != end || inserted.is_some_and(|t| !t.is_empty()));
                    }
                }
            }
            let r = p.region.as_ref().expect("a result has a region");
            let (sc, el, ec) = (
                r.start_column.expect("startColumn"),
                r.end_line.expect("endLine"),
                r.end_column.expect("endColumn"),
            );
            assert!(r.start_line >= 1 && sc >= 1 && ec >= 1);
            assert!(
                (el, ec) >= (r.start_line, sc),
                "region ends before it starts"
            );
            for s in &res.suppressions {
                assert_eq!(s.kind, "inSource");
                assert!(!s.justification.is_empty());
            }
        }
        for b in run.original_uri_base_ids.values() {
            assert!(!b.description.text.is_empty());
        }
        assert_eq!(run.invocations.len(), 1);
        assert!(run.invocations[0].execution_successful);
        for n in &run.invocations[0].tool_execution_notifications {
            assert!(matches!(n.level.as_str(), "error" | "warning" | "note"));
            assert!(!n.message.text.is_empty());
            for l in &n.locations {
                uri_ok(
                    &l.physical_location.artifact_location,
                    &run.original_uri_base_ids,
                );
                if let Some(r) = &l.physical_location.region {
                    assert!(r.start_line >= 1);
                }
            }
        }
    }
}

#[test]
fn sarif_of_the_fixtures_validates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("fixtures.sarif");
    let o = lockaudit(
        &root(),
        &[
            "check",
            "fixtures",
            "--format",
            "sarif",
            "--output",
            out.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "--output writes the file, not stdout");
    // The structure every SARIF log we write must have, checked in the repository so that a
    // fresh clone tests it; `.ci/run` also runs the official schema validator where it exists.
    let log: sarif::Log = serde_json::from_slice(&std::fs::read(&out).expect("read"))
        .unwrap_or_else(|e| panic!("the SARIF log does not have the shape we emit: {e}"));
    sarif::check(&log);
    assert!(
        log.runs[0].results.iter().any(|r| !r.fixes.is_empty()),
        "the fixtures have fixes"
    );
    // The typed check is strict: a field it does not know is an error, not ignored.
    let mut extra: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("json");
    extra["runs"][0]["results"][0]["rank"] = 1.0.into();
    assert!(serde_json::from_value::<sarif::Log>(extra).is_err());
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("read")).expect("json");
    let run = &doc["runs"][0];
    assert_eq!(run["columnKind"], "utf16CodeUnits");
    let r0 = &run["results"][0];
    assert_eq!(
        r0["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"],
        "%SRCROOT%"
    );
    assert!(
        r0["partialFingerprints"]["primaryLocationLineHash"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    for rule in run["tool"]["driver"]["rules"].as_array().expect("rules") {
        assert!(
            rule["help"]["markdown"]
                .as_str()
                .is_some_and(|m| m.contains("## Why it matters"))
        );
    }
}

#[test]
fn github_format_and_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("src/a b")).expect("mkdir");
    std::fs::write(dir.path().join("src/a b/lock.rs"), UNFENCED).expect("write");
    let o = lockaudit(dir.path(), &["check", "./src/../src", "--format", "github"]);
    let text = stdout(&o);
    assert!(text.contains("::warning file=src/a b/lock.rs,line=5,col=15,endLine=5,endColumn=19,title=lockaudit long-deadline::"), "{text}");
    // Outside the current directory: absolute paths.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let o = lockaudit(
        elsewhere.path(),
        &[
            "check",
            dir.path().to_str().expect("utf-8"),
            "--format",
            "json",
        ],
    );
    let p = json(&o)["sites"][0]["path"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(p.starts_with('/') && p.ends_with("src/a b/lock.rs"), "{p}");
    let sarif = stdout(&lockaudit(
        elsewhere.path(),
        &[
            "check",
            dir.path().to_str().expect("utf-8"),
            "--format",
            "sarif",
        ],
    ));
    assert!(
        sarif.contains("\"uri\": \"file:///") && sarif.contains("a%20b/lock.rs"),
        "{sarif}"
    );
}

#[test]
fn files_named_on_the_command_line_are_taken_as_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("lock.rs"), UNFENCED).expect("write");
    std::fs::write(d.join("lock.txt"), UNFENCED).expect("write");
    std::os::unix::fs::symlink(d.join("lock.rs"), d.join("link.rs")).expect("symlink");
    // The same file twice (once through `./`), a file without the .rs extension, a symlink.
    let o = lockaudit(
        d,
        &[
            "check",
            "lock.rs",
            "./lock.rs",
            "lock.txt",
            "link.rs",
            "--format",
            "json",
        ],
    );
    let report = json(&o);
    let mut paths: Vec<&str> = report["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["link.rs", "lock.rs", "lock.txt"], "{report}");
}

/// A hook may name hundreds of files; long lists are looked at on several threads, and the
/// result must not depend on that: every file, link and folder is taken as when named alone,
/// and the first missing path in the order given is the one reported.
#[test]
fn long_lists_of_named_files_keep_their_meaning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).expect("mkdir");
    std::fs::write(d.join("sub/inner.rs"), UNFENCED).expect("write");
    std::os::unix::fs::symlink(d.join("gone.rs"), d.join("broken.rs")).expect("symlink");
    let mut names: Vec<String> = (0..700).map(|i| format!("f{i}.rs")).collect();
    for n in &names {
        std::fs::write(d.join(n), UNFENCED).expect("write");
    }
    names.insert(350, "sub".into());
    names.insert(600, "broken.rs".into());
    let args = |names: &[String]| -> Vec<String> {
        let mut a: Vec<String> = ["check", "--threads", "2", "--no-cache", "--format", "json"]
            .map(String::from)
            .to_vec();
        a.extend(names.iter().cloned());
        a
    };
    let run = |names: &[String]| {
        let a = args(names);
        lockaudit(d, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let o = run(&names);
    let report = json(&o);
    let sites = report["sites"].as_array().expect("sites");
    assert_eq!(sites.len(), 701, "every named file and the folder's file");
    assert!(
        sites.iter().any(|s| s["path"] == "sub/inner.rs"),
        "{report}"
    );
    let errors = report["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "{report}");
    assert_eq!(errors[0]["path"], "broken.rs");
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("broken symbolic link")),
        "{report}"
    );

    let mut missing = names.clone();
    missing.insert(300, "missing-a.rs".into());
    missing.insert(650, "missing-b.rs".into());
    let o = run(&missing);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing-a.rs"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("missing-b.rs"), "{}", stderr(&o));
}

/// A site's `api` names what the code shows: the receiver's type when known, else the trait
/// the call was matched through, never a type the code may not use.
#[test]
fn sites_are_named_after_what_the_code_shows() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("backends.rs"),
        r#"use std::time::Duration;
use fenced_lock::{LockBackend, RedisBackend};

// lockaudit: efficiency
pub async fn unknown(key: &str) {
    let b = make_backend();
    if let Ok(Some(l)) = b.try_acquire(key, Duration::from_secs(5)).await {
        let _ = b.release(l).await;
    }
}

// lockaudit: efficiency
pub async fn concrete(b: &RedisBackend, key: &str) {
    if let Ok(Some(l)) = b.try_acquire(key, Duration::from_secs(5)).await {
        let _ = b.release(l).await;
    }
}
"#,
    )
    .expect("write");
    let o = lockaudit(dir.path(), &["check", "--no-cache", "--format", "json"]);
    let report = json(&o);
    let apis: Vec<(u64, &str)> = report["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| {
            (
                s["line"].as_u64().unwrap_or(0),
                s["api"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        apis,
        [
            (7, "LockBackend::try_acquire"),
            (14, "RedisBackend::try_acquire")
        ],
        "{report}"
    );
}

#[test]
fn closed_pipe_ends_quietly() {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' check fixtures | head -c 10 >/dev/null",
            env!("CARGO_BIN_EXE_lockaudit")
        ))
        .current_dir(root())
        .output()
        .expect("sh runs");
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "no panic on a closed pipe: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn rules_and_explain() {
    let o = lockaudit(&root(), &["rules"]);
    let text = stdout(&o);
    for r in lockaudit::lints::RULES {
        assert!(text.contains(r.id), "{} listed", r.id);
    }
    let o = lockaudit(&root(), &["explain", "missing-deadline"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(text.starts_with("# missing-deadline (default: error)"));
    for h in [
        "## What it does",
        "## Why it matters",
        "## Example",
        "## Use instead",
        "## Known limits",
    ] {
        assert!(text.contains(h), "{h}");
    }
    let o = lockaudit(&root(), &["explain", "missing-dedline"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("did you mean `missing-deadline`"));
}

#[test]
fn mutex_heavy_code_has_no_sites() {
    let o = lockaudit(
        &root(),
        &[
            "check",
            "fixtures/negatives",
            "fixtures/model/look_alikes.rs",
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let v = json(&o);
    assert_eq!(
        v["sites"].as_array().map(Vec::len),
        Some(0),
        "{}",
        v["sites"]
    );
}

#[test]
fn unparsable_irrelevant_files_are_reported_only_without_the_prefilter() {
    // The prefilter does not parse a file that cannot hold a lock site, so its syntax errors are
    // only reported by --no-prefilter (documented in README).
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("plain.rs"),
        "fn main() {\n    let x = ;\n}\n",
    )
    .expect("write");
    let fast = json(&lockaudit(
        dir.path(),
        &["check", "--format", "json", "--no-cache"],
    ));
    assert_eq!(fast["errors"].as_array().map(Vec::len), Some(0));
    let full = json(&lockaudit(
        dir.path(),
        &["check", "--format", "json", "--no-cache", "--no-prefilter"],
    ));
    assert_eq!(full["errors"][0]["line"], 2);
}

#[test]
fn inventory_and_annotate_take_the_cache_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("lock.rs"), UNFENCED).expect("write");
    let o = lockaudit(dir.path(), &["inventory", "--no-cache", "."]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("rslock"), "{}", stdout(&o));
    assert!(!dir.path().join(".lockaudit_cache").exists());
    let o = lockaudit(
        dir.path(),
        &["inventory", "--cache-dir", "elsewhere", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("elsewhere").is_dir());
    assert!(!dir.path().join(".lockaudit_cache").exists());
    let o = lockaudit(
        dir.path(),
        &[
            "annotate",
            "--purpose",
            "efficiency",
            "--dry-run",
            "--no-cache",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("+    // lockaudit: efficiency"),
        "{}",
        stdout(&o)
    );
    assert!(!dir.path().join(".lockaudit_cache").exists());
    let o = lockaudit(
        dir.path(),
        &[
            "annotate",
            "--purpose",
            "efficiency",
            "--dry-run",
            "--cache-dir",
            "c2",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(dir.path().join("c2").is_dir());
}

#[test]
fn cargo_subcommand_help_names_cargo_lockaudit() {
    let o = Command::new(env!("CARGO_BIN_EXE_cargo-lockaudit"))
        .args(["lockaudit", "--help"])
        .output()
        .expect("runs");
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("Usage: cargo lockaudit <COMMAND>"),
        "{}",
        stdout(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_cargo-lockaudit"))
        .args(["lockaudit", "check", "--help"])
        .output()
        .expect("runs");
    assert!(
        stdout(&o).contains("Usage: cargo lockaudit check"),
        "{}",
        stdout(&o)
    );
    // As `lockaudit`, the name stays.
    let o = lockaudit(&root(), &["--help"]);
    assert!(
        stdout(&o).contains("Usage: lockaudit <COMMAND>"),
        "{}",
        stdout(&o)
    );
}

/// Runs the binary, killing it (and failing) if it has not finished in 30 s: a FIFO that is
/// read waits forever.
fn lockaudit_bounded(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockaudit"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    let start = std::time::Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            panic!("lockaudit {args:?} hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn mkfifo(p: &std::path::Path) {
    let ok = Command::new("mkfifo").arg(p).status().expect("mkfifo runs");
    assert!(ok.success());
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_not_read() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for c in ["a", "b", "c", "d"] {
        std::fs::create_dir_all(d.join(c).join("src")).expect("mkdir");
        std::fs::write(d.join(c).join("src/lib.rs"), UNFENCED).expect("write");
    }
    // A FIFO Cargo.toml in the tree: named, the rest analysed.
    mkfifo(&d.join("a/Cargo.toml"));
    let o = lockaudit_bounded(d, &["check", "a", "--no-cache", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["sites"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["errors"][0]["path"], "a/Cargo.toml");
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("FIFO")),
        "{v}"
    );
    // A Cargo.toml that is a link to /dev/zero: not read (memory stays flat).
    symlink("/dev/zero", d.join("b/Cargo.toml")).expect("link");
    // A `.rs` FIFO met in the walk: named, not read.
    mkfifo(&d.join("b/src/pipe.rs"));
    let o = lockaudit_bounded(d, &["check", "b", "--no-cache"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("b/src/pipe.rs: is a FIFO (named pipe), not a regular file; not read"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("b/Cargo.toml: is a device, not a regular file"),
        "{}",
        stdout(&o)
    );
    // A rule pack, --baseline and --manifest-path that are FIFOs, --config a folder or a
    // device, a FIFO named as a file to check: errors (exit 2) naming the file.
    mkfifo(&d.join("c/p.toml"));
    std::fs::write(d.join("c/lockaudit.toml"), "packs = [\"p.toml\"]\n").expect("write");
    mkfifo(&d.join("bl.json"));
    mkfifo(&d.join("x.rs"));
    for (args, says) in [
        (vec!["check", "c"], "cannot read rule pack"),
        (
            vec!["check", "a/src", "--baseline", "bl.json"],
            "bl.json: cannot read baseline: is a FIFO",
        ),
        (
            vec!["check", "--manifest-path", "a/Cargo.toml"],
            "a/Cargo.toml: cannot read: is a FIFO",
        ),
        (
            vec!["check", "d", "--config", "d"],
            "d: cannot read config: is a directory",
        ),
        (
            vec!["check", "d", "--config", "/dev/null"],
            "/dev/null: cannot read config: is a device",
        ),
        (
            vec!["check", "x.rs"],
            "x.rs: is a FIFO (named pipe), not a regular file",
        ),
        (vec!["inventory", "x.rs"], "x.rs: is a FIFO"),
    ] {
        let mut args = args.clone();
        args.push("--no-cache");
        let o = lockaudit_bounded(d, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // Cache entries that became FIFOs: recomputed, same answer.
    let first = lockaudit_bounded(d, &["check", "d", "--format", "json"]);
    let cache = d.join(".lockaudit_cache");
    let mut entries = 0;
    for v in std::fs::read_dir(&cache).expect("cache").flatten() {
        for e in std::fs::read_dir(v.path()).into_iter().flatten().flatten() {
            if e.path().extension().is_some_and(|x| x == "json") {
                std::fs::remove_file(e.path()).expect("rm");
                mkfifo(&e.path());
                entries += 1;
            }
        }
    }
    assert!(entries > 0, "the first run wrote the cache");
    let again = lockaudit_bounded(d, &["check", "d", "--format", "json"]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(json(&first)["findings"], json(&again)["findings"]);
}

#[cfg(unix)]
#[test]
fn messages_say_what_is_wrong() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::create_dir(d.join("src")).expect("mkdir");
    std::fs::write(d.join("src/lib.rs"), UNFENCED).expect("write");
    // A duration given as a number: the key is known, the value is the problem; the message
    // points at the key's line, not the table's.
    std::fs::write(
        d.join("lockaudit.toml"),
        "[rules.long-deadline]\nlevel = \"warning\"\nmax-ttl = 60\n",
    )
    .expect("write");
    let o = lockaudit(d, &["check", "--no-cache"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("lockaudit.toml:3:1: [rules.long-deadline] max-ttl must be a duration string such as \"60s\""),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("unknown"), "{}", stderr(&o));
    std::fs::write(
        d.join("lockaudit.toml"),
        "[rules.long-deadline]\nlevel = \"warning\"\n\nmax-tl = \"1m\"\n",
    )
    .expect("write");
    let o = lockaudit(d, &["check", "--no-cache"]);
    assert!(
        stderr(&o).contains("lockaudit.toml:4:1: [rules.long-deadline]: unknown key `max-tl`"),
        "{}",
        stderr(&o)
    );
    std::fs::write(
        d.join("lockaudit.toml"),
        "[[classify]]\nkey = \"a\"\npurpose = \"correctness\"\n\n[[classify]]\nkey = \"b\"\npurpose = \"both\"\n",
    )
    .expect("write");
    let o = lockaudit(d, &["check", "--no-cache"]);
    assert!(
        stderr(&o).contains("lockaudit.toml:7:11: [[classify]] #2: `purpose` is `both`"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(d.join("lockaudit.toml")).expect("rm");

    // --select '' is a mistake, not "run nothing".
    let o = lockaudit(d, &["check", "--no-cache", "--select", ""]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--select names no rule"),
        "{}",
        stderr(&o)
    );

    // A symbolic link loop is a loop.
    symlink("a.rs", d.join("src/b.rs")).expect("link");
    symlink("b.rs", d.join("src/a.rs")).expect("link");
    let o = lockaudit(d, &["check", "--no-cache"]);
    assert!(
        stdout(&o).contains("src/a.rs: symbolic link loop"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("does not exist"), "{}", stdout(&o));
    std::fs::remove_file(d.join("src/a.rs")).expect("rm");
    std::fs::remove_file(d.join("src/b.rs")).expect("rm");

    // A dangling lockaudit.toml is named; a broken Cargo.toml is noted with --verbose.
    symlink("/nonexistent/lockaudit.toml", d.join("lockaudit.toml")).expect("link");
    std::fs::write(d.join("Cargo.toml"), "[package\nname = \"x\"\n").expect("write");
    let o = lockaudit(d, &["check", "--no-cache"]);
    assert!(
        stdout(&o).contains("error: lockaudit.toml: broken symbolic link: its target `/nonexistent/lockaudit.toml` does not exist; not used as configuration"),
        "{}",
        stdout(&o)
    );
    assert!(!stderr(&o).contains("Cargo.toml"), "{}", stderr(&o));
    let o = lockaudit(d, &["check", "--no-cache", "--verbose"]);
    assert!(
        stderr(&o).contains("Cargo.toml:1: not valid TOML"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn markdown_inventory_escapes_table_breakers() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("keys.rs"),
        "use rslock::LockManager;\nuse std::time::Duration;\npub async fn f(mgr: &LockManager) { let _l = mgr.lock(\"lock|tenant\", Duration::from_secs(10)).await; }\npub async fn g(mgr: &LockManager) { let _l = mgr.lock(\"a\\nb\", Duration::from_secs(10)).await; }\n",
    )
    .expect("write");
    let o = lockaudit(dir.path(), &["inventory", "--no-cache"]);
    let md = stdout(&o);
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `keys.rs")).collect();
    assert_eq!(rows.len(), 2, "{md}");
    for r in &rows {
        // Every row has as many unescaped cell separators as the header.
        let cells = r.replace("\\|", "").matches('|').count();
        let header = md
            .lines()
            .find(|l| l.starts_with("| location"))
            .expect("header");
        assert_eq!(cells, header.matches('|').count(), "{r}");
    }
    assert!(md.contains("`lock\\|tenant`"), "{md}");
    assert!(md.contains("`a\\nb`"), "{md}");
}

#[test]
fn test_code_sites_are_marked_and_their_findings_left_out() {
    let fixture = root().join("fixtures/tests_code");
    let o = lockaudit(&fixture, &["check", "--no-cache", "--format", "json"]);
    let v = json(&o);
    let sites = v["sites"].as_array().expect("sites");
    let test_sites: Vec<(String, u64)> = sites
        .iter()
        .filter(|s| s["test"] == true)
        .map(|s| {
            (
                s["path"].as_str().unwrap_or("").to_string(),
                s["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    // tests/, benches/, a #[tokio::test] fn and a #[cfg(test)] module's helper and its call,
    // and the files of a module declared `#[cfg(test)] mod support;` (and a module inside it).
    assert_eq!(
        test_sites,
        vec![
            ("benches/renumber.rs".to_string(), 13),
            ("src/lib.rs".to_string(), 37),
            ("src/lib.rs".to_string(), 46),
            // A call of that helper, which leaves the lock held under its key argument.
            ("src/lib.rs".to_string(), 57),
            ("src/support/mod.rs".to_string(), 10),
            ("src/support/seed.rs".to_string(), 6),
            ("tests/numbering.rs".to_string(), 9),
            ("tests/numbering.rs".to_string(), 15),
        ],
        "{v}"
    );
    // Production code, examples and `#[cfg(not(test))]` items are not test sites.
    assert!(
        sites
            .iter()
            .filter(|s| s["test"].is_null())
            .all(|s| s["path"] == "src/lib.rs" || s["path"] == "examples/renumber.rs"),
        "{v}"
    );
    for f in v["findings"].as_array().expect("findings") {
        let at = (
            f["path"].as_str().unwrap_or("").to_string(),
            f["line"].as_u64().unwrap_or(0),
        );
        assert!(!test_sites.contains(&at), "finding at a test site: {f}");
    }
    // The inventory marks them too.
    let o = lockaudit(&fixture, &["inventory", "--no-cache", "--format", "json"]);
    let inv = json(&o);
    let marked = inv["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .filter(|s| s["test"] == true)
        .count();
    assert_eq!(marked, test_sites.len(), "{inv}");
    let md = stdout(&lockaudit(&fixture, &["inventory", "--no-cache"]));
    assert!(md.contains("| findings | test |"), "{md}");

    // include-tests = true turns them back on; the key is validated like the others.
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("all.toml");
    std::fs::write(
        &cfg,
        "include-tests = true\ndefault-purpose = \"efficiency\"\n",
    )
    .expect("write");
    let o = lockaudit(
        &fixture,
        &[
            "check",
            "--no-cache",
            "--format",
            "json",
            "--config",
            cfg.to_str().expect("utf-8"),
        ],
    );
    let with = json(&o);
    // Every primitive there gets its findings back (a wrapper's call is judged for purpose
    // only, and these are classified).
    let primitives = sites
        .iter()
        .filter(|s| s["test"] == true && s["via"].is_null())
        .map(|s| {
            (
                s["path"].as_str().unwrap_or("").to_string(),
                s["line"].as_u64().unwrap_or(0),
            )
        });
    for (path, line) in primitives {
        assert!(
            with["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .any(|f| f["path"] == path.as_str() && f["line"].as_u64() == Some(line)),
            "no finding at {path}:{line} with include-tests: {with}"
        );
    }
    std::fs::write(&cfg, "\ninclude-tests = \"yes\"\n").expect("write");
    let o = lockaudit(
        &fixture,
        &[
            "check",
            "--no-cache",
            "--config",
            cfg.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("all.toml:2:17: `include-tests` must be true or false, found string"),
        "{}",
        stderr(&o)
    );
}
