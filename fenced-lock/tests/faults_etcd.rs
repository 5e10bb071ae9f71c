//! Fault injection on etcd: randomized schedules on a single node, and the
//! leader of a 3-member cluster killed (SIGKILL by PID) while leases are held.
//! Every server is started by the test on free loopback ports.
#![cfg(all(feature = "etcd", feature = "memory"))]

#[path = "support/etcd_cluster.rs"]
mod etcd_cluster;
#[path = "support/etcd_server.rs"]
mod etcd_server;
#[path = "support/faults.rs"]
mod faults;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_cluster::EtcdCluster;
use etcd_server::EtcdServer;
use faults::{Checker, Hold, Schedule};
use fenced_lock::{EtcdBackend, EtcdOptions, LockBackend, LockError, MemoryFence};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_schedules_etcd() {
    let server = EtcdServer::start().await;
    // etcd lease TTLs are whole seconds: the schedule is slower, so fewer
    // acquisitions per trial and more trials at once.
    let schedule = Schedule {
        trials: 200,
        concurrency: 50,
        workers: 3,
        rounds: 1,
        writes: 2,
        ttl: Duration::from_secs(1),
        p_long_pause: 0.3,
        p_renew: 0.5,
    };
    let mut backends = Vec::new();
    for _ in 0..schedule.workers {
        backends.push(
            EtcdBackend::connect_with(
                &[server.endpoint()],
                EtcdOptions::default().prefix("fl-fault/"),
            )
            .await
            .unwrap(),
        );
    }
    // etcd has no fence of its own in this crate: the resource is a MemoryFence.
    let fence = MemoryFence::new();
    let seed = faults::seed();
    let (line, violations) =
        faults::randomized("etcd", backends, fence, "job-", schedule, seed).await;
    assert!(violations.is_empty(), "{line}\n{violations:#?}");
    assert!(line.contains(" violations=0 "), "{line}");
    assert!(
        !line.contains(" rejected=0 "),
        "no stale write was tried: {line}"
    );
}

/// One holder in the failover test: acquire, hold for a random time renewing
/// every 300 ms and writing through the fence, release; until `stop`.
async fn holder(
    b: EtcdBackend,
    fence: MemoryFence,
    checker: Checker,
    stop: Instant,
    seed: u64,
    holding: Arc<AtomicUsize>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let ttl = Duration::from_secs(1);
    while Instant::now() < stop {
        let sent = Instant::now();
        let mut lease = match b.acquire("leader-kill", ttl, Duration::from_secs(2)).await {
            Ok(l) => l,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let granted = Instant::now();
        holding.fetch_add(1, Ordering::SeqCst);
        let token = lease.token();
        let hold_for = Duration::from_millis(rng.random_range(300..1500));
        let mut end = None;
        while granted.elapsed() < hold_for {
            tokio::time::sleep(Duration::from_millis(300)).await;
            match b.renew(&mut lease).await {
                Ok(()) => {}
                Err(LockError::LockLost { .. }) => {
                    end = Some(Instant::now());
                    break;
                }
                // Unavailable during the election: keep trying until valid_until.
                Err(_) if !lease.is_expired() => {}
                Err(_) => {
                    end = Some(Instant::now());
                    break;
                }
            }
            checker.write(&fence, "leader-kill", lease.ticket()).await;
        }
        holding.fetch_sub(1, Ordering::SeqCst);
        let release_start = Instant::now();
        let valid_until = lease.valid_until();
        let _ = b.release(lease).await;
        checker.hold(Hold {
            key: "leader-kill".into(),
            token: token.get(),
            sent,
            granted,
            end: end.unwrap_or(release_start).min(valid_until),
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_while_leases_held() {
    let mut cluster = EtcdCluster::start(3).await;
    let endpoints = cluster.endpoints();
    let checker = Checker::default();
    let fence = MemoryFence::new();
    let seed = faults::seed();
    let started = Instant::now();
    let stop = started + Duration::from_secs(9);
    let holding = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..3u64 {
        let b = EtcdBackend::connect_with(
            &endpoints,
            EtcdOptions::default()
                .prefix("fl-fault/")
                .op_timeout(Duration::from_secs(2)),
        )
        .await
        .unwrap();
        tasks.push(tokio::spawn(holder(
            b,
            fence.clone(),
            checker.clone(),
            stop,
            seed ^ w,
            holding.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let leader = cluster.leader().await.expect("a leader");
    // Kill while a lease is held (holds are long, gaps between them short).
    let wait_held = Instant::now() + Duration::from_secs(3);
    while holding.load(Ordering::SeqCst) == 0 && Instant::now() < wait_held {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let killed_at = Instant::now();
    let pid = cluster.kill(leader);
    for t in tasks {
        t.await.unwrap();
    }
    let violations = checker.finish();
    let holds = checker.holds();
    let held_at_kill = holds
        .iter()
        .filter(|h| h.granted <= killed_at && h.end >= killed_at)
        .count();
    let mut tokens: Vec<u64> = holds.iter().map(|h| h.token).collect();
    let after_kill = holds.iter().filter(|h| h.granted > killed_at).count();
    let new_leader = cluster.leader().await;
    let line = faults::report(format!(
        "fault-suite etcd leader-kill: seed={seed} killed member m{leader} (pid {pid}), new leader {new_leader:?}, \
         acquisitions={} held_at_kill={held_at_kill} acquisitions_after_kill={after_kill} admitted={} rejected={} violations={} elapsed={:.1}s",
        holds.len(),
        checker.admitted(),
        checker.rejected(),
        violations.len(),
        started.elapsed().as_secs_f64()
    ));
    assert!(violations.is_empty(), "{line}\n{violations:#?}");
    assert!(
        held_at_kill >= 1,
        "a lease was held when the leader died: {line}"
    );
    assert!(
        after_kill >= 1,
        "the cluster grants leases after failover: {line}"
    );
    assert!(new_leader.is_some_and(|l| l != leader), "{line}");
    let n = tokens.len();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), n, "no token handed out twice: {line}");
}
