//! Baselines: adopt lockaudit on a codebase with existing findings. `--write-baseline FILE`
//! records the unsuppressed findings by fingerprint; `--baseline FILE` then reports only findings
//! whose fingerprint is not recorded, and lists recorded ones that no longer occur so the file
//! can shrink. Fingerprints hash the rule, path, enclosing fn and line text, not line numbers, so
//! entries survive code moving within a file.

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::diag::ToolError;
use crate::report::Report;

const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub version: u32,
    pub findings: Vec<Entry>,
}

/// One recorded finding. Only `fingerprint` is compared; the rest lets a reviewer read the file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub fingerprint: String,
    pub rule: String,
    pub path: String,
    pub line: usize,
    pub message: String,
}

/// What applying a baseline did to a report.
#[derive(Debug, Default)]
pub struct Applied {
    /// Findings hidden because the baseline records them.
    pub known: usize,
    /// Recorded entries that no longer occur.
    pub fixed: Vec<Entry>,
}

impl Baseline {
    pub fn from_report(report: &Report) -> Baseline {
        Baseline {
            version: VERSION,
            findings: report
                .active()
                .map(|f| Entry {
                    fingerprint: f.fingerprint.clone(),
                    rule: f.rule.to_string(),
                    path: f.path.clone(),
                    line: f.line,
                    message: f.message.clone(),
                })
                .collect(),
        }
    }

    pub fn write(&self, path: &Path) -> Result<(), ToolError> {
        let mut text = serde_json::to_string_pretty(self).map_err(|e| ToolError::Io {
            path: path.to_path_buf(),
            message: format!("cannot encode baseline: {e}"),
        })?;
        text.push('\n');
        std::fs::write(path, text).map_err(|e| ToolError::Io {
            path: path.to_path_buf(),
            message: format!("cannot write baseline: {e}"),
        })
    }

    pub fn load(path: &Path) -> Result<Baseline, ToolError> {
        let text =
            crate::read::text(path, crate::read::Kind::Baseline).map_err(|e| ToolError::Io {
                path: path.to_path_buf(),
                message: format!("cannot read baseline: {e}"),
            })?;
        let b: Baseline = serde_json::from_str(&text).map_err(|e| ToolError::Config {
            path: path.to_path_buf(),
            line: e.line().max(1),
            column: e.column().max(1),
            message: format!(
                "not a lockaudit baseline: {e} (write one with `lockaudit check --write-baseline {}`)",
                path.display()
            ),
        })?;
        if b.version != VERSION {
            return Err(ToolError::Config {
                path: path.to_path_buf(),
                line: 1,
                column: 1,
                message: format!(
                    "baseline version {} is not supported (expected {VERSION})",
                    b.version
                ),
            });
        }
        Ok(b)
    }

    /// Removes the findings the baseline records from `report` (suppressed ones stay: they are
    /// reported as suppressed, not as new).
    pub fn apply(&self, report: &mut Report) -> Applied {
        let recorded: BTreeSet<&str> = self
            .findings
            .iter()
            .map(|e| e.fingerprint.as_str())
            .collect();
        let current: BTreeSet<String> = report.active().map(|f| f.fingerprint.clone()).collect();
        let before = report.findings.len();
        report
            .findings
            .retain(|f| f.suppressed || !recorded.contains(f.fingerprint.as_str()));
        Applied {
            known: before - report.findings.len(),
            fixed: self
                .findings
                .iter()
                .filter(|e| !current.contains(&e.fingerprint))
                .cloned()
                .collect(),
        }
    }
}

impl Applied {
    /// The note appended to human output.
    pub fn human_note(&self, file: &Path) -> String {
        let mut s = format!(
            "note: {} finding{} hidden by the baseline {}\n",
            self.known,
            if self.known == 1 { "" } else { "s" },
            file.display()
        );
        if !self.fixed.is_empty() {
            s.push_str(&format!(
                "note: {} baseline entr{} no longer occur{}; shrink the baseline with `lockaudit check --write-baseline {}`:\n",
                self.fixed.len(),
                if self.fixed.len() == 1 { "y" } else { "ies" },
                if self.fixed.len() == 1 { "s" } else { "" },
                file.display()
            ));
            for e in &self.fixed {
                s.push_str(&format!(
                    "  {}:{}: {} [{}]\n",
                    e.path, e.line, e.rule, e.fingerprint
                ));
            }
        }
        s
    }

    /// Adds `"baseline": {"file", "known", "fixed": [...]}` to a rendered JSON report.
    pub fn add_to_json(&self, file: &Path, json: &str) -> String {
        let Ok(mut doc) = serde_json::from_str::<serde_json::Value>(json) else {
            return json.to_string();
        };
        if let Some(obj) = doc.as_object_mut() {
            obj.insert(
                "baseline".into(),
                serde_json::json!({
                    "file": file.to_string_lossy(),
                    "known": self.known,
                    "fixed": self.fixed,
                }),
            );
        }
        let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| json.to_string());
        s.push('\n');
        s
    }
}
