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

/// `#[test]`, `#[<path>::test]` (tokio, async-std, sqlx, actix, test-log…) or `#[cfg(test)]`.
fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let p = a.path();
        p.segments.last().is_some_and(|s| s.ident == "test") && !p.is_ident("cfg")
    }) || is_cfg_test(attrs)
}

/// `#[cfg(test)]`, or a `cfg` that holds only with `test` (`all(test, …)`).
fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
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
