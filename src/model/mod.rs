//! The semantic model: what the syntax means, as far as a single-crate, type-annotation-driven
//! analysis can tell. syn gives syntax only; this layer resolves names (`use` trees, module paths),
//! remembers the crate's structs, aliases, functions and constants, and evaluates literals.

pub mod eval;
pub mod graph;
pub mod imports;
pub mod index;
pub mod lua;
pub mod ty;

pub use graph::CrateGraph;
pub use imports::{Imports, module_path_for};
pub use index::{CrateIndex, CrateView, FileIndex};
pub use ty::Ty;
