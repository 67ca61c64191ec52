//! Trust that holds over time, against the
//! testbed's real DNS, HTTPS and WebSocket servers on loopback: the
//! recrawl scheduler's conditional revisits (ETag, 304), backoff, stale
//! and dropped agents, negative caching of NXDOMAIN, `Retry-After`, the
//! state it keeps across a restart, and the crawler's per-host limits and
//! User-Agent. The schedule runs on a [`ManualClock`]: days pass with no
//! waiting.

use std::sync::Arc;
use std::time::Duration;

use agentmesh::crawl::polite::Politeness;
use agentmesh::crawl::scheduler::{Clock, ManualClock, SchedulePolicy, Scheduler};
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::record::RecordBody;
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::store::{FreshState, Store};
use agentmesh::testbed::{Behaviour, Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::{Reason, TrustLevel};

struct Rig {
    testbed: Testbed,
    dir: tempfile::TempDir,
    ca_file: std::path::PathBuf,
    store: Store,
    issuer: Issuer,
    key: Arc<ed25519_dalek::SigningKey>,
    clock: Arc<ManualClock>,
}

/// The schedule of these tests: minutes where the defaults say hours.
fn policy() -> SchedulePolicy {
    SchedulePolicy {
        min_interval: Duration::from_secs(60),
        challenge_interval: Duration::from_secs(3600),
        retry_base: Duration::from_secs(60),
        retry_max: Duration::from_secs(3600),
        stale_after: Duration::from_secs(600),
        drop_after: Duration::from_secs(1800),
        jitter: 0.1,
        max_domains: 100_000,
        evict_after_failures: 10,
    }
}

async fn rig(config: PopulationConfig) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let testbed = Testbed::start(Population::generate(&config), TestbedOptions::default())
        .await
        .expect("the testbed starts");
    let ca_file = dir.path().join("ca.pem");
    testbed.write_ca(&ca_file).unwrap();
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    let key = Arc::new(agentmesh::identity::generate());
    Rig {
        testbed,
        ca_file,
        issuer: Issuer::new(store.clone(), key.clone(), Duration::from_secs(24 * 3600)),
        store,
        key,
        dir,
        clock: Arc::new(ManualClock::new(agentmesh::record::unix_now())),
    }
}

impl Rig {
    fn crawler(&self, politeness: Politeness, contact: Option<&str>) -> Crawler {
        self.crawler_on(
            politeness,
            contact,
            AllowedPorts::new([self.testbed.https_port()]),
        )
    }

    fn crawler_on(
        &self,
        politeness: Politeness,
        contact: Option<&str>,
        allowed_ports: AllowedPorts,
    ) -> Crawler {
        let options = CrawlerOptions {
            resolvers: vec![self.testbed.dns_addr()],
            ca_files: vec![self.ca_file.clone()],
            policy: AddressPolicy {
                allow_private: true,
            },
            fetch_timeout: Duration::from_secs(3),
            challenge_timeout: Duration::from_secs(2),
            politeness,
            contact: contact.map(str::to_owned),
            allowed_ports,
            ..CrawlerOptions::default()
        };
        let verifier = agentmesh::identity::peer_id_of(&self.key);
        Crawler::new(options, self.key.clone(), verifier).expect("the crawler builds")
    }

    async fn scheduler(&self) -> Scheduler {
        let quick = Politeness {
            per_host_concurrency: 2,
            per_host_interval: Duration::from_millis(1),
            per_host_burst: 1,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        };
        Scheduler::load(
            self.crawler(quick, None),
            self.issuer.clone(),
            policy(),
            self.clock.clone(),
        )
        .await
        .expect("the schedule loads")
    }

    fn domain(&self, b: Behaviour) -> String {
        self.testbed
            .population()
            .domain_of(b)
            .expect("the population has it")
            .to_owned()
    }

    fn healthy(&self, n: usize) -> Vec<String> {
        self.testbed.population().agents()[..n]
            .iter()
            .map(|a| a.domain.clone())
            .collect()
    }

    async fn seq_of(&self, domain: &str) -> u64 {
        let id = format!("agent:{domain}");
        match self
            .store
            .get(&id)
            .await
            .unwrap()
            .expect("a record is held")
            .body
        {
            RecordBody::Descriptor(d) => d.seq,
            RecordBody::Tombstone(_) => panic!("{id} is a tombstone"),
        }
    }

