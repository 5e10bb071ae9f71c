//! Snapshots of the rendered reports: a reviewer reads the diff of what users see.

use std::path::PathBuf;

use lockaudit::cli::Format;
use lockaudit::engine;
use lockaudit::lints::{self, Level};
use lockaudit::report;
use lockaudit::settings::CheckSettings;

fn run(path: &str) -> engine::Outcome {
    let settings = CheckSettings {
        paths: vec![PathBuf::from(path)],
        format: Format::Human,
        threads: 1,
        color: false,
        fail_on: Some(Level::Warning),
        prefilter: true,
        cache_dir: None,
        ..Default::default()
    };
    engine::check(&settings).expect("fixture runs")
}

#[test]
fn human_missing_deadline() {
    let o = run("fixtures/rules/missing_deadline.rs");
    insta::assert_snapshot!(report::human::render(&o.report, false));
}

#[test]
fn human_ignored_failure_and_annotations() {
    let o = run("fixtures/rules/unclassified_lock.rs");
    insta::assert_snapshot!(report::human::render(&o.report, false));
}

#[test]
fn sarif_long_deadline() {
    let o = run("fixtures/rules/long_deadline.rs");
    let sarif = report::sarif::render(
        &o.report,
        &|id| lints::by_id(id).map_or(Level::Off, |r| r.default_level),
        false,
    );
    let mut v: serde_json::Value = serde_json::from_str(&sarif).expect("SARIF is JSON");
    // The rule table is long and its text comes from the rule docs; keep the snapshot to results.
    let rules = v["runs"][0]["tool"]["driver"]["rules"].take();
    assert_eq!(rules.as_array().map(Vec::len), Some(lints::RULES.len()));
    v["runs"][0]["tool"]["driver"]["version"] = "[version]".into();
    v["runs"][0]["tool"]["driver"]["semanticVersion"] = "[version]".into();
    insta::assert_snapshot!(serde_json::to_string_pretty(&v).expect("serialises"));
}

#[test]
fn github_ignored_failure() {
    let o = run("fixtures/rules/ignored_lock_failure.rs");
    insta::assert_snapshot!(report::github::render(&o.report));
}

/// Several findings at one site: one snippet, the others nested under it.
#[test]
fn human_groups_the_findings_at_a_site() {
    let o = run("fixtures/libs/rslock.rs");
    let text = report::human::render(&o.report, false);
    let snippets = text.matches("╭─[").count();
    let sites_with_findings: std::collections::BTreeSet<(usize, usize)> =
        o.report.active().map(|f| (f.line, f.column)).collect();
    assert_eq!(snippets, sites_with_findings.len(), "{text}");
    assert!(
        o.report.active().count() > snippets,
        "the fixture has sites with several findings"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn concise_is_one_line_per_finding() {
    let o = run("fixtures/libs/rslock.rs");
    let text = report::human::render_concise(&o.report);
    assert_eq!(text.lines().count(), o.report.active().count() + 1);
    insta::assert_snapshot!(text);
}

/// A label says what its span is: releases, renewals and clock reads are not acquisitions.
#[test]
fn labels_name_what_the_span_is() {
    for (fixture, label) in [
        ("fixtures/flow/unchecked_release.rs", "lock released here"),
        ("fixtures/flow/wall_clock_deadline.rs", "clock read here"),
        ("fixtures/flow/unchecked_renewal.rs", "lease renewed here"),
    ] {
        let o = run(fixture);
        let text = report::human::render(&o.report, false);
        assert!(text.contains(label), "{fixture}: {text}");
    }
}
