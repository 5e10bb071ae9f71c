//! Validated settings, built once from the parsed arguments.

use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::PathBuf;

use crate::cli::{CheckArgs, Color, FailOn, Format};
use crate::diag::ToolError;
use crate::lints::{self, Level};

/// The most worker threads a run may start.
pub const MAX_THREADS: usize = 256;

#[derive(Debug, Clone)]
pub struct CheckSettings {
    pub paths: Vec<PathBuf>,
    pub format: Format,
    pub output: Option<PathBuf>,
    pub config: Option<PathBuf>,
    /// `None`: every rule.
    pub select: Option<HashSet<&'static str>>,
    pub ignore: HashSet<&'static str>,
    /// `None`: never fail on findings.
    pub fail_on: Option<Level>,
    pub threads: usize,
    pub color: bool,
    pub verbose: bool,
    pub report_suppressed: bool,
    /// Skip files that cannot hold a lock site (see `prefilter`).
    pub prefilter: bool,
    /// `None`: no cache.
    pub cache_dir: Option<PathBuf>,
}

impl Default for CheckSettings {
    /// The defaults of `lockaudit check`, for library users and tests.
    fn default() -> Self {
        CheckSettings {
            paths: vec![PathBuf::from(".")],
            format: Format::Human,
            output: None,
            config: None,
            select: None,
            ignore: HashSet::new(),
            fail_on: Some(Level::Warning),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            color: false,
            verbose: false,
            report_suppressed: false,
            prefilter: true,
            cache_dir: None,
        }
    }
}

fn rule_ids(list: &[String], flag: &str) -> Result<HashSet<&'static str>, ToolError> {
    list.iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let s = s.trim();
            lints::by_id(s).map(|r| r.id).ok_or_else(|| {
                let help = lints::suggest(s)
                    .map(|c| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                ToolError::Usage(format!(
                    "{flag}: unknown rule `{s}`{help}; `lockaudit rules` lists them"
                ))
            })
        })
        .collect()
}

impl CheckSettings {
    pub fn from_args(a: CheckArgs) -> Result<CheckSettings, ToolError> {
        let select = if a.select.is_empty() {
            None
        } else {
            let ids = rule_ids(&a.select, "--select")?;
            // `--select ''` (an unset variable in a script) would run no rule and pass.
            if ids.is_empty() {
                return Err(ToolError::Usage(
                    "--select names no rule; give rule ids (`lockaudit rules` lists them), or leave it out to run every rule".into(),
                ));
            }
            Some(ids)
        };
        let ignore = rule_ids(&a.ignore, "--ignore")?;
        let threads = match a.threads {
            Some(0) => return Err(ToolError::Usage("--threads must be at least 1".into())),
            // Each worker reserves a deep stack; far more workers than cores only costs memory.
            Some(n) if n > MAX_THREADS => {
                return Err(ToolError::Usage(format!(
                    "--threads {n} is more than the {MAX_THREADS} lockaudit can use"
                )));
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS)),
        };
        let color = match a.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                a.output.is_none()
                    && std::io::stdout().is_terminal()
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        Ok(CheckSettings {
            paths: a.paths,
            format: a.format,
            output: a.output,
            config: a.config,
            select,
            ignore,
            fail_on: match a.fail_on {
                FailOn::Error => Some(Level::Error),
                FailOn::Warning => Some(Level::Warning),
                FailOn::Never => None,
            },
            threads,
            color,
            verbose: a.verbose,
            report_suppressed: a.report_suppressed,
            prefilter: !a.no_prefilter,
            cache_dir: (!a.no_cache).then_some(a.cache_dir),
        })
    }

    pub fn selected(&self, id: &str) -> bool {
        self.select.as_ref().is_none_or(|s| s.contains(id)) && !self.ignore.contains(id)
    }
}
