//! A minimal LSP client for the tests: JSON-RPC over a child's standard input and output with
//! `Content-Length` framing, as an editor speaks it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(60);

pub struct Client {
    child: Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    next_id: i64,
    /// Messages read while waiting for something else.
    pub seen: Vec<Value>,
}

/// Reads one framed message; `None` at the end of the stream.
pub fn read_message(r: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

pub fn write_message(w: &mut impl Write, v: &Value) {
    let body = serde_json::to_vec(v).expect("json");
    write!(w, "Content-Length: {}\r\n\r\n", body.len()).expect("write header");
    w.write_all(&body).expect("write body");
    w.flush().expect("flush");
}

pub fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

impl Client {
    /// Starts `exe server` in `cwd` and initializes it with `root` as the workspace.
    pub fn start(exe: &Path, cwd: &Path, root: &Path) -> Client {
        Client::start_with(
            exe,
            cwd,
            root,
            json!({"textDocument": {"publishDiagnostics": {"versionSupport": true}}}),
        )
    }

    /// The same, with the client's capabilities given.
    pub fn start_with(exe: &Path, cwd: &Path, root: &Path, capabilities: Value) -> Client {
        let mut child = Command::new(exe)
            .arg("server")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start lockaudit server");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            while let Some(m) = read_message(&mut stdout) {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        let mut c = Client {
            child,
            stdin,
            rx,
            next_id: 0,
            seen: Vec::new(),
        };
        let init = c.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": uri(root),
                "capabilities": capabilities,
            }),
        );
        assert!(
            init["capabilities"]["hoverProvider"].as_bool() == Some(true),
            "{init}"
        );
        c.notify("initialized", json!({}));
        c
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        write_message(
            &mut self.stdin,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        );
    }

    /// Sends several notifications in one write, as a fast typist's editor does.
    pub fn notify_all(&mut self, batch: &[(&str, Value)]) {
        let mut buf = Vec::new();
        for (method, params) in batch {
            write_message(
                &mut buf,
                &json!({"jsonrpc": "2.0", "method": method, "params": params}),
            );
        }
        self.stdin.write_all(&buf).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Answers a request the server sent.
    pub fn respond(&mut self, id: &Value, result: Value) {
        write_message(
            &mut self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        );
    }

    fn next(&mut self, deadline: Instant) -> Option<Value> {
        match self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its output"),
        }
    }

    /// Sends a request and returns its result (panics on an error response or a time-out).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        write_message(
            &mut self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let m = self
                .next(deadline)
                .unwrap_or_else(|| panic!("no answer to {method}"));
            if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.seen.push(m);
        }
    }

    /// The first message (seen before or arriving within the time-out) that `pred` accepts.
    pub fn wait(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let m = self
                .next(deadline)
                .unwrap_or_else(|| panic!("timed out waiting for {what}; seen {:?}", self.seen));
            if pred(&m) {
                return m;
            }
            self.seen.push(m);
        }
    }

    /// The next `publishDiagnostics` for `uri` (with `version` when given).
    pub fn diagnostics(&mut self, uri: &str, version: Option<i64>) -> Vec<Value> {
        let m = self.wait("publishDiagnostics", |m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && version.is_none_or(|v| m["params"]["version"] == v)
        });
        m["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `shutdown` and `exit`; returns the exit status.
    pub fn shutdown(mut self) -> std::process::ExitStatus {
        let r = self.request("shutdown", Value::Null);
        assert!(r.is_null(), "{r}");
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The rule ids of diagnostics, sorted.
pub fn codes(diags: &[Value]) -> Vec<String> {
    let mut c: Vec<String> = diags
        .iter()
        .filter_map(|d| d["code"].as_str().map(str::to_string))
        .collect();
    c.sort();
    c
}
