//! Name resolution: `use` trees, `extern crate`, `crate::`/`self::`/`super::`, and the module path
//! of a file from its place in the crate.

use std::collections::HashMap;
use std::path::Path;

use super::ty::Ty;

/// The names a module brings into scope.
#[derive(Debug, Clone, Default)]
pub struct Imports {
    /// The module this scope belongs to, as `crate::a::b` (just `crate` at the root).
    pub module: String,
    /// Local name -> canonical path.
    names: HashMap<String, String>,
    /// Canonical prefixes of `use prefix::*`.
    globs: Vec<String>,
    /// Those of them that are `pub use prefix::*`: what the module re-exports.
    pub_globs: Vec<String>,
    /// Child modules declared in this module (`mod x;` / `mod x { … }`), for 2018-style relative paths.
    child_modules: Vec<String>,
    /// Earlier meanings of a name a later `use` replaced: feature-gated alternatives
    /// (`#[cfg(feature = "a")] pub use a::Conn; #[cfg(feature = "b")] pub use b::Conn;`), of
    /// which the crate index keeps the one whose target exists.
    alternatives: Vec<(String, String)>,
}

impl Imports {
    pub fn new(module: String) -> Imports {
        Imports {
            module,
            ..Default::default()
        }
    }

    /// A nested scope (an inline `mod`, or a function body with its own `use` items).
    pub fn child_module(&self, name: &str) -> Imports {
        Imports::new(format!("{}::{name}", self.module))
    }

    pub fn add_child_module(&mut self, name: &str) {
        self.child_modules.push(name.to_string());
    }

    /// Records the `use` items and `mod` declarations of a list of items.
    pub fn add_items(&mut self, items: &[syn::Item]) {
        for item in items {
            if let syn::Item::Mod(m) = item {
                self.add_child_module(&m.ident.to_string());
            }
        }
        for item in items {
            match item {
                syn::Item::Use(u) => {
                    let before = self.globs.len();
                    self.add_use(&u.tree, Vec::new(), u.leading_colon.is_some());
                    if !matches!(u.vis, syn::Visibility::Inherited) {
                        let added = self.globs[before..].to_vec();
                        self.pub_globs.extend(added);
                    }
                }
                syn::Item::ExternCrate(e) => {
                    let name = e.ident.to_string();
                    let local = e
                        .rename
                        .as_ref()
                        .map_or(name.clone(), |(_, r)| r.to_string());
                    if name != "self" {
                        self.bind_name(local, name);
                    }
                }
                _ => {}
            }
        }
    }

    fn bind_name(&mut self, local: String, canon: String) {
        if let Some(old) = self.names.insert(local.clone(), canon.clone())
            && old != canon
        {
            self.alternatives.push((local, old));
        }
    }

