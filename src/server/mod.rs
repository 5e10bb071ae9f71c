//! `lockaudit server`: a language server over standard input and output.
//!
//! One thread runs the protocol loop and the analysis (the engine parallelises a run itself).
//! Diagnostics are published for the whole workspace after `initialize`, and again for what an
//! edit can affect: at once when a document is opened with text unlike the file's or saved, and
//! after [`DEBOUNCE`] of quiet after changes. A request is answered after pending edits are
//! analysed, so hovers and code actions always see the text the editor holds.
//!
//! - `documents`: open buffers, mirrored into the read overlay; positions.
//! - `workspace`: results per file; which crates an edit can affect.
//! - `diagnostics`, `hover`, `actions`: what the editor is sent.

mod actions;
mod diagnostics;
mod documents;
mod hover;
mod workspace;

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument,
    DidSaveTextDocument, LogMessage, Notification as _, PublishDiagnostics,
};
use lsp_types::request::{CodeActionRequest, ExecuteCommand, HoverRequest, Request as _};
use lsp_types::{
    CodeActionKind, CodeActionOptions, CodeActionProviderCapability, ExecuteCommandOptions,
    HoverProviderCapability, InitializeParams, MessageType, PublishDiagnosticsParams, SaveOptions,
    ServerCapabilities, ShowDocumentParams, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions, Url,
};

use crate::diag::ToolError;
use diagnostics::DocLinks;
use documents::Documents;
use workspace::Workspace;

/// How long the editor must stay quiet after a change before the change is analysed.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

fn protocol(e: impl std::fmt::Display) -> ToolError {
    ToolError::Usage(format!("language server: {e}"))
}

/// Serves one editor session on standard input and output, until `exit`.
pub fn run() -> Result<(), ToolError> {
    let (connection, io) = Connection::stdio();
    let (id, params) = connection.initialize_start().map_err(protocol)?;
    let params: InitializeParams = serde_json::from_value(params).map_err(protocol)?;
    let root = root_of(&params)
        .or_else(|| std::env::current_dir().ok())
        .ok_or_else(|| protocol("no workspace root and no current directory"))?;
    let root = documents::canonical(&root);
    // The engine names files relative to the current directory, and `check` run from the root
    // finds the same configuration and cache.
    std::env::set_current_dir(&root).map_err(|e| ToolError::Io {
        path: root.clone(),
        message: format!("cannot work from the workspace root: {e}"),
    })?;
    let result = serde_json::json!({
        "capabilities": capabilities(),
        "serverInfo": {"name": "lockaudit", "version": env!("CARGO_PKG_VERSION")},
    });
    connection.initialize_finish(id, result).map_err(protocol)?;
    let watch = params
        .capabilities
        .workspace
        .as_ref()
        .and_then(|w| w.did_change_watched_files.as_ref())
        .and_then(|w| w.dynamic_registration)
        .unwrap_or(false);
    let mut server = Server::new(connection, root);
    if watch {
        server.watch_files();
    }
    if server.ws.disabled {
        server.log(
            "lockaudit: the workspace root is the file system's root; open a folder to analyse it"
                .into(),
        );
    } else {
        server.analyse_all();
    }
    server.main_loop()?;
    drop(server);
    io.join().map_err(protocol)
}

fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::FULL),
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
                ..TextDocumentSyncOptions::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..CodeActionOptions::default()
        })),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: vec![actions::OPEN_RULE_DOC.into()],
            ..ExecuteCommandOptions::default()
        }),
        ..ServerCapabilities::default()
    }
}

/// The first workspace folder, else `rootUri`, else `rootPath`.
#[allow(deprecated)] // rootUri and rootPath are what older clients send.
fn root_of(p: &InitializeParams) -> Option<PathBuf> {
    p.workspace_folders
        .as_ref()
        .and_then(|f| f.first())
        .and_then(|f| f.uri.to_file_path().ok())
        .or_else(|| p.root_uri.as_ref().and_then(|u| u.to_file_path().ok()))
        .or_else(|| p.root_path.as_ref().map(PathBuf::from))
}

