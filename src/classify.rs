//! A site's purpose, first match wins: an annotation on or directly above its statement; one
//! directly above the enclosing `fn`; a `//! lockaudit:` at the top of the file; a `[[classify]]`
//! entry of the config; the purpose a rule pack declares for its library's own lock; the configured
//! default.

use serde::Serialize;

use crate::config::{Config, DefaultPurpose};
use crate::directives::{DeclaredPurpose, Directive, DirectiveKind, Directives};
use crate::sites::{Fencing, Site};
use crate::source::SourceFile;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    Efficiency,
    Correctness,
    Unclassified,
}

impl From<DeclaredPurpose> for Purpose {
    fn from(p: DeclaredPurpose) -> Self {
        match p {
            DeclaredPurpose::Efficiency => Purpose::Efficiency,
            DeclaredPurpose::Correctness => Purpose::Correctness,
        }
    }
}

/// Where the purpose came from (shown in reports, so a reviewer can find it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurposeSource {
    Annotation,
    Function,
    File,
    Config,
    /// The rule pack: the library's own lock, taken for a purpose it documents.
    Library,
    Default,
}

#[derive(Debug, Clone)]
pub struct Classified {
    pub site: Site,
    pub purpose: Purpose,
    pub source: PurposeSource,
    pub fenced_by: Option<String>,
}

fn purpose_of<'d>(
    mut ds: impl Iterator<Item = &'d Directive>,
) -> Option<(DeclaredPurpose, Option<String>)> {
    ds.find_map(|d| match &d.kind {
        DirectiveKind::Purpose { purpose, fenced_by } => Some((*purpose, fenced_by.clone())),
        _ => None,
    })
}

pub fn classify(
    mut site: Site,
    file: &SourceFile,
    directives: &Directives,
    config: &Config,
) -> Classified {
    let stmt = site.stmt_line;
    // Trailing on any line from the statement's start to the call, then the block above the statement.
    let on_stmt = (stmt..=site.span.line.max(stmt)).flat_map(|l| {
        directives
            .on_line(l)
            .filter(move |_| directives.has_code(l))
    });
    let found = purpose_of(on_stmt)
        .map(|p| (p, PurposeSource::Annotation))
        .or_else(|| {
            purpose_of(directives.block_above(file, stmt).into_iter())
                .map(|p| (p, PurposeSource::Annotation))
        })
        .or_else(|| {
            let f = site.function.as_ref()?;
            purpose_of(directives.block_above(file, f.sig_line).into_iter())
                .map(|p| (p, PurposeSource::Function))
        })
        .or_else(|| purpose_of(directives.file_level()).map(|p| (p, PurposeSource::File)))
        .or_else(|| {
            let rel = config.relative(&file.path);
            let func = site.function.as_ref().map(|f| f.path.as_str());
            config
                .classify
                .iter()
                .find(|c| {
                    c.path.as_ref().is_none_or(|g| g.is_match(&rel))
                        && c.function
                            .as_ref()
                            .is_none_or(|g| func.is_some_and(|f| g.is_match(f)))
                        && c.key
                            .as_ref()
                            .is_none_or(|g| site.key.as_deref().is_some_and(|k| g.is_match(k)))
                })
                .map(|c| ((c.purpose, c.fenced_by.clone()), PurposeSource::Config))
        })
        .or_else(|| {
            site.library_purpose
                .clone()
                .map(|p| (p, PurposeSource::Library))
        });
    let (purpose, source, fenced_by) = match found {
        Some(((p, fb), src)) => (Purpose::from(p), src, fb),
        None => match config.default_purpose {
            DefaultPurpose::Unclassified => (Purpose::Unclassified, PurposeSource::Default, None),
            DefaultPurpose::Declared(p) => (Purpose::from(p), PurposeSource::Default, None),
        },
    };
    // A transaction lock stays one: its scope is what the pool and release rules read.
    if fenced_by.is_some()
        && purpose == Purpose::Correctness
        && site.fencing != Fencing::Transaction
    {
        site.fencing = Fencing::Declared;
    }
    Classified {
        site,
        purpose,
        source,
        fenced_by,
    }
}