    pub fn add_use(&mut self, tree: &syn::UseTree, mut prefix: Vec<String>, leading_colon: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_use(&p.tree, prefix, leading_colon);
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    // `use a::b::{self}` imports `b`.
                    if let Some(last) = prefix.last().cloned() {
                        let canon = self.canonical_use(&prefix, leading_colon);
                        self.bind_name(last, canon);
                    }
                } else {
                    prefix.push(name.clone());
                    let canon = self.canonical_use(&prefix, leading_colon);
                    self.bind_name(name, canon);
                }
            }
            syn::UseTree::Rename(r) => {
                let name = r.ident.to_string();
                if name != "self" {
                    prefix.push(name);
                }
                let canon = self.canonical_use(&prefix, leading_colon);
                let rename = r.rename.to_string();
                if rename != "_" {
                    self.bind_name(rename, canon);
                } else {
                    // `use Trait as _` still brings the trait's methods into scope.
                    self.names.insert(format!("_ as {canon}"), canon);
                }
            }
            syn::UseTree::Glob(_) => {
                let canon = self.canonical_use(&prefix, leading_colon);
                self.globs.push(canon);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.add_use(t, prefix.clone(), leading_colon);
                }
            }
        }
    }

    /// The canonical form of a `use` path: relative forms become `crate::…`; the first segment of an
    /// already-imported name is expanded (`use redis::aio; use aio::ConnectionManager;`).
    fn canonical_use(&self, segs: &[String], leading_colon: bool) -> String {
        if leading_colon {
            return segs.join("::");
        }
        self.canonical(segs)
    }

    fn canonical(&self, segs: &[String]) -> String {
        let Some(first) = segs.first() else {
            return String::new();
        };
        let rest = &segs[1..];
        let join = |head: &str| {
            if rest.is_empty() {
                head.to_string()
            } else {
                format!("{head}::{}", rest.join("::"))
            }
        };
        match first.as_str() {
            "crate" => join("crate"),
            "self" => join(&self.module),
            "super" => {
                let mut module = parent(&self.module).to_string();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    module = parent(&module).to_string();
                    rest = &rest[1..];
                }
                if rest.is_empty() {
                    module
                } else {
                    format!("{module}::{}", rest.join("::"))
                }
            }
            _ => {
                if let Some(canon) = self.names.get(first) {
                    join(canon)
                } else if self.child_modules.iter().any(|m| m == first) {
                    join(&format!("{}::{first}", self.module))
                } else {
                    segs.join("::")
                }
            }
        }
    }

    /// Resolves a path written in code. `self_ty` is the `impl` type, for `Self`.
    /// `known` says whether a candidate names something we know (for glob imports and same-module items).
    pub fn resolve(
        &self,
        path: &syn::Path,
        self_ty: Option<&Ty>,
        known: &dyn Fn(&str) -> bool,
    ) -> String {
        let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if path.leading_colon.is_some() {
            return segs.join("::");
        }
        self.resolve_segments(&segs, self_ty, known)
    }

    pub fn resolve_segments(
        &self,
        segs: &[String],
        self_ty: Option<&Ty>,
        known: &dyn Fn(&str) -> bool,
    ) -> String {
        let Some(first) = segs.first() else {
            return String::new();
        };
        if first == "Self"
            && let Some(t) = self_ty
        {
            let mut out = t.path.clone();
            for s in &segs[1..] {
                out.push_str("::");
                out.push_str(s);
            }
            return out;
        }
        if self.names.contains_key(first) || matches!(first.as_str(), "crate" | "self" | "super") {
            return self.canonical(segs);
        }
        // Not imported: an item of this module, a glob import, or an external crate path.
        // A path is known when it, or the item its first segment names, is (`Client::connect`
        // after `use etcd_client::*` is `etcd_client::Client::connect`).
        let under = |prefix: &str| {
            let cand = format!("{prefix}::{}", segs.join("::"));
            (known(&cand) || segs.len() > 1 && known(&format!("{prefix}::{first}"))).then_some(cand)
        };
        if let Some(local) = under(&self.module) {
            return local;
        }
        for g in &self.globs {
            if let Some(cand) = under(g) {
                return cand;
            }
        }
        // A type or trait name (crates' names are lower case) that nothing here declares, in a
        // module glob-importing one other crate's module: that crate's (`use conn::*;` then
        // `impl Connector for Sql`).
        if first.starts_with(|c: char| c.is_ascii_uppercase()) && !PRELUDE.contains(&first.as_str())
        {
            // Globs are stored canonical: `self::`/`super::` ones start with `crate`.
            let mut external = self
                .globs
                .iter()
                .filter(|g| !matches!(first_segment(g), "crate" | "std" | "core" | "alloc"));
            if let (Some(g), None) = (external.next(), external.next()) {
                return format!("{g}::{}", segs.join("::"));
            }
        }
        self.canonical(segs)
    }

    /// Is the trait with this canonical path usable by method-call syntax here?
    pub fn trait_in_scope(&self, trait_path: &str) -> bool {
        if self.names.values().any(|v| v == trait_path) {
            return true;
        }
        let parent = parent(trait_path);
        // `use redis::*` or `use redis::prelude::*` bring the traits along.
        self.globs.iter().any(|g| {
            g == parent || g.ends_with("::prelude") && g.starts_with(first_segment(trait_path))
        })
    }

    /// What this module's `use` items make nameable through it, as (path through the module,
    /// canonical path): `use manager::Locks` in `crate::locks` gives `crate::locks::Locks`. Rust
    /// lets other modules name these when they are visible to them, which compiling code respects.
    /// What this module's names stand for, as (path through the module, canonical path); a name
    /// bound twice (feature-gated alternatives) comes once per meaning, the last `use` last.
    pub fn exports(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.alternatives
            .iter()
            .map(|(l, c)| (l, c))
            .chain(self.names.iter())
            .filter(|(local, _)| !local.starts_with("_ as "))
            .map(|(local, canon)| (format!("{}::{local}", self.module), canon.clone()))
    }

    /// This module's glob imports, as (module, prefix): `use manager::*` in `crate::locks` gives
    /// (`crate::locks`, `crate::locks::manager`).
    pub fn glob_exports(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.globs.iter().map(|g| (self.module.clone(), g.clone()))
    }

    /// The `pub use prefix::*` among them, as (module, prefix).
    pub fn pub_glob_exports(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.pub_globs
            .iter()
            .map(|g| (self.module.clone(), g.clone()))
    }

    /// Does any import come from this crate? Cheap relevance test for packs.
    pub fn mentions_crate(&self, krate: &str) -> bool {
        self.names
            .values()
            .chain(self.globs.iter())
            .any(|v| first_segment(v) == krate)
    }
}

pub fn parent(path: &str) -> &str {
    path.rfind("::").map_or("crate", |i| &path[..i])
}

