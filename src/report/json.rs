//! `--format json`: one object, `{"tool", "sites", "findings", "errors"}` (see README for the contract).

use serde::Serialize;

use super::{Finding, Report, SiteRecord};
use crate::diag::FileError;

#[derive(Serialize)]
struct Tool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct Json<'r> {
    tool: Tool,
    sites: &'r [SiteRecord],
    findings: &'r [Finding],
    errors: &'r [FileError],
}

pub fn render(report: &Report) -> String {
    let doc = Json {
        tool: Tool {
            name: "lockaudit",
            version: env!("CARGO_PKG_VERSION"),
        },
        sites: &report.sites,
        findings: &report.findings,
        errors: &report.errors,
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