    /// The agent ids a default filter search answers, and with
    /// `include_stale`.
    async fn listed(&self) -> (Vec<String>, Vec<String>) {
        let registry = Registry::new(self.issuer.clone());
        let mut query = SearchQuery {
            limit: 100,
            ..SearchQuery::default()
        };
        let ids = |page: agentmesh::registry::Page| {
            page.items.into_iter().map(|s| s.id).collect::<Vec<_>>()
        };
        let default = ids(registry.search_local(&query).await.unwrap());
        query.filter.include_stale = true;
        (default, ids(registry.search_local(&query).await.unwrap()))
    }
}

/// Seconds from the clock's now until `domain`'s next visit.
fn wait_of(scheduler: &Scheduler, clock: &ManualClock, domain: &str) -> u64 {
    let state = scheduler.state(domain).expect("the domain is scheduled");
    state.next_at - clock.now()
}

#[tokio::test]
async fn a_revisit_asks_with_the_etag_and_a_304_refreshes_without_a_new_record_or_challenge() {
    let rig = rig(PopulationConfig::healthy(71, 3)).await;
    let scheduler = rig.scheduler().await;
    let domains = rig.healthy(3);
    for d in &domains {
        let reports = scheduler.visit(d).await.unwrap();
        assert!(reports[0].stored, "{d}: {:?}", reports[0].reasons);
        assert_eq!(reports[0].level(), TrustLevel::KeyVerified);
        assert!(!reports[0].visit.not_modified, "a first visit fetches");
        // TTL 300 and max-age 300: back in 300 s, up to 10 % later.
        let wait = wait_of(&scheduler, &rig.clock, d);
        assert!((300..=330).contains(&wait), "{d}: next visit in {wait} s");
    }
    assert!(scheduler.due(100).is_empty(), "nothing is due yet");
    let seqs: Vec<u64> =
        futures_util::future::join_all(domains.iter().map(|d| rig.seq_of(d))).await;

    rig.clock.advance(Duration::from_secs(331));
    let mut due = scheduler.due(100);
    due.sort();
    let mut expected = domains.clone();
    expected.sort();
    assert_eq!(due, expected);
    let round = scheduler.run_due().await.unwrap();
    assert_eq!((round.visited, round.not_modified, round.failed), (3, 3, 0));
    for (d, seq) in domains.iter().zip(&seqs) {
        let counts = rig.testbed.site_counts(d).unwrap();
        assert_eq!(counts.well_known, 2, "{d}");
        assert_eq!(counts.not_modified, 1, "{d}: the revisit was answered 304");
        assert_eq!(
            counts.chat, 1,
            "{d}: the challenge is not due, so not re-run"
        );
        assert_eq!(rig.seq_of(d).await, *seq, "{d}: a 304 signs no new record");
        let f = rig
            .store
            .freshness(&format!("agent:{d}"))
            .await
            .unwrap()
            .expect("the agent has a freshness");
        assert_eq!(f.state, FreshState::Fresh);
        assert_eq!(f.checked_at, rig.clock.now(), "the 304 refreshed it");
        assert_eq!(f.endpoint_ok, Some(true));
    }

    // After the challenge interval, an unchanged document is challenged
    // again, and the new proof is signed into a new record.
    rig.clock.advance(Duration::from_secs(3600));
    let round = scheduler.run_due().await.unwrap();
    assert_eq!((round.visited, round.not_modified), (3, 3));
    for (d, seq) in domains.iter().zip(&seqs) {
        let counts = rig.testbed.site_counts(d).unwrap();
        assert_eq!((counts.well_known, counts.not_modified), (3, 2), "{d}");
        assert_eq!(counts.chat, 2, "{d}: the challenge was due");
        assert!(rig.seq_of(d).await > *seq, "{d}: a new proof, a new record");
        let state = scheduler.state(d).unwrap();
        assert_eq!(state.seen_at, Some(rig.clock.now()));
    }
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn failures_back_off_go_stale_then_dropped_and_a_recovery_brings_the_agent_back() {
    let rig = rig(PopulationConfig::healthy(72, 1)).await;
    let scheduler = rig.scheduler().await;
    let d = rig.healthy(1).remove(0);
    let id = format!("agent:{d}");
    assert!(scheduler.visit(&d).await.unwrap()[0].stored);
    let confirmed = rig.clock.now();
    let site = rig.testbed.site(&d).unwrap().clone();
    site.refuse_with(Some((500, None)));

    // Each failure doubles the wait: 60, 120, 240 s (up to 10 % more).
    rig.clock.advance(Duration::from_secs(331));
    let mut waits = Vec::new();
    for _ in 0..3 {
        let round = scheduler.run_due().await.unwrap();
        assert_eq!((round.visited, round.failed), (1, 1));
        let state = scheduler.state(&d).unwrap();
        assert_eq!(state.last_reason.as_deref(), Some("http_status"));
        let wait = wait_of(&scheduler, &rig.clock, &d);
        waits.push((state.failures, wait));
        rig.clock.advance(Duration::from_secs(wait));
    }
    for (failures, wait) in &waits {
        let base = 60u64 << (failures - 1);
        assert!(
            (base..=base * 11 / 10).contains(wait),
            "failure {failures}: waited {wait} s, expected about {base} s"
        );
    }
    assert_eq!(waits.iter().map(|w| w.0).collect::<Vec<_>>(), [1, 2, 3]);

    // Unconfirmed for 10 minutes: stale, still listed.
    rig.clock.advance(Duration::from_secs(
        600 - (rig.clock.now() - confirmed).min(600),
    ));
    scheduler.run_due().await.unwrap();
    let f = rig.store.freshness(&id).await.unwrap().unwrap();
    assert_eq!(f.state, FreshState::Stale);
    assert_eq!(f.checked_at, confirmed, "a failure confirms nothing");
    let (listed, _) = rig.listed().await;
    assert_eq!(
        listed,
        std::slice::from_ref(&id),
        "a stale agent is still answered"
    );

    // Unconfirmed for 30 minutes: dropped from default results only.
    rig.clock.advance(Duration::from_secs(1800));
    scheduler.run_due().await.unwrap();
    assert_eq!(
        rig.store.freshness(&id).await.unwrap().unwrap().state,
        FreshState::Dropped
    );
    let (listed, with_stale) = rig.listed().await;
    assert!(listed.is_empty(), "a dropped agent leaves default results");
    assert_eq!(
        with_stale,
        std::slice::from_ref(&id),
        "include_stale still shows it"
    );
    assert!(
        rig.store.get(&id).await.unwrap().is_some(),
        "and its record is kept"
    );

    // It answers again: fresh, and listed.
    site.refuse_with(None);
    rig.clock.advance(Duration::from_secs(3600));
    let round = scheduler.run_due().await.unwrap();
    assert_eq!((round.visited, round.failed), (1, 0));
    assert_eq!(scheduler.state(&d).unwrap().failures, 0);
    assert_eq!(
        rig.store.freshness(&id).await.unwrap().unwrap().state,
        FreshState::Fresh
    );
    assert_eq!(rig.listed().await.0, [id]);
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn nxdomain_is_not_asked_again_before_the_soa_minimum() {
    let rig = rig(PopulationConfig {
        misbehaving: vec![Behaviour::TxtMissing],
        ..PopulationConfig::healthy(73, 1)
    })
    .await;
    let mut policy = policy();
    policy.retry_base = Duration::from_secs(1);
    let quick = Politeness {
        per_host_concurrency: 2,
        per_host_interval: Duration::from_millis(1),
        per_host_burst: 1,
        per_address_concurrency: 64,
        per_address_interval: Duration::ZERO,
        per_address_burst: 1,
    };
    let scheduler = Scheduler::load(
        rig.crawler(quick, None),
        rig.issuer.clone(),
        policy,
        rig.clock.clone(),
    )
    .await
    .unwrap();
    let missing = rig.domain(Behaviour::TxtMissing);
    let reports = scheduler.visit(&missing).await.unwrap();
    assert_eq!(reports[0].reasons, [Reason::TxtMissing]);
    // The testbed's SOA minimum (and negative TTL) is 60 s.
    assert_eq!(
        reports[0].visit.negative_ttl_secs,
        Some(agentmesh::testbed::dns::NEGATIVE_TTL)
    );
    let wait = wait_of(&scheduler, &rig.clock, &missing);
    assert!(
        (54..=66).contains(&wait),
        "NXDOMAIN waited {wait} s, not the 1 s backoff"
    );

    // A failure without a negative answer comes back on the backoff.
    let d = rig.healthy(1).remove(0);
    rig.testbed.site(&d).unwrap().refuse_with(Some((500, None)));
    scheduler.visit(&d).await.unwrap();
    assert_eq!(wait_of(&scheduler, &rig.clock, &d), 1);
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn retry_after_holds_the_host_and_the_next_visit() {
    let rig = rig(PopulationConfig::healthy(74, 1)).await;
    let scheduler = rig.scheduler().await;
    let d = rig.healthy(1).remove(0);
    let site = rig.testbed.site(&d).unwrap().clone();
    site.refuse_with(Some((429, Some(120))));
    let reports = scheduler.visit(&d).await.unwrap();
    assert_eq!(reports[0].reasons, [Reason::HttpThrottled]);
    assert_eq!(reports[0].visit.retry_after_secs, Some(120));
    let wait = wait_of(&scheduler, &rig.clock, &d);
    assert!(
        (108..=132).contains(&wait),
        "waited {wait} s, not the publisher's 120 s"
    );

    // While the hold lasts, nothing is asked of the host at all.
    let asked = site.counts().well_known;
    site.refuse_with(None);
    let again = scheduler.visit(&d).await.unwrap();
    assert_eq!(again[0].reasons, [Reason::HostBackoff]);
    assert_eq!(
        site.counts().well_known,
        asked,
        "the held host was not asked"
    );
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn the_schedule_and_freshness_survive_a_restart() {
    let rig = rig(PopulationConfig::healthy(75, 2)).await;
    let domains = rig.healthy(2);
    let before = {
        let scheduler = rig.scheduler().await;
        for d in &domains {
            assert!(scheduler.visit(d).await.unwrap()[0].stored);
        }
        rig.store.flush().await.unwrap();
        domains
            .iter()
            .map(|d| scheduler.state(d).unwrap())
            .collect::<Vec<_>>()
    };
    let freshness = rig
        .store
        .freshness(&format!("agent:{}", domains[0]))
        .await
        .unwrap();
    let Rig {
        testbed,
        dir,
        ca_file,
        store,
        issuer,
        key,
        clock,
    } = rig;
    drop(issuer);
    store.close().await.expect("the store closes");
    // The same data directory, opened again.
    let store = Store::open(&dir.path().join("store"), 16 << 20).unwrap();
    let rig = Rig {
        issuer: Issuer::new(store.clone(), key.clone(), Duration::from_secs(24 * 3600)),
        store,
        testbed,
        dir,
        ca_file,
        key,
        clock,
    };
    let scheduler = rig.scheduler().await;
    assert_eq!(scheduler.len(), 2);
    for (d, state) in domains.iter().zip(&before) {
        assert_eq!(scheduler.state(d).as_ref(), Some(state), "{d}");
    }
    assert_eq!(
        rig.store
            .freshness(&format!("agent:{}", domains[0]))
            .await
            .unwrap(),
        freshness
    );
    // And the restarted schedule revisits conditionally.
    rig.clock.advance(Duration::from_secs(331));
    let round = scheduler.run_due().await.unwrap();
    assert_eq!((round.visited, round.not_modified), (2, 2));
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn one_host_is_asked_at_its_rate_with_a_user_agent_naming_agentmesh() {
    let rig = rig(PopulationConfig::healthy(76, 1)).await;
    let interval = Duration::from_millis(300);
    let crawler = rig.crawler(
        Politeness {
            per_host_concurrency: 1,
            per_host_interval: interval,
            per_host_burst: 1,
            per_address_concurrency: 64,
            per_address_interval: Duration::ZERO,
            per_address_burst: 1,
        },
        Some("https://ops.example/crawler"),
    );
    let d = rig.healthy(1).remove(0);
    // Four crawls of one domain at once: each fetches the document and
    // opens a challenge, eight requests to one host.
    let reports = futures_util::future::join_all((0..4).map(|_| crawler.crawl(&d))).await;
    for r in &reports {
        assert_eq!(
            r.report.level(),
            TrustLevel::KeyVerified,
            "{:?}",
            r.report.reasons
        );
    }
    let mut requests = rig.testbed.site(&d).unwrap().requests();
    assert_eq!(requests.len(), 8);
    requests.sort_by_key(|r| r.at);
    for pair in requests.windows(2) {
        let gap = pair[1].at - pair[0].at;
        // The limiter starts them 300 ms apart; loopback delivery may
        // shift one arrival by a little.
        assert!(
            gap >= interval - Duration::from_millis(50),
            "two requests to one host {gap:?} apart"
        );
    }
    let expected = format!(
        "agentmesh/{} (agent discovery crawler; +https://ops.example/crawler)",
        env!("CARGO_PKG_VERSION")
    );
    for r in &requests {
        assert_eq!(r.user_agent, expected, "{} request", r.kind);
    }
    assert!(requests.iter().any(|r| r.kind == "chat"));
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn an_agent_in_maintenance_keeps_its_proof_and_stays_listed_marked() {
    let rig = rig(PopulationConfig::healthy(77, 200)).await;
    let scheduler = rig.scheduler().await;
    let status = |a: &&agentmesh::testbed::Agent| a.availability["status"].clone();
    let agents = rig.testbed.population().agents();
    let resting = agents
        .iter()
        .find(|a| status(a) == "maintenance")
        .expect("about 5 % of a population is in maintenance")
        .domain
        .clone();
    let online = agents
        .iter()
        .find(|a| status(a) == "online")
        .unwrap()
        .domain
        .clone();
    for d in [&resting, &online] {
        let reports = scheduler.visit(d).await.unwrap();
        assert_eq!(reports[0].level(), TrustLevel::KeyVerified, "{d}");
        rig.testbed.site(d).unwrap().set_chat_down(true);
    }
    // The challenge is due again, and neither endpoint answers.
    rig.clock.advance(Duration::from_secs(3700));
    let round = scheduler.run_due().await.unwrap();
    assert_eq!(round.visited, 2);

    let registry = Registry::new(rig.issuer.clone());
    let summary = |d: &str| {
        let (registry, id) = (registry.clone(), format!("agent:{d}"));
        async move { registry.summary(&id).await.unwrap() }
    };
    let r = summary(&resting).await;
    assert_eq!(r.status.as_deref(), Some("maintenance"));
    assert_eq!(
        r.trust.level,
        TrustLevel::KeyVerified,
        "an agent in maintenance keeps the proof of its unchanged document"
    );
    assert_eq!(
        rig.testbed.site_counts(&resting).unwrap().chat,
        1,
        "and is not challenged"
    );
    let f = r.freshness.expect("crawled agents have a freshness");
    assert_eq!((f.state, f.endpoint_ok), (FreshState::Fresh, Some(true)));

    let o = summary(&online).await;
    assert_eq!(o.status.as_deref(), Some("online"));
    assert_eq!(rig.testbed.site_counts(&online).unwrap().chat, 2);
    let f = o.freshness.unwrap();
    assert_eq!(f.endpoint_ok, Some(false), "its endpoint did not answer");
    assert_eq!(
        f.state,
        FreshState::Fresh,
        "its DNS and document still hold"
    );
    assert!(
        o.trust.level < TrustLevel::KeyVerified,
        "without a fresh proof"
    );
    assert!(o.trust.reasons.contains(&Reason::ChallengeNoAnswer));
    let (listed, _) = rig.listed().await;
    assert!(
        listed.contains(&format!("agent:{resting}")) && listed.contains(&format!("agent:{online}"))
    );
    rig.testbed.shutdown().await;
}

#[tokio::test]
async fn without_an_etag_the_same_bytes_again_spare_the_challenge_and_the_record() {
    let rig = rig(PopulationConfig::healthy(78, 1)).await;
    let scheduler = rig.scheduler().await;
    let d = rig.healthy(1).remove(0);
    let site = rig.testbed.site(&d).unwrap().clone();
    site.set_no_etag(true);
    assert!(scheduler.visit(&d).await.unwrap()[0].stored);
    assert_eq!(scheduler.state(&d).unwrap().etag, None, "no ETag was sent");
    let seq = rig.seq_of(&d).await;
    rig.clock.advance(Duration::from_secs(331));
    let round = scheduler.run_due().await.unwrap();
    assert_eq!(
        (round.visited, round.not_modified, round.unchanged),
        (1, 0, 1)
    );
    let counts = site.counts();
    assert_eq!(
        (counts.well_known, counts.not_modified),
        (2, 0),
        "fetched in full"
    );
    assert_eq!(counts.chat, 1, "the same document keeps its proof");
    assert_eq!(rig.seq_of(&d).await, seq, "and its record");
    rig.testbed.shutdown().await;
}

/// A registration through the issuer, as `POST /agents` makes one.
async fn register(issuer: &Issuer, id: &str, endpoint: &str) {
    let descriptor = agentmesh::descriptor::Descriptor {
        id: id.into(),
        name: id.into(),
        description: "a registered agent".into(),
        version: None,
        publisher: None,
        endpoint: Some(endpoint.into()),
        capabilities: vec!["chat".into()],
        tags: Vec::new(),
        languages: Vec::new(),
        status: None,
        auth: None,
        format: agentmesh::descriptor::DocumentFormat::Aidip,
    };
    issuer
        .descriptor(agentmesh::issuer::DescriptorIssue {
            descriptor,
            document: "{}".into(),
            evidence: agentmesh::trust::Evidence::default(),
            origin: agentmesh::store::Origin::Local,
            expect: agentmesh::store::Expect::LocalOrAbsent,
            durability: agentmesh::issuer::Durability::Flushed,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn registered_endpoints_are_probed_at_their_interval_and_never_past_the_address_policy() {
    use agentmesh::crawl::probe::Prober;
    let rig = rig(PopulationConfig::healthy(79, 1)).await;
    let d = rig.healthy(1).remove(0);
    let port = rig.testbed.https_port();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    register(&rig.issuer, "alive", &format!("https://{d}:{port}/")).await;
    register(&rig.issuer, "dead", &format!("https://{d}:{closed_port}/")).await;
    // Nothing listens on port 22 here; it is not an allowed port anyway.
    register(&rig.issuer, "ssh", &format!("https://{d}:22/")).await;
    let quick = Politeness {
        per_host_concurrency: 2,
        per_host_interval: Duration::from_millis(1),
        per_host_burst: 1,
        per_address_concurrency: 64,
        per_address_interval: Duration::ZERO,
        per_address_burst: 1,
    };
    let hour = Duration::from_secs(3600);
    let prober = Prober::new(
        rig.crawler_on(quick, None, AllowedPorts::new([port, closed_port])),
        rig.store.clone(),
        rig.clock.clone(),
        hour,
        10,
    );
    let round = prober.round().await.unwrap();
    assert_eq!((round.probed, round.answered, round.skipped), (2, 1, 1));
    let alive = rig.store.freshness("alive").await.unwrap().unwrap();
    assert_eq!(
        (alive.endpoint_ok, alive.seen_at),
        (Some(true), Some(rig.clock.now()))
    );
    assert_eq!(alive.next_check_at, rig.clock.now() + 3600);
    assert_eq!(
        rig.store.freshness("ssh").await.unwrap(),
        None,
        "an endpoint on a port not allowed is not asked"
    );
    let dead = rig.store.freshness("dead").await.unwrap().unwrap();
    assert_eq!((dead.endpoint_ok, dead.seen_at), (Some(false), None));
    // The results show it.
    let registry = Registry::new(rig.issuer.clone());
    let summary = registry.summary("dead").await.unwrap();
    assert_eq!(summary.freshness.and_then(|f| f.endpoint_ok), Some(false));

    // Not again before the interval; again after it.
    assert_eq!(prober.round().await.unwrap().probed, 0);
    rig.clock.advance(hour);
    assert_eq!(prober.round().await.unwrap().probed, 2);
    // Found down twice in a row, the dead one waits twice the interval;
    // the working one, the interval.
    let next = |id: &'static str| {
        let store = rig.store.clone();
        async move { store.freshness(id).await.unwrap().unwrap().next_check_at }
    };
    assert_eq!(next("dead").await, rig.clock.now() + 2 * 3600);
    assert_eq!(next("alive").await, rig.clock.now() + 3600);

    // A prober under the default address policy never connects to the
    // testbed's loopback addresses.
    let landing = rig.testbed.site_counts(&d).unwrap().landing;
    let options = CrawlerOptions {
        resolvers: vec![rig.testbed.dns_addr()],
        ca_files: vec![rig.ca_file.clone()],
        allowed_ports: AllowedPorts::new([port, closed_port]),
        ..CrawlerOptions::default()
    };
    let strict = Crawler::new(options, rig.key.clone(), "verifier".into()).unwrap();
    let strict = Prober::new(strict, rig.store.clone(), rig.clock.clone(), hour, 10);
    rig.clock.advance(2 * hour);
    let round = strict.round().await.unwrap();
    assert_eq!((round.probed, round.skipped), (0, 3));
    assert_eq!(rig.testbed.site_counts(&d).unwrap().landing, landing);
    rig.testbed.shutdown().await;
}
