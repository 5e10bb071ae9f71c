//! Test code: files under a crate's `tests/` or `benches/`, `#[cfg(test)]` modules (and other
//! items), and functions marked `#[test]` or `#[<anything>::test]` (`tokio::test`, `sqlx::test`,
//! …). Sites there are marked as test sites, and their findings are left out of reports unless
//! the config says `include-tests = true`: a lock taken in a test guards nothing in production.
//! `examples/` is not test code: it is how a library shows its users to lock.
//!
//! Only items are looked at (no expressions), by their attributes; a test region is a line range.

use std::path::Path;

use syn::spanned::Spanned;

/// The test regions of one file.
#[derive(Debug, Default, Clone)]
pub struct TestCode {
    /// The whole file is test code (under `tests/` or `benches/`).
    pub whole_file: bool,
    /// 1-based inclusive line ranges of test items.
    ranges: Vec<(usize, usize)>,
}

impl TestCode {
    /// The test regions of a parsed file at `file`, in the crate rooted at `crate_root`.
    pub fn of(ast: &syn::File, crate_root: &Path, file: &Path) -> TestCode {
        let mut t = TestCode {
            whole_file: is_test_path(crate_root, file),
            ranges: Vec::new(),
        };
        if !t.whole_file {
            t.items(&ast.items);
        }
        t
    }

    pub fn contains(&self, line: usize) -> bool {
        self.whole_file || self.ranges.iter().any(|&(a, b)| a <= line && line <= b)
    }

    /// The test regions of several pieces of one file, parsed apart.
    pub fn merge(parts: impl IntoIterator<Item = TestCode>) -> TestCode {
        let mut out = TestCode::default();
        for p in parts {
            out.whole_file |= p.whole_file;
            out.ranges.extend(p.ranges);
        }
        out
    }

    fn push(&mut self, attrs: &[syn::Attribute], item: &impl Spanned, end: proc_macro2::Span) {
        // Lines through `Span::from_pm2`: right in a piece of a file parsed on its own too.
        let line = |s: proc_macro2::Span| crate::source::Span::from_pm2(s).line;
        let start = attrs
            .first()
            .map_or_else(|| line(item.span()), |a| line(a.span()));
        self.ranges
            .push((start, crate::source::Span::from_pm2(end).end_line));
    }