/// A path's segments as names (`diesel::dsl::now` -> `["diesel", "dsl", "now"]`).
pub fn segment_names(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|s| s.ident.to_string()).collect()
}

pub fn first_segment(path: &str) -> &str {
    path.split("::").next().unwrap_or(path)
}

/// The module path of a file, from its place in its crate: `src/jobs/import.rs` -> `crate::jobs::import`,
/// `src/lib.rs` -> `crate`. Files outside `src/` (tests, examples, fixtures) are named by their path
/// from the crate root so that two such files never share a module.
pub fn module_path_for(crate_root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(crate_root).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let Some(last) = parts.pop() else {
        return "crate".into();
    };
    let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
    if parts.first().is_some_and(|p| p == "src") {
        parts.remove(0);
        // Each binary in src/bin is its own crate root.
        if parts.first().is_some_and(|p| p == "bin") {
            return "crate".into();
        }
        if parts.is_empty() && (stem == "lib" || stem == "main") {
            return "crate".into();
        }
    }
    if stem != "mod" {
        parts.push(stem);
    }
    let mut out = String::from("crate");
    for p in parts {
        out.push_str("::");
        out.push_str(&p.replace('-', "_"));
    }
    out
}

/// What the standard prelude names (and `Self`): never another crate's through a glob.
const PRELUDE: &[&str] = &[
    "Self",
    "Box",
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "String",
    "Vec",
    "ToString",
    "ToOwned",
    "Clone",
    "Copy",
    "Default",
    "Drop",
    "Eq",
    "PartialEq",
    "Ord",
    "PartialOrd",
    "Fn",
    "FnMut",
    "FnOnce",
    "From",
    "Into",
    "TryFrom",
    "TryInto",
    "Iterator",
    "IntoIterator",
    "Extend",
    "DoubleEndedIterator",
    "ExactSizeIterator",
    "AsRef",
    "AsMut",
    "Send",
    "Sync",
    "Sized",
    "Unpin",
    "Debug",
    "Hash",
    "FromIterator",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn imports(src: &str, module: &str) -> Imports {
        let file: syn::File = syn::parse_str(src).expect("test source parses");
        let mut i = Imports::new(module.into());
        i.add_items(&file.items);
        i
    }

    fn resolve(i: &Imports, path: &str) -> String {
        let p: syn::Path = syn::parse_str(path).expect("path parses");
        i.resolve(&p, None, &|_| false)
    }

    #[test]
    fn use_trees() {
        let i = imports(
            "use rslock::{LockManager as LM, self as rl}; use redis::{aio::{self, ConnectionManager}, *}; \
             use crate::locks::Wrapper; use super::db::Pool; use self::inner::X; mod inner {} \
             extern crate etcd_client as etcd;",
            "crate::jobs::import",
        );
        assert_eq!(resolve(&i, "LM"), "rslock::LockManager");
        assert_eq!(resolve(&i, "rl::Lock"), "rslock::Lock");
        assert_eq!(
            resolve(&i, "aio::MultiplexedConnection"),
            "redis::aio::MultiplexedConnection"
        );
        assert_eq!(
            resolve(&i, "ConnectionManager"),
            "redis::aio::ConnectionManager"
        );
        assert_eq!(resolve(&i, "Wrapper"), "crate::locks::Wrapper");
        assert_eq!(resolve(&i, "Pool"), "crate::jobs::db::Pool");
        assert_eq!(resolve(&i, "X"), "crate::jobs::import::inner::X");
        assert_eq!(resolve(&i, "inner::Y"), "crate::jobs::import::inner::Y");
        assert_eq!(resolve(&i, "etcd::Client"), "etcd_client::Client");
        assert_eq!(resolve(&i, "::std::sync::Mutex"), "std::sync::Mutex");
        assert!(
            i.trait_in_scope("redis::AsyncCommands"),
            "glob import of redis brings its traits"
        );
        let known = |p: &str| p == "redis::Commands";
        let p: syn::Path = syn::parse_str("Commands").expect("parses");
        assert_eq!(i.resolve(&p, None, &known), "redis::Commands");
    }

    #[test]
    fn module_paths() {
        let root = Path::new("/r");
        assert_eq!(module_path_for(root, Path::new("/r/src/lib.rs")), "crate");
        assert_eq!(
            module_path_for(root, Path::new("/r/src/jobs/import.rs")),
            "crate::jobs::import"
        );
        assert_eq!(
            module_path_for(root, Path::new("/r/src/jobs/mod.rs")),
            "crate::jobs"
        );
        assert_eq!(
            module_path_for(root, Path::new("/r/tests/it.rs")),
            "crate::tests::it"
        );
        assert_eq!(
            module_path_for(root, Path::new("/r/src/bin/tool.rs")),
            "crate"
        );
    }
}
