//! The workspace's results, per file, and re-analysis of what an edit can affect.
//!
//! The first run analyses the whole workspace, as `lockaudit check` from its root does (same
//! configuration discovery, same cache directory). After an edit only the edited file's
//! *component* runs again: its crate and the crates joined to it by path dependencies, the unit
//! the engine reads and caches together, whose results nothing outside it can change. Every other
//! file keeps its results in memory; crates nested under the component's folders come from the
//! cache.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diag::{FileError, ToolError};
use crate::engine;
use crate::model::CrateGraph;
use crate::report::{Finding, SiteRecord};
use crate::settings::CheckSettings;

/// One file's results.
#[derive(Debug, Default, Clone)]
pub struct FileResults {
    pub findings: Vec<Finding>,
    pub sites: Vec<SiteRecord>,
    pub errors: Vec<FileError>,
}

pub struct Workspace {
    pub root: PathBuf,
    settings: CheckSettings,
    files: BTreeMap<PathBuf, FileResults>,
    /// Each crate root's component (the crate roots analysed together).
    components: HashMap<Arc<Path>, Arc<Vec<Arc<Path>>>>,
    /// What stopped the last run (a bad configuration), shown until a run succeeds.
    pub tool_error: Option<ToolError>,
    /// Nothing is analysed (the root is `/`).
    pub disabled: bool,
    /// The paths the last run analysed (taken by the server's log).
    pub last_run: Option<Vec<PathBuf>>,
}

impl Workspace {
    /// `root` must be absolute with symbolic links resolved; the process works from it, so that
    /// configuration and cache are found as `lockaudit check` run there finds them.
    pub fn new(root: PathBuf) -> Workspace {
        let settings = CheckSettings {
            paths: vec![root.clone()],
            fail_on: None,
            cache_dir: Some(root.join(".lockaudit_cache")),
            ..CheckSettings::default()
        };
        Workspace {
            root,
            settings,
            files: BTreeMap::new(),
            components: HashMap::new(),
            tool_error: None,
            disabled: false,
            last_run: None,
        }
    }

    pub fn cache_dir(&self) -> Option<&Path> {
        self.settings.cache_dir.as_deref()
    }

    pub fn file(&self, path: &Path) -> Option<&FileResults> {
        self.files.get(path)
    }

