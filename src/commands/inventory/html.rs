//! `lockaudit inventory --format html`: the audit as one self-contained page. Charts are inline
//! SVG drawn here, sorting and filtering a few lines of inline JS; nothing is fetched (the page
//! carries a Content-Security-Policy that forbids it). Every string from the analysed code —
//! keys, function names, paths, snippets, messages — goes through [`esc`]: a key may well hold
//! `<script>`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

use super::{Row, Summary, enum_str, purpose, ttl};
use crate::classify::Purpose;
use crate::diag::FileError;
use crate::lints::{self, Level};
use crate::report::{Finding, Report};
use crate::sites::Fencing;

/// Lines shown above and below a site or its findings.
const CONTEXT: usize = 3;
/// A snippet line longer than this is cut (a minified or generated file).
const LINE_MAX: usize = 240;
/// Source files larger than this are not read for snippets.
const FILE_MAX: u64 = 4 << 20;

pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escaped text with `` `code` `` spans as `<code>` (rule summaries are markdown).
fn esc_md(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in esc(s).split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// A horizontal bar chart. Bars carry `data-label` and `data-count` so a test (or a script)
/// can read the numbers without parsing geometry.
fn bar_chart(
    title: &str,
    id: &str,
    data: &[(String, usize)],
    class: &dyn Fn(&str) -> String,
) -> String {
    let max = data.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let (label_w, bar_w, row_h) = (150.0, 260.0, 26.0);
    let height = row_h * data.len().max(1) as f64 + 8.0;
    let mut s = format!(
        "<figure class=\"chart\" id=\"{id}\"><figcaption>{}</figcaption>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"{}\" \
         viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\">",
        esc(title),
        esc(title),
        w = label_w + bar_w + 50.0
    );
    if data.is_empty() {
        let _ = write!(s, "<text x=\"0\" y=\"18\" class=\"muted\">none</text>");
    }
    for (i, (label, n)) in data.iter().enumerate() {
        let y = i as f64 * row_h + 4.0;
        let w = (bar_w * *n as f64 / max as f64).max(2.0);
        let _ = write!(
            s,
            "<g class=\"bar {cls}\" data-label=\"{l}\" data-count=\"{n}\">\
             <title>{l}: {n}</title>\
             <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{l}</text>\
             <rect x=\"{label_w}\" y=\"{y}\" width=\"{w:.1}\" height=\"{h}\" rx=\"3\"/>\
             <text x=\"{nx:.1}\" y=\"{ty}\" class=\"num\">{n}</text></g>",
            cls = class(label),
            l = esc(label),
            tx = label_w - 8.0,
            ty = y + 14.0,
            h = row_h - 8.0,
            nx = label_w + w + 6.0,
        );
    }
    s.push_str("</svg></figure>");
    s
}

/// Source texts by path: the report's (files with findings) or read from disk.
struct Sources<'a> {
    report: &'a BTreeMap<String, Arc<str>>,
    cwd: &'a Path,
    read: HashMap<String, Option<String>>,
}

impl Sources<'_> {
    fn lines(&mut self, path: &str) -> Option<Vec<&str>> {
        if let Some(t) = self.report.get(path) {
            return Some(t.lines().collect());
        }
        if !self.read.contains_key(path) {
            let p = self.cwd.join(path);
            let text = std::fs::metadata(&p)
                .ok()
                .filter(|m| m.is_file() && m.len() <= FILE_MAX)
                .and_then(|_| std::fs::read_to_string(&p).ok());
            self.read.insert(path.to_string(), text);
        }
        self.read
            .get(path)
            .and_then(Option::as_ref)
            .map(|t| t.lines().collect())
    }
}

