//! The import incident on a real PostgreSQL (127.0.0.1:5432), small: the shape
//! of the example's table must hold. Scenario code is shared with
//! `examples/import_incident`.
#![cfg(feature = "postgres")]

#[path = "../examples/import_incident/scenario.rs"]
mod scenario;

use std::time::Duration;

use scenario::{Config, Variant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_incident_shape() {
    // Short timings, with more slack than the demo between TTL and stall so a
    // busy CI machine still lets worker B take over during the stall.
    let cfg = Config {
        pg: scenario::default_pg(),
        lines: 400,
        batch: 20,
        ttl: Duration::from_millis(400),
        renew_every: Duration::from_millis(200),
        pause: Duration::from_millis(900),
    };
    let mut outcomes = Vec::new();
    for v in Variant::ALL {
        outcomes.push(scenario::run_variant(&cfg, v).await.expect("scenario run"));
    }
    let table = scenario::table(&outcomes);
    for o in &outcomes {
        assert_eq!(o.missing_lines, 0, "every line imported:\n{table}");
        match o.variant {
            Variant::BlindRenewal | Variant::LongerTtl | Variant::CheckedRenewal => {
                assert!(o.duplicate_rows > 0, "duplicates expected:\n{table}");
                assert!(o.stale_writes_attempted > 0, "{table}");
                assert_eq!(o.stale_writes_rejected, 0, "{table}");
            }
            Variant::Fenced => {
                assert_eq!(o.duplicate_rows, 0, "{table}");
                assert!(
                    o.stale_writes_attempted > 0,
                    "the stale batch was attempted:\n{table}"
                );
                assert_eq!(
                    o.stale_writes_rejected, o.stale_writes_attempted,
                    "every stale write rejected:\n{table}"
                );
            }
            Variant::Idempotent | Variant::IdempotentNoLock => {
                assert_eq!(o.duplicate_rows, 0, "{table}");
                assert_eq!(o.rows_written, cfg.lines as u64, "{table}");
            }
        }
    }
    // Ownership-checked renewal narrows the damage to the batch in flight;
    // blind renewal lets the stale worker write the whole rest of the file.
    let dup = |v| {
        outcomes
            .iter()
            .find(|o| o.variant == v)
            .unwrap()
            .duplicate_rows
    };
    assert_eq!(dup(Variant::CheckedRenewal), cfg.batch as u64, "{table}");
    assert!(
        dup(Variant::BlindRenewal) > dup(Variant::CheckedRenewal),
        "{table}"
    );
    assert!(
        dup(Variant::LongerTtl) > dup(Variant::CheckedRenewal),
        "{table}"
    );
    // The chart renders.
    let svg = scenario::chart_svg(&outcomes, cfg.lines, 400);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
}