    fn items(&mut self, items: &[syn::Item]) {
        for item in items {
            match item {
                syn::Item::Fn(f) if is_test_fn(&f.attrs) => {
                    self.push(&f.attrs, &f.sig, f.block.brace_token.span.close());
                }
                syn::Item::Mod(m) => {
                    let Some((brace, inner)) = &m.content else {
                        continue;
                    };
                    if is_cfg_test(&m.attrs) {
                        self.push(&m.attrs, &m.ident, brace.span.close());
                    } else {
                        self.items(inner);
                    }
                }
                syn::Item::Impl(i) => {
                    if is_cfg_test(&i.attrs) {
                        self.push(&i.attrs, &i.impl_token, i.brace_token.span.close());
                        continue;
                    }
                    for it in &i.items {
                        if let syn::ImplItem::Fn(f) = it
                            && is_test_fn(&f.attrs)
                        {
                            self.push(&f.attrs, &f.sig, f.block.brace_token.span.close());
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Under the crate's `tests/` or `benches/` folder (Cargo's integration tests and benchmarks).
pub fn is_test_path(crate_root: &Path, file: &Path) -> bool {
    let Ok(rel) = file.strip_prefix(crate_root) else {
        return false;
    };
    rel.components()
        .next()
        .is_some_and(|c| c.as_os_str() == "tests" || c.as_os_str() == "benches")
        && rel.components().count() > 1
}

/// Larger declaring files are not read for `mod` declarations.
const MAX_DECLARING_FILE: u64 = 8 << 20;

/// A file that is a module declared out of line under `#[cfg(test)]` (`#[cfg(test)] mod tests;`
/// in `lib.rs` makes `src/tests.rs` or `src/tests/mod.rs` test code), or a module inside one.
/// Read from the declaring file's text, so it holds whether or not that file was parsed.
pub fn declared_for_tests(crate_root: &Path, file: &Path) -> bool {
    let mut file = file.to_path_buf();
    // Each step goes one module up; a module tree is never this deep.
    for _ in 0..16 {
        let Some((name, dir)) = module_of(&file) else {
            return false;
        };
        if !dir.starts_with(crate_root) {
            return false;
        }
        let mut declared_in = None;
        let parents = [
            dir.join("mod.rs"),
            dir.with_extension("rs"),
            dir.join("lib.rs"),
            dir.join("main.rs"),
        ];
        for parent in parents.iter().filter(|p| **p != file) {
            // A regular file of source size only: a FIFO named `mod.rs` would block the read.
            let readable = std::fs::metadata(parent)
                .is_ok_and(|m| m.is_file() && m.len() <= MAX_DECLARING_FILE);
            if !readable {
                continue;
            }
            let Ok(text) = std::fs::read(parent) else {
                continue;
            };
            let Ok(text) = std::str::from_utf8(&text) else {
                continue;
            };
            match declaration(text, &name) {
                Some(true) => return true,
                Some(false) => {
                    declared_in = Some(parent.clone());
                    break;
                }
                None => {}
            }
        }
        match declared_in {
            Some(parent) => file = parent,
            None => return false,
        }
    }
    false
}

/// The module a file is (`tests` for `x/tests.rs` and `x/tests/mod.rs`) and the folder its
/// declaring module's files are found from.
fn module_of(file: &Path) -> Option<(String, std::path::PathBuf)> {
    let stem = file.file_stem()?.to_str()?;
    let dir = file.parent()?;
    if matches!(stem, "lib" | "main") {
        return None;
    }
    if stem == "mod" {
        let name = dir.file_name()?.to_str()?.to_string();
        return Some((name, dir.parent()?.to_path_buf()));
    }
    Some((stem.to_string(), dir.to_path_buf()))
}

/// Does `text` declare `mod name;`, and is that declaration under `#[cfg(test)]` (in the
/// attribute lines right above it)? `None`: not declared here.
fn declaration(text: &str, name: &str) -> Option<bool> {
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let declares = t.strip_prefix("mod ").is_some_and(|rest| {
            rest.trim_start()
                .strip_prefix(name)
                .is_some_and(|r| r.trim_start() == ";")
        });
        if !declares {
            continue;
        }
        let for_tests = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("#[") || l.starts_with("//"))
            .any(|l| {
                let l = l.replace(' ', "");
                l.starts_with("#[cfg(test)]") || l.starts_with("#[cfg(all(test,")
            });
        return Some(for_tests);
    }
    None
}

/// `#[test]`, `#[<path>::test]` (tokio, async-std, sqlx, actix, test-log…) or `#[cfg(test)]`.
fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let p = a.path();
        p.segments.last().is_some_and(|s| s.ident == "test") && !p.is_ident("cfg")
    }) || is_cfg_test(attrs)
}

/// A statement compiled only for tests (`#[cfg(test)] test_seam::stall().await;` inside a
/// production function): not part of what the function does in production.
pub(crate) fn is_test_stmt(s: &syn::Stmt) -> bool {
    let attrs: &[syn::Attribute] = match s {
        syn::Stmt::Local(l) => &l.attrs,
        syn::Stmt::Macro(m) => &m.attrs,
        syn::Stmt::Item(_) => return false,
        syn::Stmt::Expr(e, _) => match e {
            syn::Expr::Await(a) => &a.attrs,
            syn::Expr::Call(c) => &c.attrs,
            syn::Expr::MethodCall(m) => &m.attrs,
            syn::Expr::Macro(m) => &m.attrs,
            syn::Expr::Block(b) => &b.attrs,
            syn::Expr::If(i) => &i.attrs,
            syn::Expr::Assign(a) => &a.attrs,
            syn::Expr::Try(t) => &t.attrs,
            _ => return false,
        },
    };
    !attrs.is_empty() && is_cfg_test(attrs)
}

/// `#[cfg(test)]`, or a `cfg` that holds only with `test` (`all(test, …)`).
pub(crate) fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(meta) = a.parse_args::<syn::Meta>() else {
            return false;
        };
        requires_test(&meta)
    })
}

