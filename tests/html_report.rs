//! `inventory --format html`: the page is self-contained, escapes what it shows of the analysed
//! code, and — rendered by headless Chromium with its script run — shows the same counts as the
//! JSON inventory, the unfenced correctness locks first, and sorts and filters.
//! The browser part is skipped, saying so, only when no Chromium is installed (scripts/services
//! installs Debian's `chromium`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{json, lockaudit, root, stdout};

const XSS: &str = r#"use rslock::LockManager;
use std::time::Duration;

pub async fn run(m: &LockManager) -> Result<(), rslock::LockError> {
    // lockaudit: correctness
    let l = m.lock("<script>document.title='pwned'</script><img src=x onerror=alert(1)>", Duration::from_secs(5)).await?;
    m.unlock(&l).await;
    Ok(())
}
"#;

fn html(dir: &Path, paths: &[&str]) -> String {
    let mut args = vec!["inventory", "--no-cache", "--format", "html"];
    args.extend(paths);
    let o = lockaudit(dir, &args);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    stdout(&o)
}

fn inventory_json(dir: &Path, paths: &[&str]) -> serde_json::Value {
    let mut args = vec!["inventory", "--no-cache", "--format", "json"];
    args.extend(paths);
    json(&lockaudit(dir, &args))
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LOCKAUDIT_CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    eprintln!("chromium not found: the browser checks of the HTML report are SKIPPED");
    None
}

/// Runs headless Chromium with a private profile; kills it after a minute.
fn browse(chrome: &Path, extra: &[&str], url: &str) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut out = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "chromium failed: {status}");
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("chromium did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().expect("reader")
}

/// Text of an HTML fragment: tags dropped, the entities the page uses decoded.
fn text(fragment: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in fragment.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The `<tbody …>` elements of the site table, in document order.
fn site_bodies(dom: &str) -> Vec<&str> {
    dom.split("<tbody id=\"site-")
        .skip(1)
        .map(|b| b.split("</tbody>").next().unwrap())
        .collect()
}

fn first_code(fragment: &str) -> String {
    let start = fragment.find("<code>").expect("a <code>") + "<code>".len();
    let end = start + fragment[start..].find("</code>").expect("</code>");
    text(&fragment[start..end])
}

#[test]
fn the_page_is_self_contained_and_escapes_user_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("xss.rs"), XSS).expect("write");
    let page = html(dir.path(), &["."]);
    // Exactly one script, ours; nothing that loads from elsewhere.
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(
        !page.contains("<img"),
        "markup from the source went through unescaped"
    );
    assert!(
        page.contains("&lt;script&gt;document.title="),
        "the key is shown, escaped"
    );
    // Attribute values are always quoted here, and a `"` from user code is escaped.
    for loader in [" src=\"", "href=\"http", "<link", "@import", "url("] {
        assert!(!page.contains(loader), "{loader} in the page");
    }
    assert!(page.contains("Content-Security-Policy"));
    // The key cell holds the key as text.
    let inv = inventory_json(dir.path(), &["."]);
    let key = inv["sites"][0]["key"]
        .as_str()
        .expect("the key is evaluated");
    assert!(key.contains("<script>"));
    let bodies = site_bodies(&page);
    assert_eq!(bodies.len(), 1);
    assert!(text(bodies[0]).contains(key), "{}", bodies[0]);

    let Some(chrome) = chromium() else { return };
    let file = dir.path().join("report.html");
    std::fs::write(&file, &page).expect("write");
    let dom = browse(
        &chrome,
        &["--dump-dom"],
        &format!("file://{}", file.display()),
    );
    assert!(
        dom.contains("<title>Lock inventory (lockaudit)</title>"),
        "an injected script ran:\n{dom}"
    );
    assert!(!dom.contains("pwned</title>"));
    assert!(
        !dom.contains("<img"),
        "markup from the source became elements"
    );
    assert!(dom.contains("1 of 1 sites shown"), "the page's script ran");
}

