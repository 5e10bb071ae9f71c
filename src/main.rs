//! `lockaudit`: arguments -> settings -> work -> exit code.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use lockaudit::cli::{Args, Command, Format};
use lockaudit::diag::ToolError;
use lockaudit::settings::CheckSettings;
use lockaudit::{engine, lints, report};

const EXIT_FINDINGS: u8 = 1;
const EXIT_ERROR: u8 = 2;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("lockaudit: error: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn run(args: Args) -> Result<u8, ToolError> {
    match args.command {
        Command::Rules => {
            let mut out = String::new();
            for r in lints::RULES {
                out.push_str(&format!(
                    "{:<32} {:<8} {}\n",
                    r.id,
                    r.default_level.as_str(),
                    lints::summary(r.id).lines().next().unwrap_or("")
                ));
            }
            emit(&out, None)?;
            Ok(0)
        }
        Command::Explain { rule } => match lints::doc(&rule) {
            Some(doc) => {
                let level = lints::by_id(&rule).map_or("", |r| r.default_level.as_str());
                emit(&format!("# {rule} (default: {level})\n\n{doc}\n"), None)?;
                Ok(0)
            }
            None => {
                let help = lints::suggest(&rule)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                Err(ToolError::Usage(format!(
                    "no rule named `{rule}`{help}; `lockaudit rules` lists them"
                )))
            }
        },
        Command::Check(a) => {
            let settings = CheckSettings::from_args(a)?;
            let outcome = engine::check(&settings)?;
            if settings.verbose {
                for c in &outcome.configs {
                    eprintln!("lockaudit: using config {}", c.display());
                }
                let s = &outcome.stats;
                eprintln!(
                    "lockaudit: {} files read, {} parsed, {} analyses (wrapper rounds included), {} crates from the cache",
                    s.files, s.parsed, s.analysed, s.cached_crates
                );
            }
            let r = &outcome.report;
            let text = match settings.format {
                Format::Human => report::human::render(r, settings.color),
                Format::Json => report::json::render(r),
                Format::Github => report::github::render(r),
                Format::Sarif => report::sarif::render(
                    r,
                    &|id| lints::by_id(id).map_or(lints::Level::Off, |x| x.default_level),
                    settings.report_suppressed,
                ),
            };
            emit(&text, settings.output.as_deref())?;
            Ok(if r.fails(settings.fail_on) {
                EXIT_FINDINGS
            } else {
                0
            })
        }
    }
}

/// Writes the report; a closed pipe (`lockaudit check | head`) ends quietly.
fn emit(text: &str, output: Option<&std::path::Path>) -> Result<(), ToolError> {
    match output {
        Some(p) => std::fs::write(p, text).map_err(|e| ToolError::Io {
            path: p.to_path_buf(),
            message: format!("cannot write report: {e}"),
        }),
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(ToolError::Usage(format!(
                    "cannot write to standard output: {e}"
                ))),
                Ok(()) => Ok(()),
            }
        }
    }
}
