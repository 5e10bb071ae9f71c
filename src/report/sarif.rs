//! SARIF 2.1.0 for GitHub code scanning. Typed structs written for the subset we emit (the
//! generated `serde-sarif` types are large and make the required-for-GitHub fields easy to miss).
//! Columns are UTF-16 code units, declared in `columnKind`; URIs are relative to `%SRCROOT%`.

use serde::Serialize;

use super::Report;
use crate::lints::{self, Level};

#[derive(Serialize)]
struct Log<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: Vec<Run<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<'a> {
    tool: Tool,
    original_uri_base_ids: serde_json::Value,
    column_kind: &'static str,
    results: Vec<SarifResult<'a>>,
    invocations: Vec<Invocation>,
}

#[derive(Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    version: &'static str,
    semantic_version: &'static str,
    information_uri: &'static str,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    id: &'static str,
    name: String,
    short_description: Text,
    full_description: Text,
    help: Help,
    default_configuration: Config,
    properties: RuleProps,
}

#[derive(Serialize)]
struct Text {
    text: String,
}

#[derive(Serialize)]
struct Help {
    text: String,
    markdown: String,
}

#[derive(Serialize)]
struct Config {
    level: &'static str,
}

#[derive(Serialize)]
struct RuleProps {
    tags: Vec<&'static str>,
    precision: &'static str,
    #[serde(rename = "problem.severity")]
    problem_severity: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult<'a> {
    rule_id: &'static str,
    rule_index: usize,
    level: &'static str,
    message: Text,
    locations: Vec<Location<'a>>,
    partial_fingerprints: Fingerprints<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    suppressions: Vec<Suppression>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fixes: Vec<SarifFix>,
}