/// The snippet around a site: its line marked, each finding's range underlined (1-based
/// character columns, end exclusive, as in findings).
fn snippet(lines: &[&str], site_line: usize, findings: &[&Finding]) -> String {
    let lo = findings
        .iter()
        .map(|f| f.line)
        .chain([site_line])
        .min()
        .unwrap_or(site_line);
    let hi = findings
        .iter()
        .map(|f| f.end_line)
        .chain([site_line])
        .max()
        .unwrap_or(site_line)
        .min(lo + 40);
    let first = lo.saturating_sub(CONTEXT).max(1);
    let last = (hi + CONTEXT).min(lines.len());
    let mut s = String::from("<pre class=\"code\">");
    for n in first..=last {
        let text: Vec<char> = lines[n - 1].trim_end_matches('\r').chars().collect();
        let shown = text.len().min(LINE_MAX);
        // Which characters are under a finding's range; one extra slot for a range at the end.
        let mut marked = vec![false; shown + 1];
        for f in findings {
            if n < f.line || n > f.end_line {
                continue;
            }
            let from = if n == f.line { f.column.max(1) - 1 } else { 0 };
            let to = if n == f.end_line {
                f.end_column.max(1) - 1
            } else {
                shown
            };
            for m in marked.iter_mut().take(to.min(shown)).skip(from) {
                *m = true;
            }
        }
        let class = if n == site_line {
            " class=\"site\""
        } else {
            ""
        };
        let _ = write!(s, "<span{class}><span class=\"ln\">{n:>4}</span> ");
        let mut i = 0;
        while i < shown {
            let m = marked[i];
            let mut j = i;
            while j < shown && marked[j] == m {
                j += 1;
            }
            let part: String = text[i..j].iter().collect();
            if m {
                let _ = write!(s, "<u class=\"hl\">{}</u>", esc(&part));
            } else {
                s.push_str(&esc(&part));
            }
            i = j;
        }
        if text.len() > shown {
            s.push('…');
        }
        s.push_str("</span>\n");
    }
    s.push_str("</pre>");
    s
}

/// The rule summary's first sentence: the table is a glance, the detail shows the rest.
fn first_sentence(s: &str) -> &str {
    s.split_once(". ").map_or(s, |(a, _)| a)
}

fn level_class(l: Level) -> &'static str {
    match l {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Note | Level::Off => "note",
    }
}

fn is_unfenced_correctness(r: &Row) -> bool {
    r.site.purpose == Purpose::Correctness && r.site.fencing == Fencing::None
}

fn location(r: &Row) -> String {
    format!("{}:{}", r.site.path, r.site.line)
}

