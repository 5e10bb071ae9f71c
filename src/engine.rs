//! The work: discover -> parse and index (parallel) -> crate indexes -> analyse (parallel) ->
//! sorted report. Each phase's workers own their state; results are merged and sorted at the end.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::classify::{Classified, classify};
use crate::config::{Config, Configs};
use crate::diag::{FileError, ToolError, line_col};
use crate::directives::{DirectiveKind, Directives};
use crate::discover::{self, Candidate};
use crate::lints::{self, Check, Level};
use crate::model::{CrateIndex, FileIndex, Imports, module_path_for};
use crate::packs;
use crate::packs::{CallDef, PackSet};
use crate::report::{Finding, Report, SiteRecord};
use crate::settings::CheckSettings;
use crate::sites::{self, FileCx, WrapperCandidate};
use crate::source::{SourceFile, Span};

/// Deeply nested code recurses deeply in syn; give workers room so that no input overflows a stack.
const WORKER_STACK: usize = 64 * 1024 * 1024;

struct Job {
    file: Candidate,
    config: Arc<Config>,
    crate_root: PathBuf,
}

struct Indexed {
    job: usize,
    source: SourceFile,
    module: String,
}

pub struct Outcome {
    pub report: Report,
    pub suppressed: usize,
    pub configs: Vec<PathBuf>,
}

