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
    /// List every lock site with its purpose, TTL, fencing and findings.
    Inventory(InventoryArgs),
    /// Insert `// lockaudit: <purpose>` above unclassified lock sites.
    Annotate(AnnotateArgs),
    /// Print a shell completion script.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
    /// Run as a language server (LSP over standard input and output) for editors.
    Server {
        /// Accepted for clients that pass it; standard input and output is the only transport.
        #[arg(long, hide = true)]
        stdio: bool,
    },
    /// Write docs/rules/<id>.md from the rule documentation.
    #[command(hide = true)]
    Docs {
        /// The folder to write into.
        #[arg(long, default_value = "docs/rules")]
        out: PathBuf,
        /// Do not write; exit 1 when a file is missing or differs.
        #[arg(long)]
        check: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct InventoryArgs {
    /// Files or directories to analyse.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = InventoryFormat::Markdown)]
    pub format: InventoryFormat,
    /// Write the inventory to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Use this configuration for every file instead of the nearest lockaudit.toml.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Analyse the member crates of this Cargo workspace (or package) instead of PATHs.
    #[arg(long)]
    pub manifest_path: Option<PathBuf>,
    /// Worker threads (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
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
pub enum InventoryFormat {
    Markdown,
    Csv,
    Json,
    /// One self-contained HTML page: charts, a sortable table, code snippets.
    Html,
}

#[derive(Debug, clap::Args)]
pub struct AnnotateArgs {
    /// Files or directories to annotate.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Classify every unclassified site with this purpose.
    #[arg(
        long,
        value_enum,
        conflicts_with = "interactive",
        required_unless_present = "interactive"
    )]
    pub purpose: Option<AnnotatePurpose>,
    /// Ask for each site (needs a terminal): e(fficiency), c(orrectness) or s(kip).
    #[arg(long)]
    pub interactive: bool,
    /// Print a unified diff instead of writing files.
    #[arg(long)]
    pub dry_run: bool,
    /// Use this configuration for every file instead of the nearest lockaudit.toml.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Annotate the member crates of this Cargo workspace (or package) instead of PATHs.
    #[arg(long)]
    pub manifest_path: Option<PathBuf>,
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
pub enum AnnotatePurpose {
    Efficiency,
    Correctness,
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
    /// Report only findings not recorded in this baseline file; list entries that are gone.
    #[arg(long, conflicts_with = "write_baseline")]
    pub baseline: Option<PathBuf>,
    /// Record the current unsuppressed findings in this baseline file (exit status 0).
    #[arg(long)]
    pub write_baseline: Option<PathBuf>,
    /// Analyse the member crates of this Cargo workspace (or package) instead of PATHs.
    #[arg(long)]
    pub manifest_path: Option<PathBuf>,
    /// Apply the findings' mechanical fixes to the files, then report what remains.
    #[arg(long, conflicts_with_all = ["diff", "write_baseline"])]
    pub fix: bool,
    /// Print the findings' mechanical fixes as a unified diff instead of the report; write nothing.
    #[arg(long, conflicts_with = "write_baseline")]
    pub diff: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    /// One line per finding: `path:line:col: rule: message`.
    Concise,
    Json,
    Sarif,
    Github,
    /// GitLab Code Quality report (`artifacts: reports: codequality:`).
    Gitlab,
    /// JUnit XML: one failing test case per rule and file.
    Junit,
    /// reviewdog's Diagnostic Format (`reviewdog -f=rdjson`).
    Rdjson,
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
