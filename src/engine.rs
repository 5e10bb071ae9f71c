//! The work: discover -> parse and index (parallel) -> crate indexes -> analyse (parallel) ->
//! sorted report. Each phase's workers own their state; results are merged and sorted at the end.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::blank;
use crate::cache::{self, Cache};
use crate::classify::{Classified, classify};
use crate::config::{Config, Configs};
use crate::diag::{FileError, ToolError, line_col};
use crate::directives::{DirectiveKind, Directives};
use crate::discover::{self, Candidate};
use crate::lints::{self, Check, Level};
use crate::model::{CrateGraph, CrateIndex, CrateView, FileIndex, Imports, module_path_for};
use crate::packs;
use crate::packs::{CallDef, CallKind, PackSet, ReleaseStyle};
use crate::prefilter;
use crate::report::{Finding, Renewal, Report, SiteRecord};
use crate::settings::CheckSettings;
use crate::sites::{self, FileCx, WrapperCandidate};
use crate::source::{SourceFile, Span};

/// Deeply nested code recurses deeply in syn and in our walks; files nesting past
/// `lex::MAX_NESTING` are refused before parsing, and this holds several times that limit in the
/// worst construct even in a debug build (the memory is reserved, and touched only as used).
const WORKER_STACK: usize = 256 * 1024 * 1024;

struct Job {
    file: Candidate,
    config: Arc<Config>,
    /// Shared by the crate's files.
    crate_root: Arc<Path>,
}

/// What reading a crate gave.
enum CrateRead {
    /// Served by the cache; with the texts of the files whose findings are shown.
    Hit {
        entry: cache::Entry,
        sources: Vec<(String, Arc<str>)>,
        hashed_only: bool,
    },
    /// To analyse: per member, its text when the prefilter wants it parsed. The key is where its
    /// results will be cached.
    Miss {
        key: Option<String>,
        files: Vec<Result<Option<String>, FileError>>,
    },
}

struct Indexed {
    source: SourceFile,
    module: String,
    /// The constants the file may read, for the prefilter's closure (empty without a prefilter).
    constants: HashSet<String>,
    /// For a file parsed in pieces: what the pieces need of each other.
    pieces: Option<PieceCx>,
    /// Its items, which the analysis blanks where they cannot matter (see `blank`).
    layout: Vec<blank::Part>,
    /// The test regions of a file small enough to be parsed whole (it is blanked only then),
    /// found on the whole tree.
    whole: Option<sites::test_code::TestCode>,
    /// The struct field initialisers of the whole file, of all its pieces when it is parsed in
    /// pieces: a method of one item reads a field another item's struct literal set, and the
    /// blanked analysis no longer holds the literal.
    field_inits: sites::FieldInits,
    /// The file is a module declared under `#[cfg(test)]` elsewhere; asked once, by the first
    /// analysis that finds something to report (it reads the declaring files).
    declared_for_tests: std::sync::OnceLock<bool>,
}

pub struct Outcome {
    pub report: Report,
    /// What `--verbose` says beyond the report (files next to the sources that were not used).
    pub notes: Vec<String>,
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
    /// Of those, the ones served after hashing their files alone (no text checked or scanned).
    pub hashed_only: usize,
    /// Wall-clock time of each stage, in order.
    pub stages: Vec<(&'static str, std::time::Duration)>,
}

/// Records how long each stage took, for `--verbose`.
struct Clock {
    last: std::time::Instant,
    stages: Vec<(&'static str, std::time::Duration)>,
}

impl Clock {
    fn start() -> Clock {
        Clock {
            last: std::time::Instant::now(),
            stages: Vec::new(),
        }
    }