#[test]
fn chromium_renders_the_workspace_inventory() {
    let paths = ["fixtures/workspace"];
    let page = html(&root(), &paths);
    let inv = inventory_json(&root(), &paths);
    let summary = &inv["summary"];
    let sites = summary["sites"].as_u64().unwrap();
    let unfenced: Vec<&str> = summary["unfenced_correctness"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(sites > 0 && !unfenced.is_empty(), "{summary}");
    assert_eq!(site_bodies(&page).len() as u64, sites);

    // The snippet of the first site underlines exactly its finding's range.
    let first = inv["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| format!("{}:{}", s["path"].as_str().unwrap(), s["line"]) == unfenced[0])
        .expect("the unfenced site");
    let src = std::fs::read_to_string(root().join(first["path"].as_str().unwrap())).unwrap();
    let line = src
        .lines()
        .nth(first["line"].as_u64().unwrap() as usize - 1)
        .unwrap();
    let check = json(&lockaudit(
        &root(),
        &[
            "check",
            "--no-cache",
            "--format",
            "json",
            "fixtures/workspace",
        ],
    ));
    let f = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == first["path"] && f["line"] == first["line"])
        .expect("a finding at the unfenced site");
    let (c0, c1) = (
        f["column"].as_u64().unwrap() as usize,
        f["end_column"].as_u64().unwrap() as usize,
    );
    let under: String = line.chars().skip(c0 - 1).take(c1 - c0).collect();
    let body = site_bodies(&page)[0];
    assert!(
        body.contains(&format!("<u class=\"hl\">{under}</u>")),
        "{under:?} not underlined in\n{body}"
    );
    assert!(
        body.contains(f["help"].as_str().unwrap().split('`').next().unwrap()),
        "the help text"
    );

    let Some(chrome) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("inventory.html");
    std::fs::write(&file, &page).expect("write");
    let url = format!("file://{}", file.display());
    let dom = browse(&chrome, &["--dump-dom"], &url);

    assert!(
        dom.contains(&format!("{sites} of {sites} sites shown")),
        "the script ran and counted"
    );
    let card = dom.split("id=\"count-sites\">").nth(1).expect("sites card");
    assert_eq!(
        text(card.split("</div>").next().unwrap()).trim(),
        format!("{sites} lock sites")
    );
    for (chart, counts) in [
        ("purpose", &summary["by_purpose"]),
        ("library", &summary["by_library"]),
    ] {
        for (label, n) in counts.as_object().unwrap() {
            let bar = format!("data-label=\"{label}\" data-count=\"{n}\"");
            assert!(dom.contains(&bar), "chart by {chart}: {bar} missing");
        }
    }
    let listed = dom
        .split("id=\"unfenced\"")
        .nth(1)
        .expect("unfenced section");
    assert_eq!(
        first_code(listed),
        unfenced[0],
        "the list starts with the first unfenced site"
    );
    // The table starts with the unfenced correctness sites, in their order.
    let bodies = site_bodies(&dom);
    assert_eq!(bodies.len() as u64, sites);
    for (i, u) in unfenced.iter().enumerate() {
        assert_eq!(first_code(bodies[i]), *u);
        assert!(bodies[i].contains("unfenced"));
    }

    // Filtering and sorting, set through the fragment, done by the page's script.
    let efficiency = summary["by_purpose"]["efficiency"].as_u64().unwrap();
    let dom = browse(
        &chrome,
        &["--dump-dom"],
        &format!("{url}#purpose=efficiency&sort=ttl&desc=1"),
    );
    assert!(
        dom.contains(&format!("{efficiency} of {sites} sites shown")),
        "purpose filter"
    );
    let bodies = site_bodies(&dom);
    let visible: Vec<&&str> = bodies
        .iter()
        .filter(|b| !b.split('>').next().unwrap().contains("hidden"))
        .collect();
    assert_eq!(visible.len() as u64, efficiency);
    assert!(
        visible
            .iter()
            .all(|b| b.contains("data-purpose=\"efficiency\""))
    );
    assert!(
        dom.contains("aria-sort=\"descending\""),
        "sorted by a column"
    );
    let ttls: Vec<i64> = bodies
        .iter()
        .map(|b| {
            let cell = b.split("<td data-sort=\"").nth(2).expect("ttl cell");
            cell.split('"')
                .next()
                .unwrap()
                .parse()
                .expect("ttl sort key")
        })
        .collect();
    assert!(
        ttls.windows(2).all(|w| w[0] >= w[1]),
        "descending TTL: {ttls:?}"
    );
    let dom = browse(&chrome, &["--dump-dom"], &format!("{url}#q=billing"));
    let billing = inv["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            [&s["path"], &s["function"]]
                .iter()
                .any(|v| v.as_str().is_some_and(|t| t.contains("billing")))
        })
        .count();
    assert!(
        dom.contains(&format!("{billing} of {sites} sites shown")),
        "text filter"
    );

    // A screenshot for a person to look at (docs/inventory-report.png is one of these).
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("inventory-report.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &chrome,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1600",
        ],
        &format!("{url}#open=first"),
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "a real PNG"
    );
    eprintln!("screenshot: {}", shot.display());
}

#[test]
fn an_empty_inventory_is_still_a_page_and_output_is_stable() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("plain.rs"), "pub fn f() {}\n").expect("write");
    let page = html(dir.path(), &["."]);
    assert!(page.contains("No lock sites found."), "{page}");
    assert!(page.contains("<b>0</b> lock sites"));
    assert!(page.ends_with("</html>\n"));
    assert_eq!(
        html(&root(), &["fixtures/workspace"]),
        html(&root(), &["fixtures/workspace"])
    );

    let Some(chrome) = chromium() else { return };
    let file = dir.path().join("empty.html");
    std::fs::write(&file, &page).expect("write");
    let dom = browse(
        &chrome,
        &["--dump-dom"],
        &format!("file://{}", file.display()),
    );
    assert!(
        dom.contains("0 of 0 sites shown"),
        "the script runs on an empty table:\n{dom}"
    );
}
