//! `check --format gitlab|junit|rdjson`: each output checked against a schema of its format
//! (tests/schemas/, transcribed from the published specifications) and against the JSON report
//! of the same run, so a finding that goes missing, moves, or changes its fingerprint fails too.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

mod common;
use common::{json, lockaudit, root, stdout};

fn schema(name: &str) -> jsonschema::Validator {
    let path = root().join("tests/schemas").join(name);
    let text = std::fs::read_to_string(&path).expect("schema file");
    let value: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::validator_for(&value).unwrap_or_else(|e| panic!("{name} is not a schema: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, doc: &serde_json::Value, what: &str) {
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} breaks its schema:\n{}",
        errors.join("\n")
    );
}

/// The unsuppressed findings of `check --format json` on the same paths.
fn active_findings(dir: &Path, paths: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["check", "--no-cache", "--format", "json"];
    args.extend(paths);
    let doc = json(&lockaudit(dir, &args));
    doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["suppressed"] == false)
        .cloned()
        .collect()
}

fn run(dir: &Path, format: &str, paths: &[&str]) -> String {
    let mut args = vec!["check", "--no-cache", "--format", format];
    args.extend(paths);
    let o = lockaudit(dir, &args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "exit {:?}: {}",
        o.status.code(),
        common::stderr(&o)
    );
    stdout(&o)
}

const MULTIBYTE: &str = r#"use rslock::LockManager;
use std::time::Duration;

pub async fn run(m: &LockManager) -> Result<(), rslock::LockError> {
    let _ñandú = "ünïcödé"; let l = m.lock("k", Duration::from_secs(600)).await?;
    m.unlock(&l).await;
    Ok(())
}
"#;

const SUPPRESSED: &str = r#"use rslock::LockManager;
use std::time::Duration;

pub async fn run(m: &LockManager) -> Result<(), rslock::LockError> {
    // lockaudit: efficiency
    // lockaudit: allow(long-deadline) reason = "a nightly job, nothing else runs"
    let l = m.lock("k", Duration::from_secs(600)).await?;
    m.unlock(&l).await;
    Ok(())
}
"#;

