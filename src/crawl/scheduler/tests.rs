use super::*;

fn policy() -> SchedulePolicy {
    SchedulePolicy {
        min_interval: Duration::from_secs(60),
        challenge_interval: Duration::from_secs(6 * 3600),
        retry_base: Duration::from_secs(300),
        retry_max: Duration::from_secs(24 * 3600),
        stale_after: Duration::from_secs(6 * 3600),
        drop_after: Duration::from_secs(72 * 3600),
        jitter: 0.1,
        max_domains: 100_000,
        evict_after_failures: 10,
    }
}

#[test]
fn success_comes_back_at_the_records_ttl_within_the_bounds() {
    let p = policy();
    assert_eq!(p.success_interval(300), 300);
    assert_eq!(p.success_interval(86_400), 3600, "capped at an hour");
    assert_eq!(p.success_interval(5), 60, "no sooner than min_recrawl");
}

#[test]
fn failures_back_off_exponentially_up_to_the_cap_and_never_below_what_the_answer_said() {
    let p = policy();
    let backoff: Vec<u64> = (1..=10)
        .map(|n| p.failure_interval(n, None, None))
        .collect();
    assert_eq!(
        backoff,
        [300, 600, 1200, 2400, 4800, 9600, 19_200, 38_400, 76_800, 86_400]
    );
    assert_eq!(p.failure_interval(1_000, None, None), 86_400);
    assert_eq!(
        p.failure_interval(1, Some(3600), None),
        3600,
        "NXDOMAIN's SOA minimum"
    );
    assert_eq!(p.failure_interval(1, Some(60), None), 300);
    assert_eq!(p.failure_interval(2, None, Some(7200)), 7200, "Retry-After");
}

#[test]
fn agents_go_stale_then_dropped_as_confirmations_age() {
    let p = policy();
    assert_eq!(p.state_at(1000, 1000), FreshState::Fresh);
    assert_eq!(p.state_at(1000, 1000 + 6 * 3600 - 1), FreshState::Fresh);
    assert_eq!(p.state_at(1000, 1000 + 6 * 3600), FreshState::Stale);
    assert_eq!(p.state_at(1000, 1000 + 72 * 3600), FreshState::Dropped);
    assert_eq!(p.state_at(1000, 10), FreshState::Fresh, "a clock set back");
}

#[test]
fn jitter_spreads_over_the_next_ten_percent_never_sooner() {
    let p = policy();
    let seen: Vec<u64> = (0..2000).map(|_| p.jittered(1000)).collect();
    assert!(seen.iter().all(|s| (1000..=1100).contains(s)));
    assert!(seen.iter().any(|s| *s < 1020) && seen.iter().any(|s| *s > 1080));
    assert_eq!(p.jittered(5), 5, "nothing to spread");
}

struct Rig {
    _dir: tempfile::TempDir,
    scheduler: Scheduler,
    clock: Arc<ManualClock>,
    issuer: Issuer,
    crawler: Crawler,
}

async fn rig_with(max_domains: usize, evict_after_failures: u32) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = crate::store::Store::open(&dir.path().join("store"), 8 << 20).unwrap();
    let key = Arc::new(crate::identity::generate());
    let issuer = Issuer::new(store, key.clone(), Duration::from_secs(3600));
    // Never asked: these tests hand the scheduler reports.
    let options = crate::crawl::CrawlerOptions {
        resolvers: vec!["127.0.0.1:9".parse().unwrap()],
        ..Default::default()
    };
    let crawler = Crawler::new(options, key, "verifier".into()).unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    let scheduler = Scheduler::load(
        crawler.clone(),
        issuer.clone(),
        SchedulePolicy {
            max_domains,
            evict_after_failures,
            ..policy()
        },
        clock.clone(),
    )
    .await
    .unwrap();
    Rig {
        _dir: dir,
        scheduler,
        clock,
        issuer,
        crawler,
    }
}

fn report(domain: &str, ok: bool) -> CrawlReport {
    let id = crate::identity::AgentId::of_domain(domain).to_string();
    let mut r = super::super::report::Run::new(domain, id, DocumentFormat::Adp).report;
    r.stored = ok;
    if !ok {
        r.reasons.push(crate::trust::Reason::ConnectFailed);
    }
    r
}

impl Rig {
    async fn visit(&self, domain: &str, ok: bool) {
        self.clock.advance(Duration::from_secs(60));
        self.scheduler
            .observe(domain, &[report(domain, ok)])
            .await
            .unwrap();
    }

    fn scheduled(&self) -> Vec<String> {
        let mut d: Vec<String> = self.scheduler.domains().keys().cloned().collect();
        d.sort();
        d
    }
}

