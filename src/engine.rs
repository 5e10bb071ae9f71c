//! The work: discover -> parse and index (parallel) -> crate indexes -> analyse (parallel) ->
//! sorted report. Each phase's workers own their state; results are merged and sorted at the end.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::cache::{self, Cache};
use crate::classify::{Classified, classify};
use crate::config::{Config, Configs};
use crate::diag::{FileError, ToolError, line_col};
use crate::directives::{DirectiveKind, Directives};
use crate::discover::{self, Candidate};
use crate::lints::{self, Check, Level};
use crate::model::{CrateIndex, FileIndex, Imports, module_path_for};
use crate::packs;
use crate::packs::{CallDef, PackSet};
use crate::prefilter;
use crate::report::{Finding, Renewal, Report, SiteRecord};
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
    pub stats: Stats,
}

/// What the run did, for `--verbose` and the benchmark.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Files read.
    pub files: usize,
    /// Files parsed (the rest the prefilter showed cannot matter).
    pub parsed: usize,
    /// Files analysed, counting each wrapper round.
    pub analysed: usize,
    /// Crates whose results came from the cache.
    pub cached_crates: usize,
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

    // Read every file; the prefilter decides from the text which ones to parse.
    let reads: Vec<Result<String, FileError>> =
        pool.install(|| jobs.par_iter().map(read_text).collect());
    let mut errors = found.errors;

    // The cache: crates whose files, configs and version are unchanged are served from it.
    let cache = settings.cache_dir.as_deref().and_then(Cache::open);
    let mut crate_jobs: BTreeMap<&Path, Vec<usize>> = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        crate_jobs
            .entry(job.crate_root.as_path())
            .or_default()
            .push(i);
    }
    let mut hits: Vec<cache::Entry> = Vec::new();
    let mut misses: Vec<(String, Vec<usize>)> = Vec::new();
    let mut from_cache = vec![false; jobs.len()];
    if let Some(cache) = &cache {
        for (root, members) in &crate_jobs {
            let key = crate_key(root, members, &jobs, &reads, settings);
            match cache.get(&key) {
                Some(entry) => {
                    members.iter().for_each(|&i| from_cache[i] = true);
                    hits.push(entry);
                }
                None => misses.push((key, members.clone())),
            }
        }
    }
    let by_display: HashMap<&str, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.file.display.as_str(), i))
        .collect();
    let mut sources: BTreeMap<String, Arc<str>> = BTreeMap::new();
    for entry in &hits {
        for f in entry.files.iter().filter(|f| !f.findings.is_empty()) {
            if let Some(&i) = by_display.get(f.display.as_str())
                && let Ok(text) = &reads[i]
            {
                sources.insert(f.display.clone(), Arc::from(text.as_str()));
            }
        }
    }

    let triggers = prefilter::Words::new(
        configs
            .loaded()
            .iter()
            .flat_map(|c| prefilter::pack_triggers(&c.packs)),
    );
    let relevant: Vec<bool> = pool.install(|| {
        reads
            .par_iter()
            .enumerate()
            .map(|(i, r)| {
                !from_cache[i]
                    && r.as_ref()
                        .is_ok_and(|t| !settings.prefilter || triggers.any_in(t))
            })
            .collect()
    });
    let mut state: Vec<FileState> = Vec::with_capacity(jobs.len());
    for (i, r) in reads.into_iter().enumerate() {
        state.push(match r {
            _ if from_cache[i] => FileState::Cached,
            Err(e) => {
                errors.push(e);
                FileState::Failed
            }
            Ok(text) if relevant[i] => FileState::Wanted(text),
            Ok(_) => FileState::Skipped,
        });
    }

    // Phase 1: parse and index what is wanted; then widen to the files that declare what those
    // use (types leading to lock types, constants), until nothing new is wanted.
    let mut indexes: Vec<Option<FileIndex>> = (0..jobs.len()).map(|_| None).collect();
    loop {
        let wanted: Vec<(usize, String)> = state
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| match std::mem::replace(s, FileState::Failed) {
                FileState::Wanted(t) => Some((i, t)),
                other => {
                    *s = other;
                    None
                }
            })
            .collect();
        if wanted.is_empty() {
            break;
        }
        let parsed: Vec<(usize, Parsed)> = pool.install(|| {
            wanted
                .into_par_iter()
                .map(|(i, text)| (i, index_one(i, &jobs[i], text)))
                .collect()
        });
        let mut touched: Vec<PathBuf> = Vec::new();
        for (i, r) in parsed {
            match r {
                Ok((ix, fi)) => {
                    indexes[i] = Some(fi);
                    touched.push(jobs[i].crate_root.clone());
                    state[i] = FileState::Indexed(Box::new(ix));
                }
                Err(e) => errors.push(e),
            }
        }
        if !settings.prefilter {
            continue;
        }
        widen(&jobs, &mut state, &indexes, &touched, &pool, &mut errors);
    }
    let indexed: Vec<&Indexed> = state
        .iter()
        .filter_map(|s| match s {
            FileState::Indexed(ix) => Some(&**ix),
            _ => None,
        })
        .collect();
    let mut by_crate: HashMap<PathBuf, Vec<FileIndex>> = HashMap::new();
    for (i, fi) in indexes.iter().enumerate() {
        if let Some(fi) = fi {
            by_crate
                .entry(jobs[i].crate_root.clone())
                .or_default()
                .push(fi.clone());
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
    let mut stats = Stats::default();
    let mut todo: Vec<usize> = (0..indexed.len()).collect();
    for _round in 0..MAX_WRAPPER_ROUNDS {
        let packs_for = |job: &Job| -> Arc<PackSet> {
            packsets
                .get(&(config_id(&job.config), job.crate_root.clone()))
                .cloned()
                .unwrap_or_else(|| job.config.packs.clone())
        };
        stats.analysed += todo.len();
        let results: Vec<(usize, FileOutput)> = pool.install(|| {
            todo.par_iter()
                .map(|&i| {
                    let ix = indexed[i];
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
        let names: HashMap<&PathBuf, prefilter::Words> = found
            .iter()
            .map(|(root, ws)| {
                (
                    root,
                    prefilter::Words::new(
                        ws.iter()
                            .map(|w| w.canonical.rsplit("::").next().unwrap_or("").to_string()),
                    ),
                )
            })
            .collect();
        todo = (0..indexed.len())
            .filter(|&i| {
                names
                    .get(&jobs[indexed[i].job].crate_root)
                    .is_some_and(|w| w.any_in(&indexed[i].source.text))
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
    let failed = state
        .iter()
        .filter(|s| matches!(s, FileState::Failed))
        .count();
    let mut report = Report {
        files_analyzed: jobs.len() - failed,
        sources,
        ..Default::default()
    };
    let mut suppressed = 0;
    let mut fresh: HashMap<String, cache::CachedFile> = HashMap::new();
    for o in outputs {
        if cache.is_some() {
            fresh.insert(
                o.display.clone(),
                cache::CachedFile {
                    display: o.display.clone(),
                    sites: o.sites.clone(),
                    findings: o
                        .findings
                        .iter()
                        .map(cache::CachedFinding::from_finding)
                        .collect(),
                    suppressed: o.suppressed,
                },
            );
        }
        report.sites.extend(o.sites);
        suppressed += o.suppressed;
        if !o.findings.is_empty() {
            report.sources.insert(o.display.clone(), o.text);
        }
        report.findings.extend(o.findings);
    }
    if let Some(cache) = &cache {
        for (key, members) in &misses {
            let displays: Vec<&str> = members
                .iter()
                .map(|&i| jobs[i].file.display.as_str())
                .collect();
            let entry = cache::Entry {
                files: displays.iter().filter_map(|d| fresh.remove(*d)).collect(),
                errors: errors
                    .iter()
                    .filter(|e| displays.contains(&e.path.as_str()))
                    .cloned()
                    .collect(),
            };
            cache.put(key, &entry);
        }
    }
    stats.cached_crates = hits.len();
    for entry in hits {
        errors.extend(entry.errors);
        for f in entry.files {
            report.sites.extend(f.sites);
            suppressed += f.suppressed;
            report.findings.extend(
                f.findings
                    .into_iter()
                    .filter_map(cache::CachedFinding::into_finding),
            );
        }
    }
    report.errors = errors;
    report.finish();
    let mut configs: Vec<PathBuf> = configs
        .loaded()
        .iter()
        .filter_map(|c| c.path.clone())
        .collect();
    configs.sort();
    stats.files = jobs.len();
    stats.parsed = indexed.len();
    Ok(Outcome {
        stats,
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

/// A file's parse and index, or why it has none.
type Parsed = Result<(Indexed, FileIndex), FileError>;

/// Where a file is in the pipeline.
enum FileState {
    /// Could not be read or parsed (reported).
    Failed,
    /// Its crate's results came from the cache.
    Cached,
    /// The prefilter found nothing in it that could matter.
    Skipped,
    /// To be parsed, with its text.
    Wanted(String),
    Indexed(Box<Indexed>),
}

/// Everything a crate's results depend on.
fn crate_key(
    root: &Path,
    members: &[usize],
    jobs: &[Job],
    reads: &[Result<String, FileError>],
    settings: &CheckSettings,
) -> String {
    let mut key = cache::Key::new();
    key.part(root.to_string_lossy().as_bytes());
    let mut rules: Vec<&str> = lints::RULES
        .iter()
        .map(|r| r.id)
        .filter(|id| settings.selected(id))
        .collect();
    rules.sort_unstable();
    key.part(rules.join(",").as_bytes())
        .part(&[u8::from(settings.prefilter)]);
    for &i in members {
        let job = &jobs[i];
        key.part(job.file.display.as_bytes());
        key.part(&job.config.digest.to_le_bytes());
        key.part(
            job.config
                .path
                .as_deref()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
                .as_bytes(),
        );
        match &reads[i] {
            Ok(text) => key.part(&cache::content_hash(text.as_bytes()).to_le_bytes()),
            Err(e) => key.part(e.message.as_bytes()),
        };
    }
    key.finish()
}

/// The prefilter's closure: skipped files of the crates just indexed that name one of their
/// lock-carrying items, or define a constant they read, become wanted.
fn widen(
    jobs: &[Job],
    state: &mut [FileState],
    indexes: &[Option<FileIndex>],
    touched: &[PathBuf],
    pool: &rayon::ThreadPool,
    errors: &mut Vec<FileError>,
) {
    let mut terms: HashMap<&PathBuf, (prefilter::Words, prefilter::Words)> = HashMap::new();
    for root in touched {
        if terms.contains_key(root) {
            continue;
        }
        let members: Vec<usize> = (0..jobs.len())
            .filter(|&i| &jobs[i].crate_root == root)
            .collect();
        let files = members.iter().filter_map(|&i| indexes[i].as_ref());
        let packs = &jobs[members[0]].config.packs;
        let names = prefilter::interesting_names(files, packs);
        let mut consts = std::collections::HashSet::new();
        for &i in &members {
            if let FileState::Indexed(ix) = &state[i] {
                consts.extend(prefilter::constant_like(&ix.source.text));
            }
        }
        terms.insert(
            root,
            (
                prefilter::Words::new(names),
                prefilter::constant_definitions(&consts),
            ),
        );
    }
    let candidates: Vec<usize> = (0..jobs.len())
        .filter(|&i| {
            matches!(state[i], FileState::Skipped) && terms.contains_key(&jobs[i].crate_root)
        })
        .collect();
    let reread: Vec<(usize, Result<String, FileError>)> = pool.install(|| {
        candidates
            .into_par_iter()
            .map(|i| (i, read_text(&jobs[i])))
            .collect()
    });
    for (i, r) in reread {
        match r {
            Ok(text) => {
                let (names, consts) = &terms[&jobs[i].crate_root];
                if names.any_in(&text) || consts.any_in(&text) {
                    state[i] = FileState::Wanted(text);
                }
            }
            Err(e) => {
                errors.push(e);
                state[i] = FileState::Failed;
            }
        }
    }
}

fn read_text(job: &Job) -> Result<String, FileError> {
    let bytes = std::fs::read(&job.file.abs)
        .map_err(|e| read_error(job, None, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
        let (line, column) = line_col(&prefix, prefix.len());
        read_error(
            job,
            Some(line),
            format!("not valid UTF-8: invalid byte at line {line}, column {column}"),
        )
    })
}

fn index_one(i: usize, job: &Job, text: String) -> Result<(Indexed, FileIndex), FileError> {
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
            release: c.site.release,
            consensus: c.site.consensus,
            renewal: if c.site.region.keeper {
                Renewal::Keeper
            } else if c.site.region.renewed {
                Renewal::Renewed
            } else {
                Renewal::None
            },
            wrapped: c.site.wrapped,
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
