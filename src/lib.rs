//! `lockaudit`, a static analyzer for distributed-lock use in Rust code.
//!
//! The pipeline, one module per stage: [`discover`] -> parse and [`model`] (in [`engine`]) ->
//! [`sites`] (matched against [`packs`]) -> [`classify`] (with [`directives`] and [`config`]) ->
//! [`lints`] -> [`report`].

pub mod blank;
pub mod cache;
pub mod classify;
pub mod cli;
pub mod commands;
pub mod config;
#[doc(hidden)]
pub mod corpus;
pub mod diag;
pub mod directives;
pub mod discover;
pub mod engine;
pub mod lex;
pub mod lints;
pub mod model;
pub mod packs;
pub mod prefilter;
pub mod read;
pub mod region;
pub mod report;
pub mod server;
pub mod settings;
pub mod sites;
pub mod source;
