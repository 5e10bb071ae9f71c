//! The import incident, reproduced on a real PostgreSQL.
//!
//! ```sh
//! cargo run -p fenced-lock --example import_incident --features postgres
//! cargo run -p fenced-lock --example import_incident --features postgres -- --lines 12000 --json --chart fenced-lock/docs/import-incident.svg
//! ```
//!
//! Two workers import the same file; worker A stalls half-way (a simulated GC
//! pause that also stops its renewal) long enough for its lock to expire. Five
//! ways of protecting the import are run one after the other and compared:
//! rows written, duplicate rows, stale writes attempted and rejected, wall time.
//! Connection: `FENCED_LOCK_PG` or `--pg`, default
//! `host=127.0.0.1 user=postgres dbname=test`. Every run uses fresh tables with
//! a random name and drops them at the end.

mod scenario;

use std::time::Duration;

use scenario::{Config, Variant};

fn usage() -> ! {
    eprintln!(
        "usage: import_incident [--lines N] [--json] [--chart PATH] [--pg CONNINFO]\n\
         \n  --lines N      lines in the imported file (default 12000)\
         \n  --json         print the results as JSON instead of a table\
         \n  --chart PATH   also sweep the stall length for variants 1, 3, 4 and write an SVG chart\
         \n  --pg CONNINFO  libpq connection string (default $FENCED_LOCK_PG or loopback, user postgres, db test)"
    );
    std::process::exit(2)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), scenario::Error> {
    let mut lines = 12_000usize;
    let mut json = false;
    let mut chart: Option<String> = None;
    let mut pg = scenario::default_pg();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--lines" => {
                lines = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n: &usize| n >= 2 && n <= i32::MAX as usize)
                    .unwrap_or_else(|| usage())
            }
            "--json" => json = true,
            "--chart" => chart = Some(args.next().unwrap_or_else(|| usage())),
            "--pg" => pg = args.next().unwrap_or_else(|| usage()),
            _ => usage(),
        }
    }
    let cfg = Config::demo(pg, lines);
    if !json {
        println!(
            "import incident: {} lines, batches of {}, lock TTL {} ms renewed every {} ms, worker A stalls {} ms half-way\n",
            cfg.lines,
            cfg.batch,
            cfg.ttl.as_millis(),
            cfg.renew_every.as_millis(),
            cfg.pause.as_millis()
        );
    }
    let mut outcomes = Vec::new();
    for v in Variant::ALL {
        outcomes.push(scenario::run_variant(&cfg, v).await?);
    }
    let mut sweep = Vec::new();
    if let Some(path) = &chart {
        let pauses: Vec<Duration> = [0.5, 0.8, 1.25, 1.5, 2.0, 3.0]
            .iter()
            .map(|f| cfg.ttl.mul_f64(*f))
            .collect();
        sweep = scenario::sweep(&cfg, &pauses).await?;
        let svg = scenario::chart_svg(&sweep, cfg.lines, cfg.ttl.as_millis() as u64);
        std::fs::write(path, svg)?;
    }
    if json {
        let doc = serde_json::json!({
            "config": cfg,
            "results": outcomes,
            "sweep": sweep,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", scenario::table(&outcomes));
        println!(
            "\nstale try = rows written while the lock table already named a newer holder; \
             rejected = rows refused by the fence (4) or the (file, line) key (5, 5b)"
        );
        if !sweep.is_empty() {
            println!("\nstall sweep (duplicate rows):");
            print!("{}", scenario::table(&sweep));
        }
        if let Some(path) = &chart {
            println!("\nchart written to {path}");
        }
    }
    Ok(())
}