    fn lap(&mut self, stage: &'static str) {
        let now = std::time::Instant::now();
        self.stages.push((stage, now - self.last));
        self.last = now;
    }
}

pub fn check(settings: &CheckSettings) -> Result<Outcome, ToolError> {
    let cwd = std::env::current_dir()
        .map_err(|e| ToolError::Usage(format!("cannot read the current directory: {e}")))?;
    let mut clock = Clock::start();
    let builtin = packs::builtin()?;
    let found = discover::discover(&settings.paths, &cwd, settings.threads)?;
    clock.lap("discover");
    let mut configs = Configs::new(builtin, settings.config.as_deref())?.verbose(settings.verbose);
    let mut roots: HashMap<PathBuf, Option<Arc<Path>>> = HashMap::new();
    let mut jobs = Vec::new();
    // Files come sorted, so a folder's files are mostly consecutive: its config and crate are
    // looked up once per run of them (then found in the lookups' own memos), not per file.
    let mut folder: Option<(PathBuf, Arc<Config>, Arc<Path>)> = None;
    for file in found.files {
        let dir = file.abs.parent().unwrap_or(Path::new(""));
        let (config, crate_root) = match &folder {
            Some((d, config, root)) if d.as_os_str() == dir.as_os_str() => {
                (config.clone(), root.clone())
            }
            _ => {
                let config = configs.for_dir(dir)?;
                let root = crate_root(dir, &mut roots, &mut configs);
                folder = Some((dir.to_path_buf(), config.clone(), root.clone()));
                (config, root)
            }
        };
        if config.excludes(&file.abs) {
            continue;
        }
        jobs.push(Job {
            file,
            config,
            crate_root,
        });
    }
    clock.lap("configs");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(settings.threads)
        .stack_size(WORKER_STACK)
        .build()
        .map_err(|e| ToolError::Usage(format!("cannot start worker threads: {e}")))?;

    // Per crate, in parallel: read each file once into a reused buffer, hash it for the cache
    // key and keep its text only when the prefilter wants it parsed (the closure below re-reads
    // the few others it wants); then ask the cache. Memory follows the relevant files, not the
    // corpus.
    let triggers = prefilter::Words::classed(
        configs
            .loaded()
            .iter()
            .flat_map(|c| prefilter::pack_triggers(&c.packs)),
    );
    let cache = settings.cache_dir.as_deref().and_then(Cache::open);
    let mut by_root: HashMap<&Path, Vec<usize>> = HashMap::new();
    for (i, job) in jobs.iter().enumerate() {
        by_root.entry(&job.crate_root).or_default().push(i);
    }
    // The workspace as one program: which crate may name which. Crates that see each other are
    // read and cached as one unit (a crate's results depend on what its dependencies hold).
    let roots: Vec<Arc<Path>> = {
        let mut r: Vec<Arc<Path>> = jobs.iter().map(|j| j.crate_root.clone()).collect();
        r.sort();
        r.dedup();
        r
    };
    let graph = CrateGraph::build(&roots);
    let crate_jobs: Vec<(&Path, Vec<usize>)> = graph
        .components(&roots)
        .into_iter()
        .map(|part| {
            let mut members: Vec<usize> = part
                .iter()
                .flat_map(|r| by_root.get(&**r).into_iter().flatten().copied())
                .collect();
            members.sort_unstable();
            (jobs[members[0]].crate_root.as_ref(), members)
        })
        .collect();
    clock.lap("crate graph");
    // A crate that is itself a library a pack describes (zookeeper-client's own recipes): any of
    // its files may hold the primitive, under names that are its own (`crate::client::Client`),
    // which no trigger spells. All its files are read.
    let library_roots: HashSet<String> = configs
        .loaded()
        .iter()
        .flat_map(|c| c.packs.library_roots())
        .map(str::to_string)
        .collect();
    let libraries: HashSet<&Path> = roots
        .iter()
        .filter(|r| graph.own_name(r).is_some_and(|n| library_roots.contains(n)))
        .map(|r| &**r)
        .collect();
    let wants = |job: &Job, t: &str| {
        !settings.prefilter || libraries.contains(&*job.crate_root) || triggers.any_in(t)
    };
    let read_crates: Vec<CrateRead> = pool.install(|| {
        crate_jobs
            .par_iter()
            .with_max_len(1)
            .map(|(root, members)| {
                let files = CrateFiles {
                    root,
                    members,
                    jobs: &jobs,
                };
                match &cache {
                    Some(cache) => files.read_cached(cache, &wants, settings),
                    None => CrateRead::Miss {
                        key: None,
                        files: files
                            .read(&wants, false)
                            .into_iter()
                            .map(|r| r.text)
                            .collect(),
                    },
                }
            })
            .collect()
    });
    clock.lap("read");
    let mut errors = found.errors;
    errors.extend(configs.take_problems(&cwd));
    let mut hits: Vec<cache::Entry> = Vec::new();
    let mut hashed_only_crates = 0;
    let mut misses: Vec<(String, Vec<usize>)> = Vec::new();
    let mut sources: BTreeMap<String, Arc<str>> = BTreeMap::new();
    let mut state: Vec<FileState> = (0..jobs.len()).map(|_| FileState::Skipped).collect();
    for ((_, members), read) in crate_jobs.iter().zip(read_crates) {
        match read {
            CrateRead::Hit {
                entry,
                sources: shown,
                hashed_only,
            } => {
                hashed_only_crates += usize::from(hashed_only);
                members.iter().for_each(|&i| state[i] = FileState::Cached);
                sources.extend(shown);
                hits.push(entry);
            }
            CrateRead::Miss { key, files } => {
                for (&i, f) in members.iter().zip(files) {
                    state[i] = match f {
                        Err(e) => {
                            errors.push(e);
                            FileState::Failed
                        }
                        Ok(Some(text)) => FileState::Wanted(text),
                        Ok(None) => FileState::Skipped,
                    };
                }
                if let Some(key) = key {
                    misses.push((key, members.clone()));
                }
            }
        }
    }

    // Phase 1: parse and index what is wanted; then widen to the files that declare what those
    // use (types leading to lock types, constants), until nothing new is wanted.
    let members_of: HashMap<&Path, &[usize]> = by_root
        .iter()
        .map(|(root, members)| (*root, members.as_slice()))
        .collect();
    let mut indexes: Vec<Option<FileIndex>> = (0..jobs.len()).map(|_| None).collect();
    let phase = Phase {
        jobs: &jobs,
        members_of: &members_of,
        graph: &graph,
        pool: &pool,
        settings,
    };
    phase.parse_wanted(&mut state, &mut indexes, &mut errors);
    let mut views = phase.views(&indexes, None, HashMap::new());
    clock.lap("parse and index");

    // Phase 2: find sites, classify, run the rules. In rounds: the wrappers a round finds make
    // their callers sites in the next (wrappers of wrappers, in this crate or in the crates that
    // depend on it), until nothing new turns up. Each round adds at least one wrapper, and there
    // are finitely many functions, so this is the real fixpoint; the bound only guards against
    // a bug and says so when hit.
    let empty = CrateView::default();
    let mut wrappers: HashMap<Arc<Path>, Vec<WrapperCandidate>> = HashMap::new();
    let mut packsets: HashMap<PackKey, Arc<PackSet>> = HashMap::new();
    // The files of a described library's own target (not its examples, tests or benches, which
    // use it as users do) see the packs from inside: in the crate's spellings, without the
    // entries its own code now shows.
    let key_of = |job: &Job| -> PackKey {
        let inside = libraries.contains(&*job.crate_root) && in_library_target(job);
        (config_id(&job.config), job.crate_root.clone(), inside)
    };
    let own_spellings = |set: PackSet, key: &PackKey, views: &HashMap<Arc<Path>, CrateView>| {
        let own = graph.own_name(&key.1).filter(|_| key.2);
        match (own, views.get(&key.1)) {
            (Some(own), Some(view)) => set.inside_library(own, view).unwrap_or(set),
            _ => set,
        }
    };
    for job in &jobs {
        let key = key_of(job);
        if key.2 && !packsets.contains_key(&key) {
            let set = own_spellings((*job.config.packs).clone(), &key, &views);
            packsets.insert(key, Arc::new(set));
        }
    }
    let mut slots: Vec<Option<FileOutput>> = (0..jobs.len()).map(|_| None).collect();
    let mut stats = Stats::default();
    let mut todo: Vec<usize> = indexed_jobs(&state);
    let mut rounds = 0;
    // After the fixpoint, one more round for the files whose wrapped primitives no reported
    // call site surfaces (see `surface`).
    let mut in_place: HashMap<usize, HashSet<(usize, usize)>> = HashMap::new();
    let mut surfacing = false;
    let no_place = HashSet::new();
    loop {
        rounds += 1;
        let packs_for = |job: &Job| -> Arc<PackSet> {
            packsets
                .get(&key_of(job))
                .cloned()
                .unwrap_or_else(|| job.config.packs.clone())
        };
        stats.analysed += todo.len();
        largest_first(&mut todo, |&i| {
            indexed_at(&state, i).map_or(0, |ix| ix.source.text.len())
        });
        // Per pack set: the words a function body must hold to be parsed for the analysis.
        // A name a `use … as` gives a pack's function or a wrapper, anywhere, counts too.
        let (renames, type_aliases) = blank::aliases(indexes.iter().flatten());
        let mut keeps: HashMap<usize, blank::Keep> = HashMap::new();
        for &i in &todo {
            let packs = packs_for(&jobs[i]);
            keeps
                .entry(Arc::as_ptr(&packs) as usize)
                .or_insert_with(|| {
                    let mut words = blank::call_words(&packs);
                    words.single.extend(renames.iter().cloned());
                    words.stand_ins.extend(type_aliases.iter().cloned());
                    blank::Keep::new(&words)
                });
        }
        let mut results: Vec<(usize, FileOutput)> = pool.install(|| {
            todo.par_iter()
                .with_max_len(1)
                .filter_map(|&i| {
                    let ix = indexed_at(&state, i)?;
                    let job = &jobs[i];
                    let index = views.get(&job.crate_root).unwrap_or(&empty);
                    let packs = packs_for(job);
                    let keep = &keeps[&(Arc::as_ptr(&packs) as usize)];
                    let in_place = in_place.get(&i).unwrap_or(&no_place);
                    Some((
                        i,
                        analyze_one(ix, job, index, &packs, keep, in_place, settings),
                    ))
                })
                .collect()
        });
        results.sort_unstable_by_key(|(i, _)| *i);
        let mut found: HashMap<Arc<Path>, Vec<WrapperCandidate>> = HashMap::new();
        let mut last_found: Option<(usize, String)> = None;
        for (i, out) in results {
            let root = &jobs[i].crate_root;
            for w in &out.wrappers {
                // A function first seen releasing (its acquire's wrapper was not known yet) is
                // seen acquiring once it is: the acquisition replaces it. Only that way round,
                // so each function changes at most once and the rounds end.
                // A wrapper is a function of one library: a helper over two backends is one
                // wrapper of each (see `sites::walk`).
                // Likewise an acquire function first seen holding a lock nothing renews is seen
                // again once a helper it calls is known to renew (a heartbeat it spawns): its
                // callers' locks are renewed. `auto_renew` only goes from false to true.
                let known = wrappers.get(root).is_some_and(|ws| {
                    ws.iter().any(|k| {
                        k.same_function(w)
                            && (k.kind.is_acquisition() || !w.kind.is_acquisition())
                            && !(w.kind.is_acquisition()
                                && k.kind.is_acquisition()
                                && w.auto_renew
                                && !k.auto_renew)
                    })
                });
                let listed = found
                    .get(root)
                    .is_some_and(|ws| ws.iter().any(|k| k.same_function(w)));
                if !known && !listed {
                    let mut w = w.clone();
                    w.origin = Some(origin_of(root, &w.canonical));
                    last_found = Some((i, w.via.clone()));
                    found.entry(root.clone()).or_default().push(w);
                }
            }
            slots[i] = Some(out);
        }
        expand_through_traits(&mut found, &wrappers, &views, &graph);
        if found.is_empty() {
            if !surfacing {
                surfacing = true;
                in_place = surface(&slots, &jobs);
                if !in_place.is_empty() {
                    todo = in_place.keys().copied().collect();
                    todo.sort_unstable();
                    continue;
                }
            }
            break;
        }
        if rounds >= MAX_WRAPPER_ROUNDS {
            if let Some((i, via)) = last_found {
                errors.push(read_error(
                    &jobs[i],
                    None,
                    format!(
                        "note: wrapper inference stopped after {MAX_WRAPPER_ROUNDS} rounds at `{via}`; calls to it are not lock sites in this run"
                    ),
                ));
            }
            break;
        }
        for (root, ws) in &found {
            let known = wrappers.entry(root.clone()).or_default();
            known.retain(|k| !ws.iter().any(|w| w.same_function(k)));
            known.extend(ws.iter().cloned());
        }
        // Who can call the new wrappers: their crate, and the crates that depend on it (and
        // on those, through re-exports), each by the name it uses.
        let mut callers: HashMap<Arc<Path>, HashSet<String>> = HashMap::new();
        for (root, ws) in &found {
            // A method's owner too: a trait re-exported from another module (`pub use
            // crate::connector::Connector`) is found in files that name the trait, not the method.
            let mut names: Vec<String> = ws
                .iter()
                .flat_map(|w| {
                    let mut segs = w.canonical.rsplit("::");
                    let last = segs.next().unwrap_or("").to_string();
                    let owner = w.method.as_ref().and(segs.next()).map(str::to_string);
                    std::iter::once(last).chain(owner)
                })
                .collect();
            // A `Drop` that releases changes how every wrapper handing out that type is
            // released: their callers are judged again (`let Some(_lock) = try_acquire(..)`
            // names neither the type nor `drop`).
            let dropped = drop_released(ws);
            if !dropped.is_empty() {
                names.extend(
                    wrappers
                        .values()
                        .chain(found.values())
                        .flatten()
                        .filter(|w| {
                            w.returns_type
                                .as_deref()
                                .is_some_and(|t| dropped.contains(t))
                        })
                        .filter_map(|w| w.canonical.rsplit("::").next().map(str::to_string)),
                );
            }
            for r in std::iter::once(root).chain(graph.dependents(root)) {
                callers
                    .entry(r.clone())
                    .or_default()
                    .extend(names.iter().cloned());
                for rr in graph.dependents(r) {
                    callers
                        .entry(rr.clone())
                        .or_default()
                        .extend(names.iter().cloned());
                }
            }
        }
        let words: HashMap<&Arc<Path>, prefilter::Words> = callers
            .iter()
            .map(|(root, names)| (root, prefilter::Words::for_few_texts(names.iter().cloned())))
            .collect();
        // Files the prefilter skipped may call a wrapper: bring those in, with what they use.
        let mut brought = Vec::new();
        if settings.prefilter {
            brought = phase.bring_in(&words, &mut state, &mut indexes, &mut errors);
            if !brought.is_empty() {
                let changed: HashSet<Arc<Path>> = brought
                    .iter()
                    .map(|&i| jobs[i].crate_root.clone())
                    .collect();
                views = phase.views(&indexes, Some(&changed), views);
            }
        }
        todo = indexed_jobs(&state)
            .into_iter()
            .filter(|&i| {
                brought.contains(&i)
                    || words.get(&jobs[i].crate_root).is_some_and(|w| {
                        indexed_at(&state, i).is_some_and(|ix| w.any_in(&ix.source.text))
                    })
            })
            .collect();
        let mut rebuilt = HashSet::new();
        for &i in &todo {
            let job = &jobs[i];
            let key = key_of(job);
            if rebuilt.insert(key.clone()) {
                let mut visible = visible_wrappers(&job.crate_root, &wrappers, &graph);
                if let Some(view) = views.get(&job.crate_root) {
                    settle_owners(&mut visible, view);
                }
                let set = with_wrappers(&job.config.packs, &visible, views.get(&job.crate_root))?;
                let set = own_spellings(set, &key, &views);
                packsets.insert(key, Arc::new(set));
            }
        }
    }
    clock.lap("analyse");
    unlisted_gates(&mut slots, &jobs);
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
        errors.extend(o.error.clone());
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
        if let Some(text) = o.text {
            report.sources.insert(o.display.clone(), text);
        }
        report.findings.extend(o.findings);
    }
    if let Some(cache) = &cache {
        let entries: Vec<(&String, cache::Entry)> = misses
            .iter()
            .map(|(key, members)| {
                let displays: HashSet<&str> = members
                    .iter()
                    .map(|&i| jobs[i].file.display.as_str())
                    .collect();
                let files = members
                    .iter()
                    .filter_map(|&i| fresh.remove(jobs[i].file.display.as_str()))
                    .collect();
                let errors = errors
                    .iter()
                    .filter(|e| displays.contains(e.path.as_str()))
                    .cloned()
                    .collect();
                (key, cache::Entry { files, errors })
            })
            .collect();
        pool.install(|| entries.par_iter().for_each(|(key, e)| cache.put(key, e)));
    }
    stats.cached_crates = hits.len();
    stats.hashed_only = hashed_only_crates;
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
    let notes = configs.take_notes();
    let mut configs: Vec<PathBuf> = configs
        .loaded()
        .iter()
        .filter_map(|c| c.path.clone())
        .collect();
    configs.sort();
    clock.lap("report");
    stats.stages = clock.stages;
    stats.files = jobs.len();
    stats.parsed = indexed_jobs(&state).len();
    Ok(Outcome {
        notes,
        stats,
        report,
        suppressed,
        configs,
    })
}

/// The nearest folder at or above `dir` with a `Cargo.toml` (or `dir` itself when none has one).
/// Every folder passed on the way up is remembered, so that each is looked at once per run.
/// The memo holds one shared path per crate, which its files' jobs then share.
fn crate_root(
    dir: &Path,
    known: &mut HashMap<PathBuf, Option<Arc<Path>>>,
    folders: &mut Configs,
) -> Arc<Path> {
    let mut passed: Vec<&Path> = Vec::new();
    let mut found = None;
    for d in dir.ancestors() {
        if let Some(root) = known.get(d) {
            found = root.clone();
            break;
        }
        passed.push(d);
        if folders.has_manifest(d) {
            found = Some(Arc::from(d));
            break;
        }
    }
    for d in passed {
        known.insert(d.to_path_buf(), found.clone());
    }
    found.unwrap_or_else(|| Arc::from(dir))
}

/// Orders work so that the largest files start first: one big file started last would leave the
/// other threads idle while it finishes. (Results are put back in file order afterwards.) The
/// parallel loops over such work take one file per job, so that any idle thread can take the next.
fn largest_first<T>(work: &mut [T], size: impl Fn(&T) -> usize) {
    work.sort_by_key(|w| std::cmp::Reverse(size(w)));
}

/// A guard on the wrapper fixpoint, far above any real chain (each round adds a wrapper).
const MAX_WRAPPER_ROUNDS: usize = 10_000;

/// The job indices of the files parsed and indexed so far, in order.
fn indexed_jobs(state: &[FileState]) -> Vec<usize> {
    (0..state.len())
        .filter(|&i| matches!(state[i], FileState::Indexed(_)))
        .collect()
}

fn indexed_at(state: &[FileState], i: usize) -> Option<&Indexed> {
    match &state[i] {
        FileState::Indexed(ix) => Some(ix),
        _ => None,
    }
}

/// A method wrapper of a type is also reached through each trait whose impl for the type
/// defines the method: in its crate, and in the trait's crate when that is a dependency (generic
/// code there, `fn f<K: Kv>(kv: &K)`, calls every implementation in the workspace).
fn expand_through_traits(
    found: &mut HashMap<Arc<Path>, Vec<WrapperCandidate>>,
    known: &HashMap<Arc<Path>, Vec<WrapperCandidate>>,
    views: &HashMap<Arc<Path>, CrateView>,
    graph: &CrateGraph,
) {
    let mut more: Vec<(Arc<Path>, WrapperCandidate)> = Vec::new();
    for (root, ws) in found.iter() {
        let Some(view) = views.get(root) else {
            continue;
        };
        for w in ws {
            let Some((owner, method)) = &w.method else {
                continue;
            };
            // A call through a bound on a subtrait (`T: SchedulerInterface` where
            // `trait SchedulerInterface: QueueInterface`) reaches the same method.
            let traits = view.traits_defining(owner, method);
            let reached: Vec<(String, String)> = traits
                .iter()
                .flat_map(|tr| {
                    std::iter::once((tr.clone(), tr.clone()))
                        .chain(view.subtraits(tr).into_iter().map(|s| (tr.clone(), s)))
                })
                .collect();
            for (tr, through) in reached {
                // A call through the trait reaches every implementation: it is a lock call when
                // the method says so (`lock`, `acquire_lease`), or when every implementation
                // here is the same kind of wrapper (not one `evaluate` of six that locks).
                if !crate::sites::fn_says_lock(method) {
                    let settle = |o: &str| {
                        view.normalize(&crate::model::Ty::simple(o.to_string()))
                            .path
                    };
                    let wraps = |ty: &str| {
                        let ty = settle(ty);
                        found
                            .get(root)
                            .into_iter()
                            .chain(known.get(root))
                            .flatten()
                            .any(|k| {
                                k.kind.is_acquisition() == w.kind.is_acquisition()
                                    && k.method
                                        .as_ref()
                                        .is_some_and(|(o, m)| m == method && settle(o) == ty)
                            })
                    };
                    if !view.implementors(&tr, method).iter().all(|ty| wraps(ty)) {
                        continue;
                    }
                }
                let Some(t) = w.through_trait(&through) else {
                    continue;
                };
                let tr = through;
                // The trait's crate may hold nothing the prefilter wanted yet (generic code
                // naming no lock library): its name in the path is enough to reach it.
                let dep_terms = view.in_dep_terms(&tr).or_else(|| {
                    let (first, rest) = tr.split_once("::")?;
                    graph
                        .deps(root)
                        .iter()
                        .any(|(n, _)| n == first)
                        .then(|| (first.to_string(), format!("crate::{rest}")))
                });
                if let Some((dep, inner_trait)) = dep_terms
                    && let Some((_, dep_root)) = graph.deps(root).iter().find(|(n, _)| *n == dep)
                {
                    let prefix = format!("{dep}::");
                    let mut inner = t.map_paths(|p| match p.strip_prefix(&prefix) {
                        Some(rest) => format!("crate::{rest}"),
                        None => p.to_string(),
                    });
                    // Reported where it is: the implementing crate's own name.
                    if !inner.qualified
                        && let Some(own) = graph.own_name(root)
                    {
                        inner.via = format!("{own}::{}", inner.via);
                        inner.qualified = true;
                    }
                    debug_assert!(inner.canonical.starts_with(&inner_trait));
                    more.push((dep_root.clone(), inner));
                }
                more.push((root.clone(), t));
            }
        }
    }
    for (root, w) in more {
        let dup = |ws: Option<&Vec<WrapperCandidate>>| {
            ws.is_some_and(|ws| ws.iter().any(|k| k.same_function(&w)))
        };
        if !dup(known.get(&root)) && !dup(found.get(&root)) {
            found.entry(root).or_default().push(w);
        }
    }
}

/// The wrappers code in `root` can call: its own, and its dependencies' (and theirs, as
/// re-exported through them), each under the name that code uses.
fn visible_wrappers(
    root: &Path,
    wrappers: &HashMap<Arc<Path>, Vec<WrapperCandidate>>,
    graph: &CrateGraph,
) -> Vec<WrapperCandidate> {
    let mut out: Vec<WrapperCandidate> = wrappers.get(root).cloned().unwrap_or_default();
    let mut seen: HashSet<(&str, &Path)> = HashSet::new();
    for (name, dep) in graph.deps(root) {
        // A dependency's dependency is named by the name the dependency gives it.
        let reached = graph.deps(dep).iter().map(|(n, d)| (n, d));
        for (shown, dep2) in std::iter::once((name, dep)).chain(reached) {
            if **dep2 == *root || !seen.insert((shown.as_str(), &**dep2)) {
                continue;
            }
            out.extend(
                wrappers
                    .get(dep2)
                    .into_iter()
                    .flatten()
                    .map(|w| w.seen_as(shown)),
            );
        }
    }
    out
}

/// A method wrapper's owner as this crate's receiver types come out of normalisation: a trait
/// reached before its crate's re-exports were indexed (`conn::Connector`) is the same trait as
/// `conn::connector::Connector` once they are.
fn settle_owners(wrappers: &mut [WrapperCandidate], view: &CrateView) {
    for w in wrappers {
        if let Some((owner, _)) = &mut w.method {
            *owner = view
                .normalize(&crate::model::Ty::simple(owner.clone()))
                .path;
        }
    }
}

/// The parse-and-index stage, as the wrapper rounds call it again.
struct Phase<'a> {
    jobs: &'a [Job],
    members_of: &'a HashMap<&'a Path, &'a [usize]>,
    graph: &'a CrateGraph,
    pool: &'a rayon::ThreadPool,
    settings: &'a CheckSettings,
}

