//! `lockaudit`: arguments -> settings -> work -> exit code.

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use lockaudit::cli::{Args, Command, Format};
use lockaudit::commands::{self, baseline::Baseline, inventory};
use lockaudit::diag::ToolError;
use lockaudit::settings::CheckSettings;
use lockaudit::{engine, lints, report};

// Syntax trees are many small allocations made and freed on every worker thread.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const EXIT_FINDINGS: u8 = 1;
const EXIT_ERROR: u8 = 2;

pub fn main() -> ExitCode {
    let (argv, as_cargo) = cargo_subcommand_args(std::env::args_os().collect());
    let mut command = Args::command();
    if as_cargo {
        // Usage lines and errors show the command the user typed.
        command = command.bin_name("cargo lockaudit");
    }
    let args = Args::from_arg_matches(&command.get_matches_from(argv)).unwrap_or_else(|e| e.exit());
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
        Command::Check(mut a) => {
            commands::expand_manifest(&mut a)?;
            let (baseline_file, write_baseline) = (a.baseline.clone(), a.write_baseline.clone());
            let (fix, diff) = (a.fix, a.diff);
            let baseline = baseline_file.as_deref().map(Baseline::load).transpose()?;
            let settings = CheckSettings::from_args(a)?;
            let mut outcome = engine::check(&settings)?;
            if settings.verbose {
                commands::print_verbose(&outcome);

                let s = &outcome.stats;
                eprintln!(
                    "lockaudit: {} files read, {} parsed, {} analyses (wrapper rounds included), {} crates from the cache ({} after hashing alone)",
                    s.files, s.parsed, s.analysed, s.cached_crates, s.hashed_only
                );
                let stages: Vec<String> = s
                    .stages
                    .iter()
                    .map(|(stage, d)| format!("{stage} {} ms", d.as_millis()))
                    .collect();
                eprintln!("lockaudit: {}", stages.join(", "));
            }
            if let Some(file) = write_baseline {
                let b = Baseline::from_report(&outcome.report);
                b.write(&file)?;
                eprintln!(
                    "lockaudit: recorded {} finding(s) in {}",
                    b.findings.len(),
                    file.display()
                );
                return Ok(0);
            }
            let mut applied = baseline.as_ref().map(|b| b.apply(&mut outcome.report));
            if diff || fix {
                let plan = commands::fix::Plan::of(&outcome.report);
                for note in &plan.skipped {
                    eprintln!("lockaudit: {note}");
                }
                if diff {
                    emit(&plan.diff(), settings.output.as_deref())?;
                    eprintln!(
                        "lockaudit: {} fix(es) would be applied in {} file(s)",
                        plan.fixes,
                        plan.files.len()
                    );
                    return Ok(if outcome.report.fails(settings.fail_on) {
                        EXIT_FINDINGS
                    } else {
                        0
                    });
                }
                let written = plan.write();
                eprintln!(
                    "lockaudit: applied {written} fix(es) in {} file(s)",
                    plan.files.len()
                );
                // What remains is what the fixed files say now.
                if written > 0 {
                    outcome = engine::check(&settings)?;
                    applied = baseline.as_ref().map(|b| b.apply(&mut outcome.report));
                }
            }
            let r = &outcome.report;
            let text = match settings.format {
                Format::Human => report::human::render(r, settings.color),
                Format::Concise => report::human::render_concise(r),
                Format::Json => report::json::render(r),
                Format::Github => report::github::render(r),
                Format::Gitlab => report::gitlab::render(r),
                Format::Junit => report::junit::render(r),
                Format::Rdjson => report::rdjson::render(r),
                Format::Sarif => report::sarif::render(
                    r,
                    &|id| lints::by_id(id).map_or(lints::Level::Off, |x| x.default_level),
                    settings.report_suppressed,
                ),
            };
            let text = match (&applied, &baseline_file, settings.format) {
                (Some(ap), Some(f), Format::Human | Format::Concise) => text + &ap.human_note(f),
                (Some(ap), Some(f), Format::Json) => ap.add_to_json(f, &text),
                _ => text,
            };
            emit(&text, settings.output.as_deref())?;
            Ok(if r.fails(settings.fail_on) {
                EXIT_FINDINGS
            } else {
                0
            })
        }
        Command::Inventory(a) => {
            let settings = commands::analysis_settings(commands::Analysis {
                paths: a.paths,
                config: a.config.clone(),
                manifest_path: a.manifest_path,
                threads: a.threads,
                verbose: a.verbose,
                cache_dir: (!a.no_cache).then_some(a.cache_dir),
            })?;
            let outcome = engine::check(&settings)?;
            if a.verbose {
                commands::print_verbose(&outcome);
            }
            let cwd = std::env::current_dir()
                .map_err(|e| ToolError::Usage(format!("cannot read the current directory: {e}")))?;
            let rows = inventory::rows(&outcome.report, &cwd, a.config.as_deref())?;
            let summary = inventory::summary(&rows);
            let text = inventory::render(a.format, &rows, &summary, &outcome.report, &cwd);
            emit(&text, a.output.as_deref())?;
            Ok(0)
        }
        Command::Annotate(a) => {
            let dry_run = a.dry_run;
            let done = commands::annotate::run(a)?;
            if dry_run {
                emit(&done.diff, None)?;
            }
            eprintln!(
                "lockaudit: {} {} site(s) in {} file(s){}",
                if dry_run {
                    "would annotate"
                } else {
                    "annotated"
                },
                done.annotated,
                done.files,
                if done.skipped_files > 0 {
                    format!("; {} file(s) left unchanged, see above", done.skipped_files)
                } else {
                    String::new()
                }
            );
            Ok(if done.skipped_files > 0 {
                EXIT_FINDINGS
            } else {
                0
            })
        }
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Args::command(), "lockaudit", &mut buf);
            emit(&String::from_utf8_lossy(&buf), None)?;
            Ok(0)
        }
        Command::Server { .. } => {
            lockaudit::server::run()?;
            Ok(0)
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(Args::command())
                .render(&mut buf)
                .map_err(|e| ToolError::Usage(format!("cannot render the man page: {e}")))?;
            emit(&String::from_utf8_lossy(&buf), None)?;
            Ok(0)
        }
        Command::Docs { out, check } => {
            if !check {
                commands::docs::write(&out)?;
                return Ok(0);
            }
            let bad = commands::docs::out_of_date(&out);
            if bad.is_empty() {
                return Ok(0);
            }
            eprintln!(
                "lockaudit: {} out of date: {}; regenerate with `cargo run -- docs --out {}`",
                out.display(),
                bad.join(", "),
                out.display()
            );
            Ok(EXIT_FINDINGS)
        }
    }
}

/// `cargo lockaudit …` runs `cargo-lockaudit lockaudit …`: drop the subcommand name cargo passes.
/// Also says whether the program runs as `cargo-lockaudit`.
fn cargo_subcommand_args(mut argv: Vec<std::ffi::OsString>) -> (Vec<std::ffi::OsString>, bool) {
    let invoked_as_cargo = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_stem())
        .is_some_and(|s| s == "cargo-lockaudit");
    if invoked_as_cargo && argv.get(1).is_some_and(|a| a == "lockaudit") {
        argv.remove(1);
    }
    (argv, invoked_as_cargo)
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
