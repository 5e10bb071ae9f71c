//! Command-line arguments, as parsed. Nothing downstream reads these: `settings` validates them
//! into the settings the work runs on.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "lockaudit",
    version,
    about = "Finds distributed-lock use in Rust code and reports what makes it unsafe",
    long_about = "Finds distributed-lock acquisitions (Redis/Redlock, etcd, PostgreSQL advisory locks, DynamoDB, \
ZooKeeper, Consul, Kubernetes leases, your own wrappers), classifies each as an efficiency or a correctness \
lock, and reports missing fencing, deadlines, ignored failures and more.\n\n\
Exit status: 0 no finding at or above --fail-on, 1 findings, 2 tool error."
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyse Rust files and report findings.
    Check(CheckArgs),
    /// List the rules with their default levels.
    Rules,
    /// Print a rule's documentation.
    Explain {
        /// A rule id, e.g. `missing-deadline`.
        rule: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Files or directories to analyse.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Write the report to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Use this configuration for every file instead of the nearest lockaudit.toml.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Only run these rules (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Do not run these rules (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// The lowest severity that makes the exit status 1.
    #[arg(long, value_enum, default_value_t = FailOn::Warning)]
    pub fail_on: FailOn,
    /// Worker threads (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
    /// When to colour human output.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// Include suppressed findings in SARIF (as suppressed results).
    #[arg(long)]
    pub report_suppressed: bool,
    /// Parse every file, not only those that can hold a lock site (slower; for verification).
    #[arg(long)]
    pub no_prefilter: bool,
    /// Do not read or write the cache (`.lockaudit_cache/` in the current directory).
    #[arg(long)]
    pub no_cache: bool,
    /// Where the cache lives.
    #[arg(long, default_value = ".lockaudit_cache")]
    pub cache_dir: PathBuf,
    /// Print which configuration files were used (to standard error).
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Sarif,
    Github,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    Error,
    Warning,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}