impl Phase<'_> {
    /// Parses and indexes every wanted file, widening (with the prefilter) to the files that
    /// declare what those use, until nothing new is wanted. Returns the files indexed.
    fn parse_wanted(
        &self,
        state: &mut [FileState],
        indexes: &mut [Option<FileIndex>],
        errors: &mut Vec<FileError>,
    ) -> Vec<usize> {
        let mut all = Vec::new();
        loop {
            let mut wanted: Vec<(usize, String)> = state
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
                return all;
            }
            largest_first(&mut wanted, |(_, t)| t.len());
            let mut parsed: Vec<(usize, Parsed)> = self.pool.install(|| {
                wanted
                    .into_par_iter()
                    .with_max_len(1)
                    .map(|(i, text)| (i, index_one(&self.jobs[i], text, self.settings.prefilter)))
                    .collect()
            });
            parsed.sort_unstable_by_key(|(i, _)| *i);
            let mut touched: Vec<Arc<Path>> = Vec::new();
            for (i, r) in parsed {
                match r {
                    Ok((ix, fi)) => {
                        indexes[i] = Some(fi);
                        touched.push(self.jobs[i].crate_root.clone());
                        state[i] = FileState::Indexed(Box::new(ix));
                        all.push(i);
                    }
                    Err(e) => errors.push(e),
                }
            }
            if !self.settings.prefilter {
                continue;
            }
            // What one crate's files use may be declared in a crate that depends on it only
            // through names its dependents see: widen over the touched crates' dependents too.
            let mut widened = touched.clone();
            for r in &touched {
                widened.extend(self.graph.dependents(r).iter().cloned());
            }
            widen(self, state, indexes, &widened, errors);
        }
    }

    /// Skipped files of the given crates that name one of `words` are parsed and indexed (with
    /// what they use). Returns them.
    fn bring_in(
        &self,
        words: &HashMap<&Arc<Path>, prefilter::Words>,
        state: &mut [FileState],
        indexes: &mut [Option<FileIndex>],
        errors: &mut Vec<FileError>,
    ) -> Vec<usize> {
        let candidates: Vec<usize> = words
            .keys()
            .flat_map(|root| self.members_of.get(&***root).copied().unwrap_or_default())
            .copied()
            .filter(|&i| matches!(state[i], FileState::Skipped))
            .collect();
        if candidates.is_empty() {
            return Vec::new();
        }
        let reread: Vec<(usize, Result<Option<String>, FileError>)> = self.pool.install(|| {
            candidates
                .into_par_iter()
                .map(|i| {
                    let w = &words[&self.jobs[i].crate_root];
                    (
                        i,
                        with_text(&self.jobs[i], |t| w.any_in(t).then(|| t.to_string())),
                    )
                })
                .collect()
        });
        mark_wanted(reread, state, errors);
        self.parse_wanted(state, indexes, errors)
    }

    /// Each crate's view of the program: its index and its dependencies'. With `changed`, only
    /// the indexes of those crates are rebuilt (and the views that see them); the rest are kept.
    fn views(
        &self,
        indexes: &[Option<FileIndex>],
        changed: Option<&HashSet<Arc<Path>>>,
        old: HashMap<Arc<Path>, CrateView>,
    ) -> HashMap<Arc<Path>, CrateView> {
        let mut by_crate: HashMap<Arc<Path>, Vec<FileIndex>> = HashMap::new();
        for (i, fi) in indexes.iter().enumerate() {
            let root = &self.jobs[i].crate_root;
            if let Some(fi) = fi
                && changed.is_none_or(|c| c.contains(root))
            {
                by_crate.entry(root.clone()).or_default().push(fi.clone());
            }
        }
        let mut tables: HashMap<Arc<Path>, Arc<CrateIndex>> = old
            .iter()
            .map(|(root, v)| (root.clone(), v.own()))
            .collect();
        for (root, files) in by_crate {
            tables.insert(
                root.clone(),
                Arc::new(CrateIndex::new(root.to_path_buf(), files)),
            );
        }
        let mut built: HashMap<Arc<Path>, Arc<CrateView>> = HashMap::new();
        let mut roots: Vec<&Arc<Path>> = tables.keys().collect();
        roots.sort();
        for root in roots {
            self.view_of(root, &tables, &mut built, &mut Vec::new());
        }
        built
            .into_iter()
            .map(|(root, v)| (root, Arc::unwrap_or_clone(v)))
            .collect()
    }

    /// A crate's view, its dependencies' first (memoised). A dependency already on the way down
    /// (a dev-dependency cycle) is seen without its own dependencies.
    fn view_of(
        &self,
        root: &Arc<Path>,
        tables: &HashMap<Arc<Path>, Arc<CrateIndex>>,
        built: &mut HashMap<Arc<Path>, Arc<CrateView>>,
        stack: &mut Vec<Arc<Path>>,
    ) -> Option<Arc<CrateView>> {
        if let Some(v) = built.get(root) {
            return Some(v.clone());
        }
        let own = tables.get(root)?.clone();
        // A lock library's own examples and tests are matched against its pack, as users are.
        let packs = &self.jobs[self.members_of.get(&**root)?.first().copied()?]
            .config
            .packs;
        let own_name = self
            .graph
            .own_name(root)
            .filter(|n| !packs.names_library(n))
            .map(str::to_string);
        if stack.contains(root) {
            return Some(Arc::new(CrateView::new(
                own,
                own_name,
                Vec::new(),
                self.graph.features(root),
            )));
        }
        stack.push(root.clone());
        let deps = self
            .graph
            .deps(root)
            .iter()
            .filter_map(|(name, d)| Some((name.clone(), self.view_of(d, tables, built, stack)?)))
            .collect();
        stack.pop();
        let view = Arc::new(CrateView::new(
            own,
            own_name,
            deps,
            self.graph.features(root),
        ));
        built.insert(root.clone(), view.clone());
        Some(view)
    }
}