    /// Files with results, in order.
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.files.keys()
    }

    /// Analyses everything again (and learns the crate graph anew). Returns the files whose
    /// results may have changed.
    pub fn analyse_all(&mut self) -> BTreeSet<PathBuf> {
        if self.disabled {
            return BTreeSet::new();
        }
        self.components = components(&self.root, self.settings.threads);
        self.run(vec![self.root.clone()], self.settings.cache_dir.clone())
    }

    /// Analyses what edits to `files` can affect: their components. A file in a crate the graph
    /// has not seen (a new crate) makes the run whole. `unsaved`: some buffer differs from its
    /// file; then the disk cache is left alone, as an entry per keystroke would only evict the
    /// entries of the saved tree (which `check` and the next start want). Results are the same
    /// either way.
    pub fn analyse_for(&mut self, files: &BTreeSet<PathBuf>, unsaved: bool) -> BTreeSet<PathBuf> {
        if self.disabled {
            return BTreeSet::new();
        }
        let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
        // A file of another folder is not part of this workspace: nothing here depends on it.
        for f in files.iter().filter(|f| f.starts_with(&self.root)) {
            if is_manifest_or_config(f) {
                return self.analyse_all();
            }
            let root = crate_root(f);
            match self.components.get(&*root) {
                Some(c) => paths.extend(c.iter().map(|r| r.to_path_buf())),
                None => return self.analyse_all(),
            }
        }
        if paths.is_empty() {
            return BTreeSet::new();
        }
        // A folder inside another one given is walked with it.
        let all: Vec<PathBuf> = paths.iter().cloned().collect();
        let paths: Vec<PathBuf> = all
            .iter()
            .filter(|p| !all.iter().any(|q| q != *p && p.starts_with(q)))
            .cloned()
            .collect();
        let cache = if unsaved {
            None
        } else {
            self.settings.cache_dir.clone()
        };
        self.run(paths, cache)
    }

    fn run(&mut self, paths: Vec<PathBuf>, cache_dir: Option<PathBuf>) -> BTreeSet<PathBuf> {
        self.last_run = Some(paths.clone());
        let mut changed: BTreeSet<PathBuf> = BTreeSet::new();
        // A configuration error is shown on the configuration file, and stays until it is fixed.
        if let Some(ToolError::Config { path, .. } | ToolError::Pack { path, .. }) =
            self.tool_error.take()
        {
            changed.insert(path);
        }
        let settings = CheckSettings {
            paths: paths.clone(),
            cache_dir,
            ..self.settings.clone()
        };
        // A bug in the analysis must not take the editor's session down with it: the panic is
        // reported (its message went to standard error, the editor's log) and results are kept.
        let run =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine::check(&settings)));
        let run = run.unwrap_or_else(|_| {
            Err(ToolError::Usage(
                "internal error: the analysis panicked (see the server's log); results are from the last run that finished".into(),
            ))
        });
        let outcome = match run {
            Ok(o) => o,
            Err(e) => {
                if let ToolError::Config { path, .. } | ToolError::Pack { path, .. } = &e {
                    changed.insert(crate::discover::normalize(&self.root.join(path)));
                }
                self.tool_error = Some(e);
                return changed;
            }
        };
        // Everything under the paths was analysed again: what is not in the new results has none.
        let stale: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|f| paths.iter().any(|p| f.starts_with(p)))
            .cloned()
            .collect();
        for f in stale {
            self.files.remove(&f);
            changed.insert(f);
        }
        let report = outcome.report;
        let abs = |display: &str| self.root.join(display);
        let mut fresh: BTreeMap<PathBuf, FileResults> = BTreeMap::new();
        for f in report.findings {
            fresh.entry(abs(&f.path)).or_default().findings.push(f);
        }
        for s in report.sites {
            fresh.entry(abs(&s.path)).or_default().sites.push(s);
        }
        for e in report.errors {
            fresh.entry(abs(&e.path)).or_default().errors.push(e);
        }
        for (path, r) in fresh {
            changed.insert(path.clone());
            // A file outside the paths (a configuration's problem) is merged, not replaced.
            match self.files.get_mut(&path) {
                Some(old) if !paths.iter().any(|p| path.starts_with(p)) => {
                    old.errors.extend(r.errors);
                    old.errors.sort();
                    old.errors.dedup();
                }
                _ => {
                    self.files.insert(path, r);
                }
            }
        }
        changed
    }
}

fn is_manifest_or_config(f: &Path) -> bool {
    f.file_name()
        .is_some_and(|n| n == "Cargo.toml" || n == "lockaudit.toml")
}

/// The crate a file belongs to, as the engine decides it: the nearest folder with a `Cargo.toml`
/// at or above the file's (the file's own folder when there is none).
pub fn crate_root(file: &Path) -> Arc<Path> {
    let dir = file.parent().unwrap_or(file);
    dir.ancestors()
        .find(|d| d.join("Cargo.toml").is_file())
        .map_or_else(|| Arc::from(dir), Arc::from)
}

/// Every crate root of the workspace with its component.
fn components(root: &Path, threads: usize) -> HashMap<Arc<Path>, Arc<Vec<Arc<Path>>>> {
    let Ok(found) = crate::discover::discover(&[root.to_path_buf()], root, threads) else {
        return HashMap::new();
    };
    let mut roots: Vec<Arc<Path>> = Vec::new();
    let mut seen: HashMap<PathBuf, Arc<Path>> = HashMap::new();
    for f in &found.files {
        let dir = f.abs.parent().unwrap_or(&f.abs).to_path_buf();
        let r = seen
            .entry(dir)
            .or_insert_with(|| crate_root(&f.abs))
            .clone();
        roots.push(r);
    }
    roots.sort();
    roots.dedup();
    let graph = CrateGraph::build(&roots);
    let mut out = HashMap::new();
    for part in graph.components(&roots) {
        let part = Arc::new(part);
        for r in part.iter() {
            out.insert(r.clone(), part.clone());
        }
    }
    out
}