pub fn render(rows: &[Row], summary: &Summary, report: &Report, cwd: &Path) -> String {
    let mut sources = Sources {
        report: &report.sources,
        cwd,
        read: HashMap::new(),
    };
    let mut at: HashMap<(&str, usize), Vec<&Finding>> = HashMap::new();
    for f in report.active() {
        at.entry((f.path.as_str(), f.line)).or_default().push(f);
    }
    let active: Vec<&Finding> = report.active().collect();

    // Unfenced correctness locks first (they are what can corrupt data), then by place.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| !is_unfenced_correctness(&rows[i]));

    let mut body = String::new();
    let _ = write!(
        body,
        "<header><h1>Lock inventory</h1><p class=\"muted\">lockaudit {} · {} files analysed</p></header>",
        env!("CARGO_PKG_VERSION"),
        report.files_analyzed
    );
    let _ = write!(
        body,
        "<section class=\"cards\">\
         <div class=\"card\" id=\"count-sites\"><b>{}</b> lock sites</div>\
         <div class=\"card bad\" id=\"count-unfenced\"><b>{}</b> correctness locks without fencing</div>\
         <div class=\"card\" id=\"count-findings\"><b>{}</b> findings</div>\
         <div class=\"card\" id=\"count-errors\"><b>{}</b> files not analysed</div></section>",
        summary.sites,
        summary.unfenced_correctness.len(),
        active.len(),
        report.errors.len()
    );

    let purposes: Vec<(String, usize)> = summary
        .by_purpose
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let libraries: Vec<(String, usize)> = summary
        .by_library
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    body.push_str("<section class=\"charts\">");
    body.push_str(&bar_chart(
        "Sites by purpose",
        "chart-purpose",
        &purposes,
        &|l| format!("p-{}", esc(l)),
    ));
    body.push_str(&bar_chart(
        "Sites by library",
        "chart-library",
        &libraries,
        &|_| "lib".into(),
    ));
    body.push_str("</section>");

    body.push_str("<section id=\"unfenced\"><h2>Correctness locks without fencing</h2>");
    let unfenced: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| is_unfenced_correctness(&rows[i]))
        .collect();
    if unfenced.is_empty() {
        body.push_str("<p class=\"muted\">None.</p>");
    } else {
        body.push_str("<ol>");
        for &i in &unfenced {
            let r = &rows[i];
            let _ = write!(
                body,
                "<li><a href=\"#site-{i}\"><code>{}</code></a> in <code>{}</code> ({})</li>",
                esc(&location(r)),
                esc(r.site.function.as_deref().unwrap_or("-")),
                esc(&r.site.library)
            );
        }
        body.push_str("</ol>");
    }
    body.push_str("</section>");

    // Findings by rule, most severe first.
    let mut by_rule: BTreeMap<&str, (Level, usize)> = BTreeMap::new();
    for f in &active {
        let e = by_rule.entry(f.rule).or_insert((f.severity, 0));
        e.0 = e.0.max(f.severity);
        e.1 += 1;
    }
    let mut rules: Vec<(&str, Level, usize)> =
        by_rule.into_iter().map(|(r, (l, n))| (r, l, n)).collect();
    rules.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(b.0)));
    body.push_str("<section id=\"rules\"><h2>Findings by rule</h2>");
    if rules.is_empty() {
        body.push_str("<p class=\"muted\">No findings.</p>");
    } else {
        body.push_str("<table class=\"rules\"><thead><tr><th>rule</th><th>level</th><th>findings</th><th>what it checks</th></tr></thead><tbody>");
        for (rule, level, n) in &rules {
            let _ = write!(
                body,
                "<tr data-rule=\"{r}\"><td><code>{r}</code></td><td><span class=\"lvl {c}\">{c}</span></td><td class=\"n\">{n}</td><td>{}</td></tr>",
                esc_md(first_sentence(lints::summary(rule))),
                r = esc(rule),
                c = level_class(*level),
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("</section>");

    body.push_str("<section id=\"sites\"><h2>Sites</h2><div class=\"filters\">\
        <input id=\"q\" type=\"search\" placeholder=\"Filter: path, function, key, library, rule…\" aria-label=\"Filter sites\">\
        <select id=\"purpose\" aria-label=\"Purpose\"><option value=\"\">all purposes</option>");
    for p in summary.by_purpose.keys() {
        let _ = write!(body, "<option value=\"{p}\">{p}</option>", p = esc(p));
    }
    body.push_str("</select> <span id=\"shown\" class=\"muted\"></span></div>");
    const COLS: [(&str, &str); 10] = [
        ("location", "text"),
        ("function", "text"),
        ("library", "text"),
        ("key", "text"),
        ("ttl", "num"),
        ("purpose", "text"),
        ("fencing", "text"),
        ("renewal", "text"),
        ("release", "text"),
        ("findings", "num"),
    ];
    body.push_str("<table id=\"site-table\"><thead><tr>");
    for (i, (name, kind)) in COLS.iter().enumerate() {
        let _ = write!(
            body,
            "<th data-col=\"{i}\" data-kind=\"{kind}\" tabindex=\"0\" title=\"Sort by {name}\">{name}</th>"
        );
    }
    body.push_str("</tr></thead>");
    for &i in &order {
        let r = &rows[i];
        let s = r.site;
        let findings = at
            .get(&(s.path.as_str(), s.line))
            .cloned()
            .unwrap_or_default();
        let p = purpose(s.purpose);
        let unfenced = is_unfenced_correctness(r);
        let _ = write!(
            body,
            "<tbody id=\"site-{i}\" class=\"site{}\" data-purpose=\"{p}\" data-order=\"{i}\"><tr>",
            if unfenced { " unfenced" } else { "" }
        );
        // Location sorts by path, then line as a number.
        let _ = write!(
            body,
            "<td data-sort=\"{}\t{:010}\"><code>{}</code></td>",
            esc(&s.path),
            s.line,
            // Break long paths after a separator, not inside a name.
            esc(&location(r)).replace('/', "/<wbr>")
        );
        let cell = |v: Option<&str>| match v {
            Some(v) if !v.is_empty() => format!("<td><code>{}</code></td>", esc(v)),
            _ => "<td class=\"muted\">-</td>".to_string(),
        };
        body.push_str(&cell(s.function.as_deref()));
        let via = s
            .via
            .as_deref()
            .map(|v| {
                format!(
                    " <span class=\"muted\" title=\"through the wrapper {v}\">via</span>",
                    v = esc(v)
                )
            })
            .unwrap_or_default();
        let _ = write!(body, "<td>{}{via}</td>", esc(&s.library));
        body.push_str(&cell(s.key.as_deref()));
        match s.ttl_ms {
            Some(ms) => {
                let _ = write!(body, "<td data-sort=\"{ms}\">{}</td>", esc(&ttl(ms)));
            }
            None => body.push_str("<td data-sort=\"-1\" class=\"muted\">-</td>"),
        }
        let _ = write!(
            body,
            "<td><span class=\"tag p-{p}\">{p}</span> <span class=\"muted\">({})</span></td>",
            esc(&enum_str(&s.purpose_source))
        );
        let fencing = enum_str(&s.fencing);
        let fenced_by = s
            .fenced_by
            .as_deref()
            .map(|f| format!(" <span class=\"muted\">by <code>{}</code></span>", esc(f)))
            .unwrap_or_default();
        let _ = write!(
            body,
            "<td class=\"{}\">{}{fenced_by}</td>",
            if unfenced { "bad" } else { "" },
            esc(&fencing)
        );
        let _ = write!(body, "<td>{}</td>", esc(&enum_str(&s.renewal)));
        let _ = write!(body, "<td>{}</td>", esc(&enum_str(&s.release)));
        let _ = write!(body, "<td data-sort=\"{}\">", findings.len());
        for f in &findings {
            let _ = write!(
                body,
                "<span class=\"lvl {}\">{}</span> ",
                level_class(f.severity),
                esc(f.rule)
            );
        }
        body.push_str("</td></tr>");
        // The detail row: snippet and each finding's message, help and rule summary.
        let _ = write!(
            body,
            "<tr class=\"detail\"><td colspan=\"{}\"><details><summary>code{}</summary>",
            COLS.len(),
            if findings.is_empty() {
                String::new()
            } else {
                format!(" and {} finding(s)", findings.len())
            }
        );
        match sources.lines(&s.path) {
            Some(lines) if s.line >= 1 && s.line <= lines.len() => {
                body.push_str(&snippet(&lines, s.line, &findings));
            }
            _ => body.push_str("<p class=\"muted\">Source not available.</p>"),
        }
        for f in &findings {
            let _ = write!(
                body,
                "<div class=\"finding {c}\"><p><span class=\"lvl {c}\">{c}</span> <code>{r}</code> \
                 at {l}:{col}: {m}</p><p><b>Help:</b> {h}</p><p class=\"muted\">{d}</p></div>",
                c = level_class(f.severity),
                r = esc(f.rule),
                l = f.line,
                col = f.column,
                m = esc_md(&f.message),
                h = esc_md(&f.help),
                d = esc_md(lints::summary(f.rule)),
            );
        }
        body.push_str("</details></td></tr></tbody>");
    }
    body.push_str("</table>");
    if rows.is_empty() {
        body.push_str("<p class=\"muted\">No lock sites found.</p>");
    }
    body.push_str("</section>");
    errors_section(&mut body, &report.errors);

    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Lock inventory (lockaudit)</title><style>{CSS}</style></head>\n<body>{body}<script>{JS}</script></body></html>\n"
    )
}

fn errors_section(body: &mut String, errors: &[FileError]) {
    if errors.is_empty() {
        return;
    }
    body.push_str("<section id=\"errors\"><h2>Files not analysed</h2><ul>");
    for e in errors {
        let at = e.line.map(|l| format!(":{l}")).unwrap_or_default();
        let _ = write!(
            body,
            "<li><code>{}{at}</code>: {}</li>",
            esc(&e.path),
            esc(&e.message)
        );
    }
    body.push_str("</ul></section>");
}

const CSS: &str = r#"
:root{--fg:#1d2330;--muted:#6b7280;--line:#e5e7eb;--bg:#fff;--bad:#b42318;--warn:#b54708;--ok:#067647;--acc:#3559e0}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg);margin:0;padding:20px 28px;max-width:1400px}
h1{font-size:22px;margin:0}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
code,pre{font:12.5px/1.45 ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
.muted{color:var(--muted)}.bad{color:var(--bad);font-weight:600}
.cards{display:flex;gap:12px;margin:14px 0;flex-wrap:wrap}.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:24px}.card.bad b{color:var(--bad)}
.charts{display:flex;gap:40px;flex-wrap:wrap}.chart{margin:0}figcaption{font-weight:600;margin-bottom:4px}
.chart text{font-size:12px;fill:var(--fg)}.chart .num{fill:var(--muted)}.chart rect{fill:var(--acc)}
.chart .p-correctness rect{fill:var(--bad)}.chart .p-efficiency rect{fill:var(--ok)}.chart .p-unclassified rect{fill:#98a2b3}
table{border-collapse:collapse;width:100%;font-size:13px}#site-table td code{overflow-wrap:anywhere}#site-table td:first-child{max-width:300px}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#f6f7f9;cursor:pointer;user-select:none;white-space:nowrap}th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
td.n{text-align:right}tbody.site tr.detail td{border-bottom:1px solid #d0d5dd;padding-top:0}tbody.unfenced tr:first-child{background:#fef3f2}
details summary{cursor:pointer;color:var(--acc);font-size:12px}.filters{margin:6px 0 10px;display:flex;gap:8px;align-items:center}
#q{width:340px;padding:5px 8px;border:1px solid #d0d5dd;border-radius:6px}select{padding:4px;border-radius:6px}
.tag{border-radius:10px;padding:0 7px;font-size:12px;background:#eef2f6}.tag.p-correctness{background:#fee4e2;color:var(--bad)}.tag.p-efficiency{background:#dcfae6;color:var(--ok)}
.lvl{border-radius:4px;padding:0 5px;font-size:12px;white-space:nowrap}.lvl.error{background:#fee4e2;color:var(--bad)}.lvl.warning{background:#fef0c7;color:var(--warn)}.lvl.note{background:#eef2f6}
pre.code{background:#f8f9fb;border:1px solid var(--line);border-radius:6px;padding:8px;overflow-x:auto;margin:6px 0}
pre.code .site{background:#fff6d6;display:inline-block;min-width:100%}.ln{color:#98a2b3;user-select:none}
u.hl{text-decoration:underline wavy var(--bad);text-underline-offset:3px}
.finding p{margin:3px 0}.finding{border-left:3px solid var(--line);padding-left:8px;margin:6px 0}.finding.error{border-color:var(--bad)}.finding.warning{border-color:var(--warn)}
"#;

/// Sorting (click or Enter on a header), filtering (text and purpose), and the same state from
/// the URL fragment (`#q=…&purpose=…&sort=<col>&desc=1&open=first`) so a page can be linked,
/// and tested, in a given view.
const JS: &str = r#"
(function(){
  var table=document.getElementById('site-table');
  var bodies=Array.prototype.slice.call(table.tBodies);
  var q=document.getElementById('q'), sel=document.getElementById('purpose'), shown=document.getElementById('shown');
  var heads=table.tHead.rows[0].cells, sortCol=-1, desc=false;
  function key(tb,c){var td=tb.rows[0].cells[c];return td.hasAttribute('data-sort')?td.getAttribute('data-sort'):td.textContent;}
  function sort(c,d){
    sortCol=c;desc=d;var num=heads[c].getAttribute('data-kind')==='num';
    bodies.sort(function(a,b){
      var x=key(a,c),y=key(b,c),r=num?(parseFloat(x)-parseFloat(y)):x.localeCompare(y);
      if(r===0)r=a.getAttribute('data-order')-b.getAttribute('data-order');
      return d?-r:r;
    });
    bodies.forEach(function(tb){table.appendChild(tb);});
    for(var i=0;i<heads.length;i++){if(i===c)heads[i].setAttribute('aria-sort',d?'descending':'ascending');else heads[i].removeAttribute('aria-sort');}
  }
  function filter(){
    var t=q.value.trim().toLowerCase(),p=sel.value,n=0;
    bodies.forEach(function(tb){
      var ok=(!p||tb.getAttribute('data-purpose')===p)&&(!t||tb.rows[0].textContent.toLowerCase().indexOf(t)>=0);
      tb.hidden=!ok;if(ok)n++;
    });
    shown.textContent=n+' of '+bodies.length+' sites shown';
  }
  for(var i=0;i<heads.length;i++)(function(c){
    function go(){sort(c,sortCol===c?!desc:false);}
    heads[c].addEventListener('click',go);
    heads[c].addEventListener('keydown',function(e){if(e.key==='Enter')go();});
  })(i);
  q.addEventListener('input',filter);sel.addEventListener('change',filter);
  var h={};location.hash.replace(/^#/,'').split('&').forEach(function(kv){var i=kv.indexOf('=');if(i>0)h[decodeURIComponent(kv.slice(0,i))]=decodeURIComponent(kv.slice(i+1));});
  if(h.q)q.value=h.q;if(h.purpose)sel.value=h.purpose;
  if(h.sort){for(var j=0;j<heads.length;j++)if(heads[j].textContent===h.sort)sort(j,h.desc==='1');}
  filter();
  if(h.open==='first'){var v=bodies.filter(function(tb){return !tb.hidden;})[0];if(v)v.querySelector('details').open=true;}
})();
"#;