/// Configurations are shared; their address identifies them for the per-crate pack cache.
/// A file's content hash, folded with the texts of the SQL files its `query_file!` calls name
/// (relative to the crate root): the analysis reads them, so a change to one is a change.
fn hash_with_sql_files(bytes: &[u8], crate_root: &Path) -> u64 {
    let own = cache::content_hash(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else {
        return own;
    };
    let mut key = cache::Key::new();
    key.part(&own.to_le_bytes());
    let mut any = false;
    for rel in query_file_paths(text) {
        any = true;
        let sql = crate::model::lua::read_in_crate(crate_root, rel);
        key.part(rel.as_bytes())
            .part(sql.as_deref().unwrap_or_default().as_bytes());
    }
    if any {
        cache::content_hash(key.finish().as_bytes())
    } else {
        own
    }
}

/// The first string literal inside each `query_file…!(…)` of a text, read lexically.
fn query_file_paths(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("query_file").filter_map(|(at, _)| {
        let rest = &text[at..];
        let open = rest.find('(')?;
        // Only a macro call: `query_file!(`, `query_file_as!(Row, `…
        if !rest[..open].trim_end().ends_with('!') {
            return None;
        }
        let args = &rest[open + 1..];
        let close = args.find(')').unwrap_or(args.len());
        let start = args[..close].find('"')? + 1;
        let len = args[start..].find('"')?;
        Some(&args[start..start + len])
    })
}

/// Which pack set a file is analysed with: its config's, for its crate, and whether the file is
/// inside a library the packs describe.
type PackKey = (usize, Arc<Path>, bool);

/// Is the file part of its crate's library target (under `src/`, not a binary)?
fn in_library_target(job: &Job) -> bool {
    let Ok(rel) = job.file.abs.strip_prefix(&*job.crate_root) else {
        return false;
    };
    rel.starts_with("src") && !rel.starts_with("src/bin") && rel != Path::new("src/main.rs")
}

fn config_id(c: &Arc<Config>) -> usize {
    Arc::as_ptr(c) as usize
}

/// The types whose `Drop` releases, among these wrappers (`impl Drop for Guard { fn drop(&mut
/// self) { release } }`, by the type's path).
fn drop_released(wrappers: &[WrapperCandidate]) -> HashSet<&str> {
    wrappers
        .iter()
        .filter(|w| w.kind == CallKind::Release)
        .filter_map(|w| w.method.as_ref())
        .filter(|(_, m)| m == "drop")
        .map(|(t, _)| t.as_str())
        .collect()
}

/// The config's packs plus the crate's wrappers, each added to the pack of the library it wraps.
fn with_wrappers(
    base: &PackSet,
    wrappers: &[WrapperCandidate],
    view: Option<&CrateView>,
) -> Result<PackSet, ToolError> {
    let mut packs = base.packs.clone();
    // Lock types whose `Drop` releases (`impl Drop for Guard { fn drop(&mut self) { release } }`):
    // a wrapper handing one out hands out a guard, as does one answering `impl Drop`, or a
    // struct holding such a guard in a field (`WalletHandle { lock_guard: WalletLockGuard, .. }`).
    let drop_releases = drop_released(wrappers);
    let releases_on_drop = |t: &str| {
        drop_releases.contains(t)
            || t == "Drop"
            || view.is_some_and(|v| {
                v.field_types(&crate::model::Ty::simple(t))
                    .iter()
                    .any(|f| drop_releases.contains(f.peeled().path.as_str()))
            })
    };
    for w in wrappers {
        if let Some(p) = packs.iter_mut().find(|p| p.pack.name == w.library) {
            // A helper that runs its caller's SQL is one more SQL call of its pack.
            if w.sql_arg.is_some() {
                let name = w.canonical.rsplit("::").next().unwrap_or(&w.canonical);
                p.pack.sql_calls.push(name.to_string());
            } else if let Some((api, arg, kind)) = &w.forwards {
                // Each variant of the primitive (`when-fields`), now read in the helper's argument.
                let variants: Vec<CallDef> = p
                    .calls
                    .iter()
                    .filter(|d| {
                        (d.fields_arg.is_some()
                            || !d.when_calls.is_empty()
                            || d.when_lock_key && d.kind == *kind)
                            && d.via.is_none()
                            && (d.method.as_ref() == Some(api) || d.function.as_ref() == Some(api))
                    })
                    .map(|d| CallDef::forwarding(d, w, *arg))
                    .collect();
                p.calls.extend(variants);
            } else if let Some((text, key)) = w.script_arg {
                // A helper that runs its caller's Lua: each call is judged by the script passed.
                let mut def = CallDef::wrapper(w);
                def.script = Some(crate::packs::ScriptArg::Text);
                def.script_arg = text;
                def.key_arg = key;
                p.calls.push(def);
            } else {
                let mut def = CallDef::wrapper(w);
                if def.release.is_none()
                    && w.kind.is_acquisition()
                    && w.returns_type.as_deref().is_some_and(releases_on_drop)
                {
                    def.release = Some(ReleaseStyle::Guard);
                }
                p.calls.push(def);
            }
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

/// Everything a crate's results depend on; per member, its content hash or why it is unreadable.
fn crate_key<'a>(
    root: &Path,
    members: &[usize],
    jobs: &[Job],
    contents: impl Iterator<Item = Result<u64, &'a FileError>>,
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
    // The manifests decide the crate graph, the names crates see each other by and which crate
    // is a library the packs describe: a rename or a new path dependency changes the results.
    let mut crates: Vec<&Path> = members.iter().map(|&i| &*jobs[i].crate_root).collect();
    crates.sort_unstable();
    crates.dedup();
    for c in crates {
        let manifest = crate::read::bytes(&c.join("Cargo.toml"), crate::read::Kind::Manifest);
        key.part(c.to_string_lossy().as_bytes())
            .part(manifest.as_deref().unwrap_or_default());
    }
    for (&i, content) in members.iter().zip(contents) {
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
        match content {
            Ok(hash) => key.part(&hash.to_le_bytes()),
            Err(e) => key.part(e.message.as_bytes()),
        };
    }
    format!("{}-{}", cache::crate_tag(root), key.finish())
}

/// The prefilter's closure: skipped files of the crates just indexed that name one of their
/// lock-carrying items, or define a constant they read, become wanted.
fn widen(
    phase: &Phase<'_>,
    state: &mut [FileState],
    indexes: &[Option<FileIndex>],
    touched: &[Arc<Path>],
    errors: &mut Vec<FileError>,
) {
    let (jobs, members_of, graph, pool) = (phase.jobs, phase.members_of, phase.graph, phase.pool);
    type Terms = (prefilter::Words, prefilter::Words, prefilter::ClockHelpers);
    let mut terms: HashMap<&Path, Terms> = HashMap::new();
    let mut candidates: Vec<usize> = Vec::new();
    let mut seen: HashSet<&Path> = HashSet::new();
    for root in touched {
        let root: &Path = root;
        if !seen.insert(root) {
            continue;
        }
        let Some(&members) = members_of.get(root) else {
            continue;
        };
        let skipped = members
            .iter()
            .filter(|&&i| matches!(state[i], FileState::Skipped));
        // Terms are built only for crates with files left to bring in.
        if skipped.clone().next().is_none() {
            continue;
        }
        candidates.extend(skipped);
        // The crate's own items and those of the crates it depends on: both are names its
        // code may use for something that leads to a lock.
        let visible: Vec<usize> = graph
            .deps(root)
            .iter()
            .flat_map(|(_, d)| members_of.get(&**d).copied().unwrap_or_default())
            .chain(members.iter())
            .copied()
            .collect();
        let files = visible.iter().filter_map(|&i| indexes[i].as_ref());
        let names = prefilter::interesting_names(files, &jobs[members[0]].config.packs);
        let mut consts = HashSet::new();
        for &i in members {
            if let FileState::Indexed(ix) = &state[i] {
                consts.extend(ix.constants.iter().cloned());
            }
        }
        terms.insert(
            root,
            (
                prefilter::Words::for_few_texts(names),
                prefilter::constant_definitions(&consts),
                prefilter::ClockHelpers::new(&consts),
            ),
        );
    }
    // Read and scanned on the workers; only the texts that match are kept.
    let routes = prefilter::Routes::new();
    let reread: Vec<(usize, Result<Option<String>, FileError>)> = pool.install(|| {
        candidates
            .into_par_iter()
            .map(|i| {
                let (names, consts, clocks) = &terms[&*jobs[i].crate_root];
                let wanted = with_text(&jobs[i], |t| {
                    (names.any_in(t)
                        || consts.any_in(t)
                        || clocks.defined_in(t)
                        || routes.in_file(&jobs[i].file.abs, t))
                    .then(|| t.to_string())
                });
                (i, wanted)
            })
            .collect()
    });
    mark_wanted(reread, state, errors);
}

/// Files read again for a closure: those whose text came back are to be parsed.
fn mark_wanted(
    reread: Vec<(usize, Result<Option<String>, FileError>)>,
    state: &mut [FileState],
    errors: &mut Vec<FileError>,
) {
    for (i, r) in reread {
        match r {
            Ok(Some(text)) => state[i] = FileState::Wanted(text),
            Ok(None) => {}
            Err(e) => {
                errors.push(e);
                state[i] = FileState::Failed;
            }
        }
    }
}

fn read_text(job: &Job) -> Result<String, FileError> {
    with_text(job, str::to_string)
}

thread_local! {
    /// Each worker reads into one reused buffer: most files are only hashed and scanned, and
    /// need no allocation of their own.
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads a file into this thread's buffer and hands its bytes to `f`.
fn with_bytes<R>(job: &Job, f: impl FnOnce(&[u8]) -> R) -> Result<R, FileError> {
    BUFFER.with_borrow_mut(|buf| {
        // Regular files only, up to the source limit (see `read`).
        let result = match crate::read::into(&job.file.abs, crate::read::Kind::Source, buf) {
            Ok(()) => Ok(f(buf)),
            Err(crate::read::ReadError::Io(e)) => {
                Err(read_error(job, None, format!("cannot read: {e}")))
            }
            Err(e) => Err(read_error(job, None, e.to_string())),
        };
        // One huge file should not hold its memory for the rest of the run.
        if buf.capacity() > BUFFER_KEEP {
            *buf = Vec::new();
        }
        result
    })
}

/// Reads a file into this thread's buffer and hands its text to `f`.
fn with_text<R>(job: &Job, f: impl FnOnce(&str) -> R) -> Result<R, FileError> {
    with_bytes(job, |b| text_of(job, b).map(f))?
}

/// A file's bytes as text, or where they stop being UTF-8.
fn text_of<'b>(job: &Job, bytes: &'b [u8]) -> Result<&'b str, FileError> {
    std::str::from_utf8(bytes).map_err(|e| utf8_error(job, bytes, e))
}

fn utf8_error(job: &Job, bytes: &[u8], e: std::str::Utf8Error) -> FileError {
    let prefix = String::from_utf8_lossy(&bytes[..e.valid_up_to()]);
    let (line, column) = line_col(&prefix, prefix.len());
    read_error(
        job,
        Some(line),
        format!("not valid UTF-8: invalid byte at line {line}, column {column}"),
    )
}

/// One file as the read stage leaves it.
struct FileRead {
    /// Of its bytes, when they could be read (and a cache wants it).
    hash: Option<u64>,
    /// The text when the prefilter wants it; the reason when it cannot be had.
    text: Result<Option<String>, FileError>,
}

impl FileRead {
    /// The file's part of the crate's cache key.
    fn key_part(&self) -> Result<u64, &FileError> {
        match (self.hash, &self.text) {
            (Some(hash), _) => Ok(hash),
            (None, Err(e)) => Err(e),
            // Not hashed: read without a cache, where no key is made.
            (None, Ok(_)) => Ok(0),
        }
    }
}

/// One crate's files, as the read stage sees them.
struct CrateFiles<'a> {
    root: &'a Path,
    members: &'a [usize],
    jobs: &'a [Job],
}

type Wants<'w> = dyn Fn(&Job, &str) -> bool + Sync + 'w;

impl CrateFiles<'_> {
    /// Reads every member once, keeping its text when `wants` it.
    fn read(&self, wants: &Wants, hash: bool) -> Vec<FileRead> {
        self.members
            .par_iter()
            .map(|&i| {
                let job = &self.jobs[i];
                let read = with_bytes(job, |b| {
                    let text = text_of(job, b).map(|t| wants(job, t).then(|| t.to_string()));
                    (hash.then(|| hash_with_sql_files(b, &job.crate_root)), text)
                });
                match read {
                    Ok((hash, text)) => FileRead { hash, text },
                    Err(e) => FileRead {
                        hash: None,
                        text: Err(e),
                    },
                }
            })
            .collect()
    }

    /// Reads the crate and asks the cache. A crate the cache has seen before is only hashed
    /// first: unchanged, it is served without a UTF-8 check or a scan of its files; changed, it
    /// is read again. A new crate is read once.
    fn read_cached(&self, cache: &Cache, wants: &Wants, settings: &CheckSettings) -> CrateRead {
        let key_of = |parts: &mut dyn Iterator<Item = Result<u64, &FileError>>| {
            crate_key(self.root, self.members, self.jobs, parts, settings)
        };
        // The key the hash-only pass already asked for, and missed.
        let mut missed = None;
        if cache.has_seen(self.root) {
            let hashes: Vec<Result<u64, FileError>> = self
                .members
                .par_iter()
                .map(|&i| with_bytes(&self.jobs[i], cache::content_hash))
                .collect();
            let key = key_of(&mut hashes.iter().map(|h| h.as_ref().copied()));
            if let Some(entry) = cache.get(&key) {
                return self.hit(entry, true, |_| None);
            }
            missed = Some(key);
        }
        let reads = self.read(wants, true);
        let key = key_of(&mut reads.iter().map(FileRead::key_part));
        // Asked again only when a file changed between the two reads.
        if missed.as_ref() != Some(&key)
            && let Some(entry) = cache.get(&key)
        {
            let mut texts: Vec<Option<String>> =
                reads.into_iter().map(|r| r.text.ok().flatten()).collect();
            return self.hit(entry, false, |k| texts[k].take());
        }
        CrateRead::Miss {
            key: Some(key),
            files: reads.into_iter().map(|r| r.text).collect(),
        }
    }

    /// Served by the cache: cached findings are shown with their source, the text in hand for
    /// the `k`th member or read again.
    fn hit(
        &self,
        entry: cache::Entry,
        hashed_only: bool,
        mut in_hand: impl FnMut(usize) -> Option<String>,
    ) -> CrateRead {
        let shown: HashSet<&str> = entry
            .files
            .iter()
            .filter(|f| !f.findings.is_empty())
            .map(|f| f.display.as_str())
            .collect();
        let sources = self
            .members
            .iter()
            .enumerate()
            .filter_map(|(k, &i)| {
                let display = &self.jobs[i].file.display;
                if !shown.contains(display.as_str()) {
                    return None;
                }
                let text = in_hand(k).or_else(|| read_text(&self.jobs[i]).ok())?;
                Some((display.clone(), Arc::from(text)))
            })
            .collect();
        CrateRead::Hit {
            entry,
            sources,
            hashed_only,
        }
    }
}