struct Server {
    conn: Connection,
    ws: Workspace,
    docs: Documents,
    links: DocLinks,
    /// Files edited since the last analysis, and when to analyse them.
    dirty: BTreeSet<PathBuf>,
    due: Option<Instant>,
    /// Files whose last published diagnostics were not empty.
    shown: HashSet<PathBuf>,
    next_id: i32,
}

impl Server {
    fn new(conn: Connection, root: PathBuf) -> Server {
        let mut ws = Workspace::new(root);
        // No folder was opened and the editor runs from `/`: the whole disk is no workspace,
        // and nothing is written there.
        ws.disabled = ws.root.parent().is_none();
        let dir = ws
            .cache_dir()
            .filter(|_| !ws.disabled)
            .map(|c| {
                c.join(format!("v{}", env!("CARGO_PKG_VERSION")))
                    .join("rules")
            })
            .unwrap_or_else(|| std::env::temp_dir().join("lockaudit-rules"));
        Server {
            conn,
            ws,
            docs: Documents::default(),
            links: DocLinks::write(dir),
            dirty: BTreeSet::new(),
            due: None,
            shown: HashSet::new(),
            next_id: 0,
        }
    }

    fn main_loop(&mut self) -> Result<(), ToolError> {
        loop {
            let msg = match self.due {
                Some(due) => match self
                    .conn
                    .receiver
                    .recv_timeout(due.saturating_duration_since(Instant::now()))
                {
                    Ok(m) => m,
                    Err(e) if e.is_timeout() => {
                        self.flush();
                        continue;
                    }
                    Err(_) => return Ok(()),
                },
                None => match self.conn.receiver.recv() {
                    Ok(m) => m,
                    Err(_) => return Ok(()),
                },
            };
            match msg {
                Message::Request(req) => {
                    if self.conn.handle_shutdown(&req).map_err(protocol)? {
                        return Ok(());
                    }
                    self.flush();
                    self.request(req);
                }
                Message::Notification(n) if n.method == "exit" => return Ok(()),
                Message::Notification(n) => self.notification(n),
                Message::Response(_) => {}
            }
        }
    }

    fn send(&self, msg: impl Into<Message>) {
        // A closed channel means the editor is gone; the loop ends on its own then.
        let _ = self.conn.sender.send(msg.into());
    }

    fn log(&self, message: String) {
        self.send(Notification::new(
            LogMessage::METHOD.into(),
            lsp_types::LogMessageParams {
                typ: MessageType::LOG,
                message,
            },
        ));
    }

    /// Asks the editor to report changes on disk (a checkout, a generator) of what the
    /// analysis reads.
    fn watch_files(&mut self) {
        let watchers = ["**/*.rs", "**/Cargo.toml", "**/lockaudit.toml"]
            .into_iter()
            .map(|glob| lsp_types::FileSystemWatcher {
                glob_pattern: lsp_types::GlobPattern::String(glob.into()),
                kind: None,
            })
            .collect();
        let options = lsp_types::DidChangeWatchedFilesRegistrationOptions { watchers };
        self.next_id += 1;
        self.send(Request::new(
            RequestId::from(format!("lockaudit-{}", self.next_id)),
            lsp_types::request::RegisterCapability::METHOD.into(),
            lsp_types::RegistrationParams {
                registrations: vec![lsp_types::Registration {
                    id: "lockaudit-watch".into(),
                    method: DidChangeWatchedFiles::METHOD.into(),
                    register_options: serde_json::to_value(options).ok(),
                }],
            },
        ));
    }

    fn analyse_all(&mut self) {
        let start = Instant::now();
        let changed = self.ws.analyse_all();
        self.log(format!(
            "lockaudit: analysed the workspace in {} ms",
            start.elapsed().as_millis()
        ));
        let mut all: BTreeSet<PathBuf> = self.ws.paths().cloned().collect();
        all.extend(changed);
        self.publish(all);
    }