fn requires_test(meta: &syn::Meta) -> bool {
    match meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(l) if l.path.is_ident("all") => l
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )
            .is_ok_and(|args| args.iter().any(requires_test)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions(src: &str) -> TestCode {
        let ast = syn::parse_file(src).expect("parses");
        TestCode::of(&ast, Path::new("/c"), Path::new("/c/src/lib.rs"))
    }

    #[test]
    fn out_of_line_test_modules_are_found_in_their_declaration() {
        assert_eq!(
            declaration("#[cfg(test)]\nmod tests;\n", "tests"),
            Some(true)
        );
        assert_eq!(
            declaration(
                "#[cfg(test)]\n#[path = \"t.rs\"]\npub(crate) mod tests;\n",
                "tests"
            ),
            Some(true)
        );
        assert_eq!(
            declaration("#[cfg(all(test, feature = \"x\"))]\nmod it;\n", "it"),
            Some(true)
        );
        assert_eq!(declaration("pub mod tests;\n", "tests"), Some(false));
        assert_eq!(
            declaration("#[cfg(not(test))]\nmod tests;\n", "tests"),
            Some(false)
        );
        assert_eq!(declaration("mod testsuite;\n", "tests"), None);
        let dir = std::env::temp_dir().join(format!("lockaudit-test-mods-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/tests")).unwrap();
        std::fs::write(
            dir.join("src/lib.rs"),
            "pub mod store;\n#[cfg(test)]\nmod tests;\n",
        )
        .unwrap();
        std::fs::write(dir.join("src/tests/mod.rs"), "mod helpers;\n").unwrap();
        std::fs::write(dir.join("src/tests/helpers.rs"), "").unwrap();
        std::fs::write(dir.join("src/store.rs"), "").unwrap();
        assert!(declared_for_tests(&dir, &dir.join("src/tests/mod.rs")));
        assert!(declared_for_tests(&dir, &dir.join("src/tests/helpers.rs")));
        assert!(!declared_for_tests(&dir, &dir.join("src/store.rs")));
        assert!(!declared_for_tests(&dir, &dir.join("src/lib.rs")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn test_items_are_found_by_their_attributes() {
        let t = regions(
            "fn prod() {}\n\
             #[test]\n\
             fn unit() {}\n\
             #[tokio::test]\n\
             async fn async_unit() {}\n\
             #[cfg(test)]\n\
             mod tests {\n\
                 fn helper() {}\n\
             }\n\
             #[cfg(all(test, feature = \"x\"))]\n\
             mod more {}\n\
             #[cfg(not(test))]\n\
             mod prod_only {}\n\
             #[cfg(feature = \"test\")]\n\
             fn featured() {}\n\
             mod outer { #[test] fn inner() {} fn not_test() {} }\n",
        );
        let lines: Vec<usize> = (1..=17).filter(|&l| t.contains(l)).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16]);
    }

    #[test]
    fn tests_and_benches_folders_are_test_code_examples_are_not() {
        let root = Path::new("/c");
        assert!(is_test_path(root, Path::new("/c/tests/it.rs")));
        assert!(is_test_path(root, Path::new("/c/benches/b/main.rs")));
        assert!(!is_test_path(root, Path::new("/c/examples/lock.rs")));
        assert!(!is_test_path(root, Path::new("/c/src/tests.rs")));
        assert!(!is_test_path(root, Path::new("/c/src/tests/x.rs")));
        assert!(!is_test_path(root, Path::new("/other/tests/x.rs")));
    }
}