#[tokio::test]
async fn a_domain_that_keeps_failing_leaves_the_schedule_and_its_agents_are_dropped() {
    let rig = rig_with(100, 3).await;
    rig.visit("a.test", true).await;
    rig.visit("a.test", false).await;
    rig.visit("a.test", false).await;
    assert_eq!(rig.scheduler.state("a.test").unwrap().failures, 2);
    assert_eq!(rig.scheduler.counts().left_failing, 0);
    rig.visit("a.test", false).await;
    assert_eq!(
        rig.scheduler.state("a.test"),
        None,
        "the third failure in a row"
    );
    let counts = rig.scheduler.counts();
    assert_eq!((counts.domains, counts.left_failing), (0, 1));
    let store = rig.issuer.store();
    let fresh = store.freshness("agent:a.test").await.unwrap().unwrap();
    assert_eq!(fresh.state, FreshState::Dropped);
    // Out of the store's tree: a departed domain costs no disk.
    assert!(store.schedules().await.unwrap().is_empty());
    // Gone after a restart too.
    let again = Scheduler::load(
        rig.crawler.clone(),
        rig.issuer.clone(),
        rig.scheduler.policy(),
        rig.clock.clone(),
    )
    .await
    .unwrap();
    assert_eq!(again.state("a.test"), None);
    assert!(again.is_empty());
    // A crawl that asks for it again schedules it again.
    rig.visit("a.test", true).await;
    assert_eq!(rig.scheduler.state("a.test").unwrap().failures, 0);
}

#[tokio::test]
async fn a_full_schedule_evicts_the_domain_failing_most_and_never_one_that_answers() {
    let rig = rig_with(3, 10).await;
    for d in ["a.test", "b.test", "c.test"] {
        rig.visit(d, true).await;
    }
    // Full of domains that answer: a new one is not scheduled, however
    // well it answers.
    rig.visit("new1.test", true).await;
    rig.visit("new2.test", false).await;
    assert_eq!(rig.scheduled(), ["a.test", "b.test", "c.test"]);
    assert_eq!(rig.scheduler.counts().refused, 2);
    // b fails once, c twice: c goes first.
    rig.visit("b.test", false).await;
    rig.visit("c.test", false).await;
    rig.visit("c.test", false).await;
    rig.visit("d.test", true).await;
    assert_eq!(rig.scheduled(), ["a.test", "b.test", "d.test"]);
    let fresh = rig.issuer.store().freshness("agent:c.test").await.unwrap();
    assert_eq!(fresh.map(|f| f.state), Some(FreshState::Dropped));
    // A new domain that failed takes the place of one that failed as
    // often, never of one that failed less.
    rig.visit("e.test", false).await;
    assert_eq!(rig.scheduled(), ["a.test", "d.test", "e.test"]);
    rig.visit("f.test", false).await;
    rig.visit("f.test", false).await;
    assert_eq!(rig.scheduled(), ["a.test", "d.test", "f.test"]);
    let counts = rig.scheduler.counts();
    assert_eq!(
        (
            counts.domains,
            counts.capacity,
            counts.evicted,
            counts.refused
        ),
        (3, 3, 3, 2)
    );
    // A domain already held is never refused, full or not.
    rig.visit("a.test", false).await;
    assert_eq!(rig.scheduled(), ["a.test", "d.test", "f.test"]);
}

#[tokio::test]
async fn ties_go_to_the_oldest_confirmation_and_a_lowered_limit_trims_at_load() {
    let rig = rig_with(3, 10).await;
    for d in ["old.test", "mid.test", "new.test"] {
        rig.visit(d, true).await;
    }
    for d in ["old.test", "mid.test", "new.test"] {
        rig.visit(d, false).await;
    }
    rig.visit("x.test", false).await;
    assert_eq!(rig.scheduled(), ["mid.test", "new.test", "x.test"]);
    // Restarted with room for two: the one that answers stays, and of
    // the two that failed once, the one confirmed more lately.
    rig.visit("mid.test", true).await;
    let smaller = Scheduler::load(
        rig.crawler.clone(),
        rig.issuer.clone(),
        SchedulePolicy {
            max_domains: 2,
            ..rig.scheduler.policy()
        },
        rig.clock.clone(),
    )
    .await
    .unwrap();
    let mut kept: Vec<String> = smaller.domains().keys().cloned().collect();
    kept.sort();
    // new and x failed once each; x, never confirmed, is the older.
    assert_eq!(kept, ["mid.test", "new.test"]);
    assert_eq!(smaller.counts().capacity, 2);
}