    /// Analyses what the pending edits can affect, and publishes.
    fn flush(&mut self) {
        self.due = None;
        if self.dirty.is_empty() {
            return;
        }
        let files = std::mem::take(&mut self.dirty);
        let start = Instant::now();
        let unsaved = self.docs.any_unsaved();
        self.ws.last_run = None;
        let mut changed = self.ws.analyse_for(&files, unsaved);
        let what = match self.ws.last_run.take() {
            None => "nothing in the workspace".to_string(),
            Some(p) if p == [self.ws.root.clone()] => "the whole workspace".to_string(),
            Some(p) => format!("{} crate folder(s)", p.len()),
        };
        self.log(format!(
            "lockaudit: analysed {what} for {} edited file(s) in {} ms",
            files.len(),
            start.elapsed().as_millis()
        ));
        // The edited files are always published, so the editor knows they are current.
        changed.extend(files.into_iter().filter(|f| self.docs.get(f).is_some()));
        self.publish(changed);
    }

    fn publish(&mut self, files: BTreeSet<PathBuf>) {
        // An error that has no file to sit on (an unreadable root, a panic) is said once.
        if let Some(e @ (ToolError::Usage(_) | ToolError::Io { .. })) = &self.ws.tool_error {
            self.send(Notification::new(
                lsp_types::notification::ShowMessage::METHOD.into(),
                lsp_types::ShowMessageParams {
                    typ: MessageType::ERROR,
                    message: format!("lockaudit: {e}"),
                },
            ));
            self.ws.tool_error = None;
        }
        for path in files {
            let mut diags = diagnostics::of_file(self.ws.file(&path), &self.links);
            if let Some(e) = &self.ws.tool_error {
                diags.extend(diagnostics::of_tool_error(e, &path));
            }
            let doc = self.docs.get(&path);
            if diags.is_empty() && doc.is_none() && !self.shown.contains(&path) {
                continue;
            }
            let Some(uri) = doc
                .map(|d| d.uri.clone())
                .or_else(|| Url::from_file_path(&path).ok())
            else {
                continue;
            };
            if diags.is_empty() {
                self.shown.remove(&path);
            } else {
                self.shown.insert(path.clone());
            }
            let params = PublishDiagnosticsParams {
                uri,
                diagnostics: diags,
                version: doc.map(|d| d.version),
            };
            self.send(Notification::new(PublishDiagnostics::METHOD.into(), params));
        }
    }

    fn schedule(&mut self, path: PathBuf, after: Duration) {
        self.dirty.insert(path);
        self.due = Some(Instant::now() + after);
    }