/// §3.55: a fix is changes to artifacts, each a list of replacements.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifFix {
    description: Text,
    artifact_changes: Vec<ArtifactChange>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactChange {
    artifact_location: Artifact,
    replacements: Vec<Replacement>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Replacement {
    deleted_region: Region,
    inserted_content: Text,
}

#[derive(Serialize)]
struct Suppression {
    kind: &'static str,
    justification: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Location<'a> {
    physical_location: Physical<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Physical<'a> {
    artifact_location: Artifact,
    region: Region,
    #[serde(skip)]
    _p: std::marker::PhantomData<&'a ()>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Artifact {
    uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri_base_id: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
    start_column: usize,
    end_line: usize,
    end_column: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Fingerprints<'a> {
    primary_location_line_hash: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Invocation {
    execution_successful: bool,
    tool_execution_notifications: Vec<Notification>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Notification {
    level: &'static str,
    message: Text,
    locations: Vec<NotificationLocation>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NotificationLocation {
    physical_location: NotificationPhysical,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NotificationPhysical {
    artifact_location: Artifact,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<LineRegion>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LineRegion {
    start_line: usize,
}

fn level(l: Level) -> &'static str {
    match l {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Note | Level::Off => "note",
    }
}

/// Percent-encodes what may not stand in a URI path; keeps `/`.
fn encode_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn artifact(path: &str) -> Artifact {
    if path.starts_with('/') {
        Artifact {
            uri: format!("file://{}", encode_path(path)),
            uri_base_id: None,
        }
    } else {
        Artifact {
            uri: encode_path(path),
            uri_base_id: Some("%SRCROOT%"),
        }
    }
}

/// A finding's fix, its columns in UTF-16 code units like the results' (`columnKind`).
fn fix(report: &Report, path: &str, fix: &super::Fix) -> SarifFix {
    let text = report.sources.get(path);
    let utf16 = |line: usize, col: usize| {
        text.and_then(|t| t.lines().nth(line.wrapping_sub(1)))
            .map_or(col + 1, |l| {
                l.chars().take(col).map(char::len_utf16).sum::<usize>() + 1
            })
    };
    SarifFix {
        description: Text {
            text: fix.message.clone(),
        },
        artifact_changes: vec![ArtifactChange {
            artifact_location: artifact(path),
            replacements: fix
                .edits
                .iter()
                .map(|e| Replacement {
                    deleted_region: Region {
                        start_line: e.start_line,
                        start_column: utf16(e.start_line, e.start_column),
                        end_line: e.end_line,
                        end_column: utf16(e.end_line, e.end_column),
                    },
                    inserted_content: Text {
                        text: e.replacement.clone(),
                    },
                })
                .collect(),
        }],
    }
}

/// "unclassified-lock" -> "UnclassifiedLock" (SARIF's `name` is a readable identifier).
fn pascal(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Suppressed findings are left out unless `with_suppressed`: GitHub shows them as open alerts.
pub fn render(
    report: &Report,
    rule_levels: &dyn Fn(&str) -> Level,
    with_suppressed: bool,
) -> String {
    let rules: Vec<Rule> = lints::RULES
        .iter()
        .map(|r| {
            let doc = lints::doc(r.id).unwrap_or_default();
            let short = lints::summary(r.id);
            let short: String = short
                .split(". ")
                .next()
                .unwrap_or(short)
                .trim_end_matches('.')
                .chars()
                .take(1000)
                .collect();
            Rule {
                id: r.id,
                name: pascal(r.id),
                short_description: Text { text: short },
                full_description: Text {
                    text: lints::summary(r.id).chars().take(1000).collect(),
                },
                help: Help {
                    text: doc.to_string(),
                    markdown: doc.to_string(),
                },
                default_configuration: Config {
                    level: level(rule_levels(r.id)),
                },
                properties: RuleProps {
                    tags: vec!["concurrency", "distributed-lock"],
                    precision: "high",
                    problem_severity: match r.default_level {
                        Level::Error => "error",
                        Level::Warning => "warning",
                        _ => "recommendation",
                    },
                },
            }
        })
        .collect();
    let results = report
        .findings
        .iter()
        .filter(|f| with_suppressed || !f.suppressed)
        .map(|f| SarifResult {
            rule_id: f.rule,
            rule_index: lints::RULES
                .iter()
                .position(|r| r.id == f.rule)
                .unwrap_or(0),
            level: level(f.severity),
            message: Text {
                text: format!("{} (help: {})", f.message, f.help),
            },
            locations: vec![Location {
                physical_location: Physical {
                    artifact_location: artifact(&f.path),
                    region: Region {
                        start_line: f.line,
                        start_column: f.utf16.0,
                        end_line: f.end_line,
                        end_column: f.utf16.1,
                    },
                    _p: std::marker::PhantomData,
                },
            }],
            partial_fingerprints: Fingerprints {
                primary_location_line_hash: &f.fingerprint,
            },
            suppressions: f
                .suppression_reason
                .as_ref()
                .map(|r| {
                    vec![Suppression {
                        kind: "inSource",
                        justification: r.clone(),
                    }]
                })
                .unwrap_or_default(),
            fixes: f
                .fix
                .as_ref()
                .map(|x| vec![fix(report, &f.path, x)])
                .unwrap_or_default(),
        })
        .collect();
    let notifications = report
        .errors
        .iter()
        .map(|e| Notification {
            level: "error",
            message: Text {
                text: e.message.clone(),
            },
            locations: vec![NotificationLocation {
                physical_location: NotificationPhysical {
                    artifact_location: artifact(&e.path),
                    region: e.line.map(|l| LineRegion { start_line: l }),
                },
            }],
        })
        .collect();
    let log = Log {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        version: "2.1.0",
        runs: vec![Run {
            tool: Tool {
                driver: Driver {
                    name: "lockaudit",
                    version: env!("CARGO_PKG_VERSION"),
                    semantic_version: env!("CARGO_PKG_VERSION"),
                    information_uri: "https://github.com/lockaudit/lockaudit",
                    rules,
                },
            },
            // No absolute URI here: output must not depend on where the checkout lives.
            original_uri_base_ids: serde_json::json!({
                "%SRCROOT%": { "description": { "text": "The directory lockaudit was run from." } }
            }),
            column_kind: "utf16CodeUnits",
            results,
            invocations: vec![Invocation {
                execution_successful: true,
                tool_execution_notifications: notifications,
            }],
        }],
    };
    let mut s = serde_json::to_string_pretty(&log).unwrap_or_default();
    s.push('\n');
    s
}
