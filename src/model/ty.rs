//! A resolved type: a canonical path and its generic arguments.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The path a tuple type is given; its elements are its arguments, in order.
pub const TUPLE: &str = "(..)";

/// `tokio::sync::Mutex<rslock::LockManager>` is `Ty { path: "tokio::sync::Mutex", args: [Ty { path: "rslock::LockManager" }] }`.
/// Crate-local paths start with `crate::`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ty {
    pub path: String,
    pub args: Vec<Ty>,
}

impl Ty {
    pub fn simple(path: impl Into<String>) -> Ty {
        Ty {
            path: path.into(),
            args: Vec::new(),
        }
    }

    pub fn last_segment(&self) -> &str {
        self.path.rsplit("::").next().unwrap_or(&self.path)
    }

    /// Strips the layers that do not change which lock a value is: smart pointers, `Option`,
    /// the success type of `Result` and of any `…Result<T>` alias. References are already gone
    /// (they are not paths).
    pub fn peeled(&self) -> &Ty {
        let mut t = self;
        loop {
            let transparent = matches!(
                t.last_segment(),
                "Arc"
                    | "Rc"
                    | "Box"
                    | "Option"
                    | "Result"
                    | "Cow"
                    | "Pin"
                    | "ManuallyDrop"
                    | "Weak"
                    // Lazily initialised statics deref to what they hold.
                    | "LazyLock"
                    | "LazyCell"
                    | "Lazy"
            ) && is_std_like(&t.path)
                // Web frameworks' shared-state extractors deref to the state they carry
                // (`State<AppState>`, `web::Data<AppState>`, `Extension<Arc<Locks>>`).
                || is_extractor(&t.path)
                // Libraries' and crates' own result aliases (`RedisResult<T>`, `anyhow::Result<T>`,
                // `crate::Result<T>`, diesel's `QueryResult<T>`): the success type comes first.
                || t.last_segment().ends_with("Result");
            match t.args.first() {
                Some(inner) if transparent => t = inner,
                _ => return t,
            }
        }
    }

    /// The value a guard of this lock-like container hands out: `Mutex<T>`/`RwLock<T>` etc. give `T`.
    pub fn guarded_inner(&self) -> Option<&Ty> {
        let container = matches!(
            self.last_segment(),
            "Mutex"
                | "RwLock"
                | "RefCell"
                | "Cell"
                | "OnceCell"
                | "OnceLock"
                | "ReentrantMutex"
                | "FairMutex"
        );
        if container { self.args.first() } else { None }
    }
}

/// Bounds that say nothing about what can be called: `K: Send + Sync + KvEngine` is a `KvEngine`.
pub fn is_marker_trait(path: &syn::Path) -> bool {
    path.segments.last().is_some_and(|s| {
        matches!(
            s.ident.to_string().as_str(),
            "Send"
                | "Sync"
                | "Unpin"
                | "Sized"
                | "Clone"
                | "Copy"
                | "Debug"
                | "Display"
                | "Default"
                | "Eq"
                | "PartialEq"
                | "Hash"
                | "Ord"
                | "PartialOrd"
        )
    })
}

/// `Arc`, `Option` and friends, whether written bare (prelude or imported) or fully qualified.
/// `axum::extract::State`, `actix_web::web::Data`, `rocket::State`, …: handler arguments that
/// deref to the application state they wrap.
fn is_extractor(path: &str) -> bool {
    let last = path.rsplit("::").next().unwrap_or(path);
    matches!(last, "State" | "Data" | "Extension")
        && [
            "axum::",
            "actix_web::",
            "rocket::",
            "poem::",
            "salvo::",
            "ntex::",
        ]
        .iter()
        .any(|p| path.starts_with(p))
}

fn is_std_like(path: &str) -> bool {
    !path.contains("::")
        || [
            "std::",
            "core::",
            "alloc::",
            "tokio::",
            "parking_lot::",
            "futures::",
            "once_cell::",
        ]
        .iter()
        .any(|p| path.starts_with(p))
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path)?;
        if !self.args.is_empty() {
            f.write_str("<")?;
            for (i, a) in self.args.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{a}")?;
            }
            f.write_str(">")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Ty;

    fn wrapping(path: &str, inner: Ty) -> Ty {
        Ty {
            path: path.into(),
            args: vec![inner],
        }
    }

    #[test]
    fn framework_extractors_deref_to_their_state() {
        let state = Ty::simple("crate::AppState");
        for path in [
            "axum::extract::State",
            "axum::Extension",
            "actix_web::web::Data",
            "rocket::State",
        ] {
            let t = wrapping(path, wrapping("std::sync::Arc", state.clone()));
            assert_eq!(t.peeled(), &state, "{path}");
        }
        // A type of the program's own that happens to be called `State` is what it is.
        let own = wrapping("crate::State", state.clone());
        assert_eq!(own.peeled(), &own);
    }
}