/// Files larger than this are parsed in pieces of about this size: a syntax tree takes about
/// 120 times its text, so a whole 50 MB file took 6 GB; a piece at a time, memory follows the
/// largest piece. (`LOCKAUDIT_PIECE_BYTES` sets it, for the tests that hold the two ways equal.)
const PIECE_BYTES: usize = 256 << 10;

fn piece_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("LOCKAUDIT_PIECE_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(PIECE_BYTES)
    })
}

/// Parses a file and hands `f` its syntax with the file's imports: whole, or piece by piece
/// (each piece's tree dropped before the next is parsed; the imports come from every piece
/// first). Should a piece not parse on its own, the whole file is parsed instead, which also
/// gives a syntax error its place in the file.
/// What each piece of a file needs of the others: the file's imports and its items' names.
type PieceCx = (Imports, HashSet<String>);

fn parsed<T>(
    text: &str,
    module: &str,
    known: Option<&PieceCx>,
    mut f: impl FnMut(&syn::File, &Imports, Option<&HashSet<String>>) -> T,
) -> syn::Result<(Vec<T>, Option<PieceCx>)> {
    let pieces = crate::lex::pieces(text, piece_bytes());
    if pieces.len() > 1 {
        // The lines before each piece, counted once.
        let mut bases = Vec::with_capacity(pieces.len());
        let (mut line, mut at) = (0, 0);
        for (r, _) in &pieces {
            line += memchr::memchr_iter(b'\n', &text.as_bytes()[at..r.start]).count();
            at = r.start;
            bases.push(line);
        }
        let parse = |k: usize| {
            let _base = crate::source::LineBase::set(bases[k]);
            syn::parse_file(&text[pieces[k].0.clone()]).ok()
        };
        // First what every piece needs of the others, unless an earlier pass found it.
        let mut cx = known.cloned();
        if cx.is_none() {
            let mut imports = Imports::new(module.to_string());
            let mut names = HashSet::new();
            for k in 0..pieces.len() {
                let Some(ast) = parse(k) else { break };
                imports.add_items(&ast.items);
                names.extend(FileIndex::item_names(&ast.items));
                drop(ast);
                proc_macro2::extra::invalidate_current_thread_spans();
                if k + 1 == pieces.len() {
                    cx = Some((imports, names));
                    break;
                }
            }
        }
        if let Some((imports, names)) = &cx {
            let mut out = Vec::with_capacity(pieces.len());
            for k in 0..pieces.len() {
                let _base = crate::source::LineBase::set(bases[k]);
                let Ok(ast) = syn::parse_file(&text[pieces[k].0.clone()]) else {
                    break;
                };
                out.push(f(&ast, imports, Some(names)));
                drop(ast);
                proc_macro2::extra::invalidate_current_thread_spans();
            }
            if out.len() == pieces.len() {
                return Ok((out, cx));
            }
        }
        proc_macro2::extra::invalidate_current_thread_spans();
    }
    let ast = syn::parse_file(text)?;
    let mut imports = Imports::new(module.to_string());
    imports.add_items(&ast.items);
    Ok((vec![f(&ast, &imports, None)], None))
}