pub fn check(settings: &CheckSettings) -> Result<Outcome, ToolError> {
    let cwd = std::env::current_dir()
        .map_err(|e| ToolError::Usage(format!("cannot read the current directory: {e}")))?;
    let builtin = packs::builtin()?;
    let found = discover::discover(&settings.paths, &cwd, settings.threads)?;
    let mut configs = Configs::new(builtin, settings.config.as_deref())?;
    let mut roots: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut jobs = Vec::new();
    for file in found.files {
        let dir = file.abs.parent().map(Path::to_path_buf).unwrap_or_default();
        let config = configs.for_dir(&dir)?;
        if config.excludes(&file.abs) {
            continue;
        }
        let crate_root = roots
            .entry(dir.clone())
            .or_insert_with(|| {
                dir.ancestors()
                    .find(|d| d.join("Cargo.toml").is_file())
                    .unwrap_or(&dir)
                    .to_path_buf()
            })
            .clone();
        jobs.push(Job {
            file,
            config,
            crate_root,
        });
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(settings.threads)
        .stack_size(WORKER_STACK)
        .build()
        .map_err(|e| ToolError::Usage(format!("cannot start worker threads: {e}")))?;

    // Phase 1: read, parse, index. syn trees are not Send, so each worker keeps only plain data.
    let phase1: Vec<Result<(Indexed, FileIndex), FileError>> = pool.install(|| {
        jobs.par_iter()
            .enumerate()
            .map(|(i, job)| index_one(i, job))
            .collect()
    });
    let mut errors = found.errors;
    let mut indexed = Vec::new();
    let mut by_crate: HashMap<PathBuf, Vec<FileIndex>> = HashMap::new();
    for r in phase1 {
        match r {
            Ok((ix, fi)) => {
                by_crate
                    .entry(jobs[ix.job].crate_root.clone())
                    .or_default()
                    .push(fi);
                indexed.push(ix);
            }
            Err(e) => errors.push(e),
        }
    }
    let crates: HashMap<PathBuf, CrateIndex> = by_crate
        .into_iter()
        .map(|(root, files)| (root.clone(), CrateIndex::new(root, files)))
        .collect();

    // Phase 2: find sites, classify, run the rules. In rounds: the wrappers a round finds make
    // their callers sites in the next (wrappers of wrappers too), until nothing new turns up.
    let empty = CrateIndex::default();
    let mut wrappers: HashMap<PathBuf, Vec<WrapperCandidate>> = HashMap::new();
    let mut packsets: HashMap<(usize, PathBuf), Arc<PackSet>> = HashMap::new();
    let mut slots: Vec<Option<FileOutput>> = (0..indexed.len()).map(|_| None).collect();
    let mut todo: Vec<usize> = (0..indexed.len()).collect();
    for _round in 0..MAX_WRAPPER_ROUNDS {
        let packs_for = |job: &Job| -> Arc<PackSet> {
            packsets
                .get(&(config_id(&job.config), job.crate_root.clone()))
                .cloned()
                .unwrap_or_else(|| job.config.packs.clone())
        };
        let results: Vec<(usize, FileOutput)> = pool.install(|| {
            todo.par_iter()
                .map(|&i| {
                    let ix = &indexed[i];
                    let job = &jobs[ix.job];
                    let index = crates.get(&job.crate_root).unwrap_or(&empty);
                    (i, analyze_one(ix, job, index, &packs_for(job), settings))
                })
                .collect()
        });
        let mut found: HashMap<PathBuf, Vec<WrapperCandidate>> = HashMap::new();
        for (i, out) in results {
            let root = &jobs[indexed[i].job].crate_root;
            for w in &out.wrappers {
                let known = wrappers
                    .get(root)
                    .is_some_and(|ws| ws.iter().any(|k| k.canonical == w.canonical));
                let listed = found
                    .get(root)
                    .is_some_and(|ws| ws.iter().any(|k| k.canonical == w.canonical));
                if !known && !listed {
                    found.entry(root.clone()).or_default().push(w.clone());
                }
            }
            slots[i] = Some(out);
        }
        if found.is_empty() {
            break;
        }
        // Re-analyse the files of those crates that mention a new wrapper by name.
        let names: HashMap<&PathBuf, Vec<String>> = found
            .iter()
            .map(|(root, ws)| {
                (
                    root,
                    ws.iter()
                        .map(|w| w.canonical.rsplit("::").next().unwrap_or("").to_string())
                        .collect(),
                )
            })
            .collect();
        todo = (0..indexed.len())
            .filter(|&i| {
                let root = &jobs[indexed[i].job].crate_root;
                names.get(root).is_some_and(|ns| {
                    ns.iter()
                        .any(|n| indexed[i].source.text.contains(n.as_str()))
                })
            })
            .collect();
        for (root, ws) in found {
            wrappers.entry(root).or_default().extend(ws);
        }
        let mut rebuilt = std::collections::HashSet::new();
        for &i in &todo {
            let job = &jobs[indexed[i].job];
            let key = (config_id(&job.config), job.crate_root.clone());
            if rebuilt.insert(key.clone()) {
                let ws = wrappers
                    .get(&job.crate_root)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                packsets.insert(key, Arc::new(with_wrappers(&job.config.packs, ws)?));
            }
        }
    }
    let outputs: Vec<FileOutput> = slots.into_iter().flatten().collect();
    let mut report = Report {
        errors,
        files_analyzed: indexed.len(),
        ..Default::default()
    };
    let mut suppressed = 0;
    for o in outputs {
        report.sites.extend(o.sites);
        suppressed += o.suppressed;
        if !o.findings.is_empty() {
            report.sources.insert(o.display.clone(), o.text);
        }
        report.findings.extend(o.findings);
    }
    report.finish();
    let configs = configs
        .loaded()
        .iter()
        .filter_map(|c| c.path.clone())
        .collect();
    Ok(Outcome {
        report,
        suppressed,
        configs,
    })
}

/// How many times the wrapper fixpoint may widen (wrappers of wrappers of …).
const MAX_WRAPPER_ROUNDS: usize = 8;

/// Configurations are shared; their address identifies them for the per-crate pack cache.
fn config_id(c: &Arc<Config>) -> usize {
    Arc::as_ptr(c) as usize
}

/// The config's packs plus the crate's wrappers, each added to the pack of the library it wraps.
fn with_wrappers(base: &PackSet, wrappers: &[WrapperCandidate]) -> Result<PackSet, ToolError> {
    let mut packs = base.packs.clone();
    for w in wrappers {
        if let Some(p) = packs.iter_mut().find(|p| p.pack.name == w.library) {
            p.calls.push(CallDef::wrapper(w));
        }
    }
    PackSet::new(packs)
}

fn read_error(job: &Job, line: Option<usize>, message: String) -> FileError {
    FileError {
        path: job.file.display.clone(),
        line,
        message,
    }
}

fn index_one(i: usize, job: &Job) -> Result<(Indexed, FileIndex), FileError> {
    let bytes = std::fs::read(&job.file.abs)
        .map_err(|e| read_error(job, None, format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
        let (line, column) = line_col(&prefix, prefix.len());
        read_error(
            job,
            Some(line),
            format!("not valid UTF-8: invalid byte at line {line}, column {column}"),
        )
    })?;
    let module = module_path_for(&job.crate_root, &job.file.abs);
    let result = match syn::parse_file(&text) {
        Ok(ast) => {
            let mut imports = Imports::new(module.clone());
            imports.add_items(&ast.items);
            Ok(FileIndex::build(&ast, &imports))
        }
        Err(e) => {
            let at = e.span().start();
            Err(read_error(
                job,
                Some(at.line.max(1)),
                format!(
                    "cannot parse: {e} (line {}, column {})",
                    at.line.max(1),
                    at.column + 1
                ),
            ))
        }
    };
    // Spans of this file are no longer needed; without this every parsed file stays in memory.
    proc_macro2::extra::invalidate_current_thread_spans();
    let fi = result?;
    let source = SourceFile::new(job.file.abs.clone(), job.file.display.clone(), text);
    Ok((
        Indexed {
            job: i,
            source,
            module,
        },
        fi,
    ))
}

struct FileOutput {
    wrappers: Vec<WrapperCandidate>,
    display: String,
    text: Arc<str>,
    sites: Vec<SiteRecord>,
    findings: Vec<Finding>,
    suppressed: usize,
}

fn analyze_one(
    ix: &Indexed,
    job: &Job,
    index: &CrateIndex,
    packs: &PackSet,
    settings: &CheckSettings,
) -> FileOutput {
    let src = &ix.source;
    let config = &job.config;
    let directives = Directives::scan(src, &|r| lints::by_id(r).is_some());
    let long_call = |name: &str| config.rules.long_calls.is_match(name);
    let (classified, events, clocks, wrappers) = match syn::parse_file(&src.text) {
        Ok(ast) => {
            let mut imports = Imports::new(ix.module.clone());
            imports.add_items(&ast.items);
            let cx = FileCx {
                source: src,
                imports: &imports,
                index,
                packs,
                long_call: &long_call,
            };
            let facts = sites::analyze_file(&ast, &cx);
            let classified: Vec<Classified> = facts
                .sites
                .into_iter()
                .map(|s| classify(s, src, &directives, config))
                .collect();
            (classified, facts.events, facts.clocks, facts.wrappers)
        }
        Err(_) => (Vec::new(), Vec::new(), Vec::new(), Vec::new()), // parsed in phase 1; cannot fail here
    };
    proc_macro2::extra::invalidate_current_thread_spans();

    let level_of = |id: &'static str| -> Level {
        if !settings.selected(id) {
            return Level::Off;
        }
        config.rules.levels.get(id).copied().unwrap_or(Level::Off)
    };
    let mut raw: Vec<(&'static str, lints::Violation)> = Vec::new();
    let view = lints::FileView {
        sites: &classified,
        events: &events,
        clocks: &clocks,
    };
    for rule in lints::RULES {
        if level_of(rule.id) == Level::Off {
            continue;
        }
        match rule.check {
            Check::Site(f) => {
                for c in &classified {
                    if let Some(mut v) = f(c, &config.rules) {
                        if let Some(func) = &c.site.function {
                            v.fn_line = Some(func.sig_line);
                            v.context = func.path.clone();
                        }
                        raw.push((rule.id, v));
                    }
                }
            }
            Check::Directive(f) => {
                raw.extend(directives.all.iter().filter_map(f).map(|v| (rule.id, v)))
            }
            Check::File(f) => raw.extend(f(&view, &config.rules).into_iter().map(|v| (rule.id, v))),
            Check::Engine => {}
        }
    }

    // Suppressions: `allow(rule) reason = "…"` on the finding's line, in the comment block above
    // it, or above the enclosing fn.
    let mut used = vec![false; directives.all.len()];
    let mut findings = Vec::new();
    let mut suppressed = 0;
    for (id, v) in raw {
        let reason = suppression(&directives, src, id, &v, &mut used);
        if reason.is_some() {
            suppressed += 1;
        }
        let mut f = make_finding(src, id, level_of(id), v);
        f.suppressed = reason.is_some();
        f.suppression_reason = reason;
        findings.push(f);
    }
    if level_of("unused-suppression") != Level::Off {
        for (i, d) in directives.all.iter().enumerate() {
            let DirectiveKind::Allow { rules, .. } = &d.kind else {
                continue;
            };
            // A suppression of rules that are all turned off has nothing to suppress, by choice.
            if used[i]
                || rules
                    .iter()
                    .all(|r| lints::by_id(r).is_none_or(|m| level_of(m.id) == Level::Off))
            {
                continue;
            }
            let v = lints::Violation {
                span: d.span,
                message: format!("this suppression of {} suppressed nothing", rules.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")),
                help: "remove it; the finding it was written for is gone, or the suppression is not on the finding's line, the line above it, or above its fn".into(),
                ..Default::default()
            };
            findings.push(make_finding(
                src,
                "unused-suppression",
                level_of("unused-suppression"),
                v,
            ));
        }
    }
    let sites = classified
        .iter()
        .map(|c| SiteRecord {
            path: src.display.clone(),
            line: c.site.span.line,
            column: c.site.span.column,
            library: c.site.library.clone(),
            api: c.site.api.clone(),
            kind: c.site.kind,
            purpose: c.purpose,
            purpose_source: c.source,
            fenced_by: c.fenced_by.clone(),
            ttl_ms: c.site.ttl.ms(),
            fencing: c.site.fencing,
            function: c.site.function.as_ref().map(|f| f.path.clone()),
            key: c.site.key.clone(),
            via: c.site.via.clone(),
        })
        .collect();
    FileOutput {
        display: src.display.clone(),
        text: Arc::from(src.text.as_str()),
        sites,
        findings,
        suppressed,
        wrappers,
    }
}

/// The reason of the first `allow` directive that covers this finding, marking it used.
fn suppression(
    directives: &Directives,
    src: &SourceFile,
    rule: &str,
    v: &lints::Violation,
    used: &mut [bool],
) -> Option<String> {
    let line = v.span.line;
    let mut candidates: Vec<&crate::directives::Directive> = directives.on_line(line).collect();
    candidates.extend(directives.block_above(src, line));
    if let Some(fl) = v.fn_line {
        candidates.extend(directives.block_above(src, fl));
    }
    for d in candidates {
        if let DirectiveKind::Allow { rules, reason } = &d.kind
            && rules.iter().any(|r| r == rule)
        {
            if let Some(i) = directives.all.iter().position(|x| std::ptr::eq(x, d)) {
                used[i] = true;
            }
            return Some(reason.clone());
        }
    }
    None
}

fn make_finding(
    src: &SourceFile,
    rule: &'static str,
    severity: Level,
    v: lints::Violation,
) -> Finding {
    let Span {
        line,
        column,
        end_line,
        end_column,
    } = v.span;
    Finding {
        rule,
        severity,
        path: src.display.clone(),
        line,
        column,
        end_line,
        end_column,
        message: v.message,
        help: v.help,
        fingerprint: String::new(),
        line_text: crate::report::normalize_line(src.line(line)),
        context: v.context,
        suppressed: false,
        suppression_reason: None,
        utf16: (
            src.utf16_column(line, column),
            src.utf16_column(end_line, end_column),
        ),
    }
}