    fn notification(&mut self, n: Notification) {
        match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Ok(p) =
                    n.extract::<lsp_types::DidOpenTextDocumentParams>(DidOpenTextDocument::METHOD)
                else {
                    return;
                };
                let d = p.text_document;
                let Some(path) = documents::path_of(&d.uri) else {
                    return;
                };
                self.docs.set(path.clone(), d.uri, d.version, d.text);
                if self.docs.differs_from_disk(&path) {
                    self.schedule(path, Duration::ZERO);
                } else {
                    self.publish(BTreeSet::from([path]));
                }
            }
            DidChangeTextDocument::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidChangeTextDocumentParams>(
                    DidChangeTextDocument::METHOD,
                ) else {
                    return;
                };
                let d = p.text_document;
                // Full synchronisation: the last change holds the whole text.
                let (Some(path), Some(change)) = (
                    documents::path_of(&d.uri),
                    p.content_changes.into_iter().last(),
                ) else {
                    return;
                };
                self.docs.set(path.clone(), d.uri, d.version, change.text);
                self.schedule(path, DEBOUNCE);
            }
            DidSaveTextDocument::METHOD => {
                let Ok(p) =
                    n.extract::<lsp_types::DidSaveTextDocumentParams>(DidSaveTextDocument::METHOD)
                else {
                    return;
                };
                if let Some(path) = documents::path_of(&p.text_document.uri) {
                    self.dirty.insert(path);
                    self.flush();
                }
            }
            DidCloseTextDocument::METHOD => {
                let Ok(p) = n
                    .extract::<lsp_types::DidCloseTextDocumentParams>(DidCloseTextDocument::METHOD)
                else {
                    return;
                };
                if let Some(path) = documents::path_of(&p.text_document.uri)
                    && self.docs.close(&path)
                {
                    self.schedule(path, DEBOUNCE);
                }
            }
            DidChangeWatchedFiles::METHOD => {
                let Ok(p) = n.extract::<lsp_types::DidChangeWatchedFilesParams>(
                    DidChangeWatchedFiles::METHOD,
                ) else {
                    return;
                };
                for c in p.changes {
                    if let Some(path) = documents::path_of(&c.uri)
                        && self.docs.get(&path).is_none()
                    {
                        self.schedule(path, DEBOUNCE);
                    }
                }
            }
            _ => {}
        }
    }

    fn request(&mut self, req: Request) {
        let id = req.id.clone();
        let response = match req.method.as_str() {
            HoverRequest::METHOD => self.hover(req),
            CodeActionRequest::METHOD => self.code_action(req),
            ExecuteCommand::METHOD => self.execute(req),
            _ => Err((
                ErrorCode::MethodNotFound,
                format!("lockaudit does not serve `{}`", req.method),
            )),
        };
        let response = match response {
            Ok(v) => Response::new_ok(id, v),
            Err((code, message)) => Response::new_err(id, code as i32, message),
        };
        self.send(response);
    }

    fn hover(&self, req: Request) -> Reply {
        let p: lsp_types::HoverParams = params(req, HoverRequest::METHOD)?;
        let at = p.text_document_position_params;
        let hover = documents::path_of(&at.text_document.uri)
            .and_then(|path| self.ws.file(&path).cloned())
            .and_then(|r| hover::at_line(&r, at.position.line as usize + 1, &self.ws.root));
        Ok(serde_json::to_value(hover).unwrap_or_default())
    }

    fn code_action(&self, req: Request) -> Reply {
        let p: lsp_types::CodeActionParams = params(req, CodeActionRequest::METHOD)?;
        let uri = p.text_document.uri;
        let actions = documents::path_of(&uri)
            .and_then(|path| Some((self.ws.file(&path)?, self.docs.text(&path)?)))
            .map(|(r, text)| actions::at(&uri, &text, r, p.range, &self.links))
            .unwrap_or_default();
        Ok(serde_json::to_value(actions).unwrap_or_default())
    }

    fn execute(&mut self, req: Request) -> Reply {
        let p: lsp_types::ExecuteCommandParams = params(req, ExecuteCommand::METHOD)?;
        if p.command != actions::OPEN_RULE_DOC {
            return Err((
                ErrorCode::InvalidParams,
                format!("no command `{}`", p.command),
            ));
        }
        let uri = p
            .arguments
            .first()
            .and_then(|a| a.as_str())
            .and_then(|s| Url::parse(s).ok())
            .ok_or((
                ErrorCode::InvalidParams,
                format!("{} needs the page's URL", actions::OPEN_RULE_DOC),
            ))?;
        self.next_id += 1;
        self.send(Request::new(
            RequestId::from(format!("lockaudit-{}", self.next_id)),
            lsp_types::request::ShowDocument::METHOD.into(),
            ShowDocumentParams {
                uri,
                external: Some(false),
                take_focus: Some(true),
                selection: None,
            },
        ));
        Ok(serde_json::Value::Null)
    }
}

type Reply = Result<serde_json::Value, (ErrorCode, String)>;

fn params<P: serde::de::DeserializeOwned>(
    req: Request,
    method: &str,
) -> Result<P, (ErrorCode, String)> {
    req.extract(method)
        .map(|(_, p)| p)
        .map_err(|e| (ErrorCode::InvalidParams, format!("{method}: {e:?}")))
}