#[test]
fn gitlab_report_follows_the_code_quality_format() {
    let v = schema("gitlab-codequality.schema.json");
    let text = run(&root(), "gitlab", &["fixtures"]);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_valid(&v, &doc, "gitlab report of fixtures/");
    let issues = doc.as_array().expect("array");

    // One issue per unsuppressed finding, same place and fingerprint; nothing else but the
    // files that could not be analysed.
    let findings = active_findings(&root(), &["fixtures"]);
    let from_json: BTreeSet<(String, u64, String, String)> = findings
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
                f["rule"].as_str().unwrap().to_string(),
                f["fingerprint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let from_gitlab: BTreeSet<(String, u64, String, String)> = issues
        .iter()
        .filter(|i| i["check_name"] != "analysis-error")
        .map(|i| {
            (
                i["location"]["path"].as_str().unwrap().to_string(),
                i["location"]["lines"]["begin"].as_u64().unwrap(),
                i["check_name"].as_str().unwrap().to_string(),
                i["fingerprint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(!from_json.is_empty());
    assert_eq!(from_gitlab, from_json);
    assert_eq!(issues.len() - count_errors(issues), findings.len());
    // GitLab deduplicates by fingerprint: two issues with one fingerprint would hide one.
    let fps: BTreeSet<&str> = issues
        .iter()
        .map(|i| i["fingerprint"].as_str().unwrap())
        .collect();
    assert_eq!(fps.len(), issues.len(), "fingerprints are unique");
    let severities: BTreeSet<&str> = issues
        .iter()
        .map(|i| i["severity"].as_str().unwrap())
        .collect();
    assert!(
        severities.contains("critical") && severities.contains("major"),
        "{severities:?}"
    );
    // Sorted, and the same bytes on a second run.
    let keys: Vec<(String, u64)> = issues
        .iter()
        .map(|i| {
            (
                i["location"]["path"].as_str().unwrap().to_string(),
                i["location"]["lines"]["begin"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(run(&root(), "gitlab", &["fixtures"]), text);

    // The schema is not a rubber stamp: the shapes GitLab would drop fail it.
    let mut broken = doc.clone();
    broken[0]["severity"] = "error".into();
    assert!(!v.is_valid(&broken), "severity outside GitLab's scale");
    let mut broken = doc.clone();
    broken[0]["location"]["path"] = "/abs/path.rs".into();
    assert!(!v.is_valid(&broken), "absolute path");
    let mut broken = doc;
    broken[0].as_object_mut().unwrap().remove("fingerprint");
    assert!(!v.is_valid(&broken), "no fingerprint");
}

fn count_errors(issues: &[serde_json::Value]) -> usize {
    issues
        .iter()
        .filter(|i| i["check_name"] == "analysis-error")
        .count()
}

#[test]
fn gitlab_leaves_out_suppressed_findings_and_reports_unreadable_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("quiet.rs"), SUPPRESSED).expect("write");
    let doc: serde_json::Value =
        serde_json::from_str(&run(dir.path(), "gitlab", &["."])).expect("JSON");
    assert_eq!(
        doc,
        serde_json::json!([]),
        "suppressed findings are left out"
    );

    std::fs::write(
        dir.path().join("broken.rs"),
        "use rslock::LockManager;\nfn f( {\n",
    )
    .expect("write");
    let doc: serde_json::Value =
        serde_json::from_str(&run(dir.path(), "gitlab", &["."])).expect("JSON");
    assert_valid(
        &schema("gitlab-codequality.schema.json"),
        &doc,
        "report with an error",
    );
    let issues = doc.as_array().unwrap();
    assert_eq!(issues.len(), 1, "{doc}");
    assert_eq!(issues[0]["check_name"], "analysis-error");
    assert_eq!(issues[0]["location"]["path"], "broken.rs");
}

fn xmllint() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("xmllint"))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!("xmllint not found (Debian package libxml2-utils): XSD validation skipped");
    }
    found
}

/// Validates against tests/schemas/junit.xsd with libxml2 when it is installed (scripts/services
/// installs it), and always parses with roxmltree.
fn check_junit_xml(xml: &str) -> roxmltree::Document<'_> {
    if let Some(lint) = xmllint() {
        let file = tempfile::NamedTempFile::new().expect("temp");
        std::fs::write(file.path(), xml).expect("write");
        let o = Command::new(lint)
            .arg("--noout")
            .arg("--schema")
            .arg(root().join("tests/schemas/junit.xsd"))
            .arg(file.path())
            .output()
            .expect("xmllint runs");
        assert!(
            o.status.success(),
            "JUnit XML fails the XSD:\n{}\n{xml}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("not XML ({e}):\n{xml}"))
}

fn attr_n(node: roxmltree::Node, name: &str) -> usize {
    node.attribute(name)
        .unwrap_or_else(|| panic!("<{}> without {name}", node.tag_name().name()))
        .parse()
        .expect("a count")
}

#[test]
fn junit_has_one_failing_case_per_rule_and_file() {
    let xml = run(&root(), "junit", &["fixtures"]);
    let doc = check_junit_xml(&xml);
    let top = doc.root_element();
    assert_eq!(top.tag_name().name(), "testsuites");

    let findings = active_findings(&root(), &["fixtures"]);
    let pairs: BTreeSet<(String, String)> = findings
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut cases = BTreeSet::new();
    let (mut tests, mut failures) = (0, 0);
    for suite in top.children().filter(|n| n.has_tag_name("testsuite")) {
        let rule = suite.attribute("name").expect("suite name");
        let cs: Vec<_> = suite
            .children()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(attr_n(suite, "tests"), cs.len(), "suite {rule}: tests");
        let failing = cs
            .iter()
            .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
            .count();
        assert_eq!(attr_n(suite, "failures"), failing, "suite {rule}: failures");
        tests += cs.len();
        failures += failing;
        if rule == "lockaudit" {
            continue; // the files not analysed
        }
        for c in cs {
            let path = c.attribute("name").expect("case name").to_string();
            assert_eq!(
                c.attribute("classname"),
                Some(format!("lockaudit.{rule}").as_str())
            );
            let failure = c
                .children()
                .find(|n| n.has_tag_name("failure"))
                .expect("every listed case fails");
            let text = failure.text().unwrap_or_default();
            // Every finding of this rule in this file is in the failure text, at its line.
            for f in findings
                .iter()
                .filter(|f| f["rule"] == rule && f["path"] == path)
            {
                let at = format!("{}:{}:{}: ", path, f["line"], f["column"]);
                assert!(text.contains(&at), "{at} missing from\n{text}");
                assert!(text.contains(f["message"].as_str().unwrap()), "{text}");
            }
            assert!(
                cases.insert((rule.to_string(), path)),
                "one case per rule and file"
            );
        }
    }
    assert_eq!(cases, pairs);
    assert_eq!(attr_n(top, "tests"), tests);
    assert_eq!(attr_n(top, "failures"), failures);
    assert_eq!(run(&root(), "junit", &["fixtures"]), xml, "deterministic");
}

#[test]
fn junit_of_a_clean_run_is_one_passing_case_and_errors_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("quiet.rs"), SUPPRESSED).expect("write");
    let xml = run(dir.path(), "junit", &["."]);
    let doc = check_junit_xml(&xml);
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 1, "{xml}");
    assert!(cases[0].first_element_child().is_none(), "passing: {xml}");
    assert_eq!(attr_n(doc.root_element(), "failures"), 0);

    // A file name with markup in it, and a file that does not parse.
    std::fs::write(
        dir.path().join("a<&>\"'.rs"),
        "use rslock::LockManager;\nfn f( {\n",
    )
    .expect("write");
    let xml = run(dir.path(), "junit", &["."]);
    let doc = check_junit_xml(&xml);
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase") && n.children().any(|c| c.has_tag_name("error")))
        .unwrap_or_else(|| panic!("an error case: {xml}"));
    assert_eq!(case.attribute("name"), Some("a<&>\"'.rs"));
    assert_eq!(attr_n(doc.root_element(), "errors"), 1);
}

#[test]
fn rdjson_follows_reviewdogs_format_with_utf8_byte_columns() {
    let v = schema("rdjson.schema.json");
    let text = run(&root(), "rdjson", &["fixtures"]);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_valid(&v, &doc, "rdjson of fixtures/");
    let diags = doc["diagnostics"].as_array().expect("diagnostics");
    let findings = active_findings(&root(), &["fixtures"]);
    let coded: Vec<&serde_json::Value> = diags.iter().filter(|d| d.get("code").is_some()).collect();
    assert_eq!(coded.len(), findings.len());
    for (d, f) in coded.iter().zip(&findings) {
        assert_eq!(d["code"]["value"], f["rule"]);
        assert_eq!(d["location"]["path"], f["path"]);
        assert_eq!(d["location"]["range"]["start"]["line"], f["line"]);
        assert!(
            d["code"]["url"]
                .as_str()
                .unwrap()
                .ends_with(&format!("docs/rules/{}.md", f["rule"].as_str().unwrap()))
        );
        // The linked rule page exists in the repository.
        assert!(
            root()
                .join("docs/rules")
                .join(format!("{}.md", f["rule"].as_str().unwrap()))
                .is_file()
        );
    }
    assert_eq!(doc["severity"], "ERROR");
    assert_eq!(run(&root(), "rdjson", &["fixtures"]), text, "deterministic");

    let mut broken = doc.clone();
    broken["diagnostics"][0]["location"]["range"]["start"]["column"] = 0.into();
    assert!(!v.is_valid(&broken), "columns start at 1");
    let mut broken = doc;
    broken["diagnostics"][0]["severity"] = "warning".into();
    assert!(!v.is_valid(&broken), "severity is upper case");

    // Non-ASCII before the call: columns are UTF-8 bytes from 1, not characters.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("lock.rs"), MULTIBYTE).expect("write");
    let doc: serde_json::Value =
        serde_json::from_str(&run(dir.path(), "rdjson", &["."])).expect("JSON");
    assert_valid(&v, &doc, "rdjson of the multibyte file");
    let line = MULTIBYTE.lines().nth(4).unwrap();
    let findings = active_findings(dir.path(), &["."]);
    let on_line: Vec<_> = findings.iter().filter(|f| f["line"] == 5).collect();
    assert!(!on_line.is_empty(), "{findings:?}");
    for f in on_line {
        let chars = f["column"].as_u64().unwrap() as usize;
        let bytes = line.char_indices().nth(chars - 1).map(|(i, _)| i).unwrap() + 1;
        assert!(
            bytes > chars,
            "the line has multibyte characters before the site"
        );
        let d = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["code"]["value"] == f["rule"])
            .expect("diagnostic for the finding");
        assert_eq!(d["location"]["range"]["start"]["column"], bytes, "{d}");
        // The range covers the same text as the finding's character range.
        let end_chars = f["end_column"].as_u64().unwrap() as usize;
        if f["end_line"] == 5 {
            let end_bytes = line
                .char_indices()
                .nth(end_chars - 1)
                .map_or(line.len(), |(i, _)| i)
                + 1;
            assert_eq!(d["location"]["range"]["end"]["column"], end_bytes, "{d}");
        }
    }
}

#[test]
fn rdjson_of_a_clean_run_has_no_diagnostics() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("quiet.rs"), SUPPRESSED).expect("write");
    let doc: serde_json::Value =
        serde_json::from_str(&run(dir.path(), "rdjson", &["."])).expect("JSON");
    assert_valid(&schema("rdjson.schema.json"), &doc, "clean rdjson");
    assert_eq!(doc["diagnostics"], serde_json::json!([]));
    assert_eq!(doc["source"]["name"], "lockaudit");
}