/// The largest read buffer a worker keeps between files.
const BUFFER_KEEP: usize = 8 << 20;

fn index_one(job: &Job, text: String, prefilter: bool) -> Result<(Indexed, FileIndex), FileError> {
    let module = module_path_for(&job.crate_root, &job.file.abs);
    // Checked before parsing: a stack overflow in the parser or a walk aborts the whole run.
    if let Some((offset, why)) = crate::lex::too_deep(&text) {
        let (line, column) = line_col(&text, offset);
        return Err(read_error(
            job,
            Some(line),
            format!("{why}; the limit is passed at line {line}, column {column}"),
        ));
    }
    let mut pieces = None;
    // A piece's `include_str!`s and Lua libraries are read next to the file.
    // A file parsed whole is blanked for the analysis (see `blank`): what the walk reads across
    // its items is found here, on the whole tree.
    let whole = text.len() < piece_bytes();
    // `read_includes` finds only `include_str!`s and Lua texts that register functions: a file
    // that writes neither (nor an escape that could spell one) is spared a walk that parses
    // every macro's arguments.
    let may_include = ["include_str", "register_function", "\\x", "\\u{", "\\\n"]
        .iter()
        .any(|w| text.contains(w));
    let mut across = None;
    let mut field_inits = sites::FieldInits::default();
    let build = |ast: &syn::File, imports: &Imports, names: Option<&HashSet<String>>| {
        let mut index = FileIndex::build_piece(ast, imports, names);
        if may_include {
            index.read_includes(ast, &job.file.abs);
        }
        field_inits.extend(sites::FieldInits::of(ast));
        if whole {
            across = Some(sites::test_code::TestCode::of(
                ast,
                &job.crate_root,
                &job.file.abs,
            ));
        }
        index
    };
    let result = match parsed(&text, &module, None, build) {
        Ok((parts, cx)) => {
            pieces = cx;
            Ok(FileIndex::merge(parts))
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
    // Found here, on the worker, once per file; the closure's rounds only take unions.
    let constants = if prefilter {
        prefilter::constant_like(&text)
    } else {
        HashSet::new()
    };
    let layout = if across.is_some() {
        blank::layout(&text)
    } else {
        Vec::new()
    };
    let source = SourceFile::new(job.file.abs.clone(), job.file.display.clone(), text);
    Ok((
        Indexed {
            source,
            module,
            constants,
            pieces,
            layout,
            field_inits,
            whole: across,
            declared_for_tests: std::sync::OnceLock::new(),
        },
        fi,
    ))
}

/// A function across the workspace: its crate's root and its canonical path there.
fn origin_of(root: &Path, canonical: &str) -> Arc<str> {
    Arc::from(format!("{}\0{canonical}", root.display()))
}

/// The primitives to judge where they are, by file and position: those inside wrappers from
/// which no chain of call sites reaches a reported one (a library's public lock function, or
/// one called only from test code, which is not reported). Judged at callers, such a lock would
/// not be judged anywhere; judged at its primitive, it is judged once, where its library takes
/// it. Wrapper calls above it in such a chain stay judged at their callers (nowhere), so no
/// lock is reported twice; but a wrapper call whose callee is judged through other callers is
/// this chain's lowest unjudged acquisition, and is judged where it is.
fn surface(slots: &[Option<FileOutput>], jobs: &[Job]) -> HashMap<usize, HashSet<(usize, usize)>> {
    // Per wrapper function, the call sites that call it.
    let mut callers: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (i, out) in slots.iter().enumerate() {
        for (k, link) in out.iter().flat_map(|o| o.links.iter().enumerate()) {
            if let Some(via) = &link.1 {
                callers.entry(via).or_default().push((i, k));
            }
        }
    }
    let reported = |i: usize, k: usize| {
        let s = &slots[i].as_ref().expect("linked").sites[k];
        !s.wrapped && (!s.test || jobs[i].config.include_tests)
    };
    // Does a chain of callers from this function reach a reported site? Cycles (recursive
    // wrappers) count as not reaching one.
    fn reaches(
        f: &str,
        callers: &HashMap<&str, Vec<(usize, usize)>>,
        slots: &[Option<FileOutput>],
        jobs: &[Job],
        reported: &dyn Fn(usize, usize) -> bool,
        memo: &mut HashMap<String, bool>,
    ) -> bool {
        if let Some(&known) = memo.get(f) {
            return known;
        }
        memo.insert(f.to_string(), false);
        let mut found = false;
        for &(i, k) in callers.get(f).into_iter().flatten() {
            let caller_fn = origin_of(
                &jobs[i].crate_root,
                &slots[i].as_ref().expect("linked").links[k].0,
            );
            if reported(i, k) || reaches(&caller_fn, callers, slots, jobs, reported, memo) {
                found = true;
                break;
            }
        }
        memo.insert(f.to_string(), found);
        found
    }
    // Functions holding a site: a wrapper that holds none hands its call on whole (its caller's
    // key or object is judged at each call), so the lowest call of such a chain stands for the
    // primitive.
    let holding: HashSet<std::sync::Arc<str>> = slots
        .iter()
        .enumerate()
        .flat_map(|(i, o)| {
            o.iter().flat_map(move |o| {
                // (A set-if-absent of the caller's key stands for nothing until a call says
                // lock: the call is the lowest.)
                o.links
                    .iter()
                    .zip(&o.sites)
                    .filter(|(_, s)| !s.gated)
                    .map(move |(l, _)| origin_of(&jobs[i].crate_root, &l.0))
            })
        })
        .collect();
    let mut memo = HashMap::new();
    let mut out: HashMap<usize, HashSet<(usize, usize)>> = HashMap::new();
    for (i, o) in slots.iter().enumerate() {
        let Some(o) = o else { continue };
        for (s, link) in o.sites.iter().zip(&o.links) {
            let lowest = link.1.as_deref().is_none_or(|via| !holding.contains(via));
            // A call of a wrapper whose lock is judged through its other callers (`main`'s call
            // of `acquire_indexer_lock`) stands for its own acquisition (`on_failure`'s,
            // taking it again): nothing below it surfaces for this chain.
            let below_judged = !lowest
                && link
                    .1
                    .as_deref()
                    .is_some_and(|via| reaches(via, &callers, slots, jobs, &reported, &mut memo));
            // A set-if-absent of the caller's key is a lock only where a call says so.
            if !s.wrapped
                || s.gated
                || !(lowest || below_judged)
                || (s.test && !jobs[i].config.include_tests)
            {
                continue;
            }
            let f = origin_of(&jobs[i].crate_root, &link.0);
            if !reaches(&f, &callers, slots, jobs, &reported, &mut memo) {
                out.entry(i).or_default().insert((s.line, s.column));
            }
        }
    }
    out
}

/// Drops the set-if-absent primitives of the caller's key and value (`Site::key_gate`) that no
/// call takes as a lock: a store's generic `add` that every caller uses as a cache is none.
fn unlisted_gates(slots: &mut [Option<FileOutput>], jobs: &[Job]) {
    let called: HashSet<Arc<str>> = slots
        .iter()
        .flatten()
        .flat_map(|o| o.links.iter().filter_map(|l| l.1.clone()))
        .collect();
    for (i, slot) in slots.iter_mut().enumerate() {
        let Some(o) = slot else { continue };
        if !o.sites.iter().any(|s| s.gated) {
            continue;
        }
        let keep: Vec<bool> = o
            .sites
            .iter()
            .zip(&o.links)
            .map(|(s, l)| !s.gated || called.contains(&origin_of(&jobs[i].crate_root, &l.0)))
            .collect();
        let dropped: HashSet<(usize, usize)> = o
            .sites
            .iter()
            .zip(&keep)
            .filter(|(_, k)| !**k)
            .map(|(s, _)| (s.line, s.column))
            .collect();
        o.findings
            .retain(|f| !dropped.contains(&(f.line, f.column)));
        let mut k = keep.iter();
        o.sites.retain(|_| *k.next().expect("one per site"));
        let mut k = keep.iter();
        o.links.retain(|_| *k.next().expect("one per link"));
    }
}

struct FileOutput {
    /// Per site: the function it is in (canonical) and, for a wrapper call, which wrapper.
    links: Vec<(String, Option<Arc<str>>)>,
    wrappers: Vec<WrapperCandidate>,
    display: String,
    /// The source, kept only when there are findings to show with it.
    text: Option<Arc<str>>,
    sites: Vec<SiteRecord>,
    findings: Vec<Finding>,
    suppressed: usize,
    /// Why the file could not be analysed after all.
    error: Option<FileError>,
}

fn analyze_one(
    ix: &Indexed,
    job: &Job,
    index: &CrateView,
    packs: &PackSet,
    keep: &blank::Keep,
    in_place: &HashSet<(usize, usize)>,
    settings: &CheckSettings,
) -> FileOutput {
    let src = &ix.source;
    let config = &job.config;
    let directives = Directives::scan(src, &|r| lints::by_id(r).is_some());
    let long_call = |name: &str| config.rules.long_calls.is_match(name);
    // Items that cannot matter are parsed as whitespace, with what the walk reads across the
    // file found in the index pass (see `blank`); should that text not parse, the whole does.
    let whole = ix.whole.as_ref();
    let blanked = whole.and_then(|_| blank::blank(&src.text, &ix.layout, |b| keep.any_in(b)));
    let analyse = |text: &str| {
        parsed(
            text,
            &ix.module,
            ix.pieces.as_ref(),
            |ast, imports, names| {
                let cx = FileCx {
                    source: src,
                    imports,
                    index,
                    packs,
                    long_call: &long_call,
                    in_place,
                };
                let tests = match (whole, names) {
                    (Some(tests), None) => tests.clone(),
                    _ => sites::test_code::TestCode::of(ast, &job.crate_root, &job.file.abs),
                };
                (
                    sites::analyze_file_with(ast, &cx, ix.field_inits.clone()),
                    tests,
                )
            },
        )
    };
    let analysed = match blanked.as_deref().map(analyse) {
        Some(Ok(done)) => Ok(done),
        _ => {
            proc_macro2::extra::invalidate_current_thread_spans();
            analyse(&src.text)
        }
    };
    let (classified, events, clocks, wrappers, tests) = match analysed {
        Ok((parts, _)) => {
            let (parts, tests): (Vec<_>, Vec<_>) = parts.into_iter().unzip();
            let mut tests = sites::test_code::TestCode::merge(tests);
            let facts = sites::FileFacts::merge(parts);
            // Asked only of files that hold something to report: it reads the declaring files.
            let holds_any = !facts.sites.is_empty() || !facts.events.is_empty();
            if !tests.whole_file
                && holds_any
                && *ix.declared_for_tests.get_or_init(|| {
                    sites::test_code::declared_for_tests(&job.crate_root, &job.file.abs)
                })
            {
                tests.whole_file = true;
            }
            if facts.too_deep {
                proc_macro2::extra::invalidate_current_thread_spans();
                return FileOutput {
                    links: Vec::new(),
                    wrappers: Vec::new(),
                    display: src.display.clone(),
                    text: None,
                    sites: Vec::new(),
                    findings: Vec::new(),
                    suppressed: 0,
                    error: Some(FileError {
                        path: src.display.clone(),
                        line: None,
                        message: "nesting too deep to analyse (its syntax tree nests deeper than the analysis may recurse)".into(),
                    }),
                };
            }
            let classified: Vec<Classified> = facts
                .sites
                .into_iter()
                .map(|s| classify(s, src, &directives, config))
                .collect();
            (
                classified,
                facts.events,
                facts.clocks,
                facts.wrappers,
                tests,
            )
        }
        // Parsed in phase 1; cannot fail here.
        Err(_) => Default::default(),
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
    // Findings in test code are dropped after suppressions were matched, so that an `allow` for
    // one is not reported as unused.
    if !config.include_tests {
        findings.retain(|f| !tests.contains(f.line));
        suppressed = findings.iter().filter(|f| f.suppressed).count();
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
            backend: c.site.backend.clone(),
            renewal: if c.site.region.keeper {
                Renewal::Keeper
            } else if c.site.region.renewed {
                Renewal::Renewed
            } else {
                Renewal::None
            },
            wrapped: c.site.wrapped,
            test: tests.contains(c.site.span.line),
            gated: c.site.key_gate.is_some() && c.site.wrapped,
        })
        .collect();
    let links = classified
        .iter()
        .map(|c| (c.site.in_fn.clone(), c.site.via_origin.clone()))
        .collect();
    FileOutput {
        links,
        display: src.display.clone(),
        text: (!findings.is_empty()).then(|| Arc::from(src.text.as_str())),
        sites,
        findings,
        suppressed,
        wrappers,
        error: None,
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
            // Its index, from its address in `all` (a search made findings × directives).
            let at = (d as *const _ as usize).wrapping_sub(directives.all.as_ptr() as usize)
                / std::mem::size_of::<crate::directives::Directive>().max(1);
            if let Some(u) = used.get_mut(at) {
                *u = true;
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
    let mut fix = v.fix;
    if let Some(f) = &mut fix {
        f.edits.iter_mut().for_each(|e| e.locate(src));
        f.edits.sort_by_key(|e| (e.start, e.end));
    }
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
        fix,
        fingerprint: String::new(),
        line_text: crate::report::normalize_line(line_prefix(src.line(line))),
        context: v.context,
        suppressed: false,
        suppression_reason: None,
        utf16: (
            utf16_column(src, line, column),
            utf16_column(src, end_line, end_column),
        ),
    }
}

/// How much of a finding's line it keeps (for its fingerprint). Each finding keeps a copy: on a
/// generated file of one huge line, whole copies made memory the square of the line.
const LINE_TEXT_MAX: usize = 4096;

fn line_prefix(line: &str) -> &str {
    if line.len() <= LINE_TEXT_MAX {
        return line;
    }
    let mut end = LINE_TEXT_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// The UTF-16 column; on an ASCII line it is the column, without counting up to it.
fn utf16_column(src: &SourceFile, line: usize, column: usize) -> usize {
    let text = src.line(line);
    if text.is_ascii() {
        column.max(1).min(text.len() + 1)
    } else {
        src.utf16_column(line, column)
    }
}
