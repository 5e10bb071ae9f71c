//! Commands beyond `check`, `rules` and `explain`: adoption on an existing codebase (inventory,
//! annotate, baseline), Cargo workspaces, and generated artefacts (completions, man page, rule docs).

pub mod annotate;
pub mod baseline;
pub mod docs;
pub mod fix;
pub mod inventory;
pub mod workspace;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;

use crate::cli::{Args, CheckArgs, Command};
use crate::diag::ToolError;
use crate::settings::CheckSettings;

/// `--manifest-path`: replaces the paths with the workspace's package sources.
pub fn expand_manifest(a: &mut CheckArgs) -> Result<(), ToolError> {
    if let Some(m) = a.manifest_path.take() {
        a.paths = workspace::source_paths(&m)?;
    }
    Ok(())
}

/// What a command that runs the analysis only for its sites and findings (`inventory`,
/// `annotate`) shares with `check`.
pub struct Analysis {
    pub paths: Vec<PathBuf>,
    pub config: Option<PathBuf>,
    pub manifest_path: Option<PathBuf>,
    pub threads: Option<usize>,
    pub verbose: bool,
    /// `None`: `--no-cache`.
    pub cache_dir: Option<PathBuf>,
}

/// Settings for such a command: `check`'s defaults (built by parsing a `check` command line, so
/// new `check` options keep their defaults).
pub fn analysis_settings(a: Analysis) -> Result<CheckSettings, ToolError> {
    let Analysis {
        paths,
        config,
        manifest_path,
        threads,
        verbose,
        cache_dir,
    } = a;
    let mut argv: Vec<OsString> = [
        "lockaudit",
        "check",
        "--fail-on",
        "never",
        "--color",
        "never",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if let Some(c) = config {
        argv.extend(["--config".into(), c.into_os_string()]);
    }
    if let Some(t) = threads {
        argv.extend(["--threads".into(), t.to_string().into()]);
    }
    if verbose {
        argv.push("--verbose".into());
    }
    match cache_dir {
        Some(d) => argv.extend(["--cache-dir".into(), d.into_os_string()]),
        None => argv.push("--no-cache".into()),
    }
    argv.push("--".into());
    argv.extend(paths.into_iter().map(PathBuf::into_os_string));
    let args = Args::try_parse_from(argv).map_err(|e| ToolError::Usage(e.to_string()))?;
    let Command::Check(mut a) = args.command else {
        return Err(ToolError::Usage(
            "internal: not a check command line".into(),
        ));
    };
    a.manifest_path = manifest_path;
    expand_manifest(&mut a)?;
    CheckSettings::from_args(a)
}

/// Prints the configuration files used, and the notes of the run, for `--verbose`.
pub fn print_verbose(outcome: &crate::engine::Outcome) {
    print_configs(&outcome.configs);
    for n in &outcome.notes {
        eprintln!("lockaudit: note: {n}");
    }
}

/// Prints the configuration files used.
pub fn print_configs(configs: &[PathBuf]) {
    for c in configs {
        let from_manifest = c.file_name().is_some_and(|n| n == "Cargo.toml");
        eprintln!(
            "lockaudit: using config {}{}",
            c.display(),
            if from_manifest {
                " (its [package|workspace.metadata.lockaudit] table)"
            } else {
                ""
            }
        );
    }
}
