//! The load a recrawling node puts on publishers' DNS and HTTPS servers
//!: N healthy testbed agents (`AGENTMESH_BENCH_AGENTS`,
//! default 300) crawled once, then revisited by the recrawl scheduler
//! with the node's default schedule (`[crawl]` defaults: TTL 300 s and
//! max-age 300 s give a visit every 300 s ±10 %; the challenge every 24
//! h) over `AGENTMESH_BENCH_HOURS` simulated hours (default 1) on a
//! manual clock stepped 10 s at a time, so an hour of schedule takes
//! minutes. Twice: with publishers that send ETags (revisits are
//! conditional and answered 304), and with publishers that do not (every
//! revisit fetches the whole document; the crawler then sees the same
//! bytes and spares the challenge all the same).
//!
//! Counted at the testbed's servers: DNS queries, well-known requests
//! (full answers and 304s), other HTTPS requests (the other formats'
//! documents: A2A cards, ARD catalogs), WebSocket challenges, and the
//! document bytes sent. Printed per hour, and scaled to 10,000 agents.
//!
//! The crawler's resolver runs without its cache here: its cache counts
//! TTLs in real time, and a compressed hour lasts a few real minutes, so
//! revisits would find answers still cached that a real revisit (which
//! comes back no sooner than the TTL) finds expired. Without the cache
//! every lookup reaches the server, as on a real revisit; the answers of
//! names shared by a whole zone (its DNSKEY) are counted once per visit
//! here, where a real resolver would cache them across agents, so the DNS
//! figure is an upper bound.
//!
//! Run: `cargo bench --bench recrawl_load` (or `--profile dev` for a
//! quicker build: the counts do not depend on the build).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::CrawlConfig;
use agentmesh::crawl::scheduler::{Clock, ManualClock, SchedulePolicy, Scheduler};
use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::issuer::Issuer;
use agentmesh::net::AddressPolicy;
use agentmesh::store::Store;
use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the testbed's servers answered so far.
#[derive(Debug, Clone, Copy, Default)]
struct Load {
    dns: u64,
    well_known: u64,
    not_modified: u64,
    other_https: u64,
    chat: u64,
    document_bytes: u64,
}

impl Load {
    fn of(testbed: &Testbed, domains: &[String]) -> Self {
        let mut out = Self {
            dns: testbed.dns_queries(),
            other_https: testbed.other_requests(),
            ..Self::default()
        };
        for d in domains {
            let site = testbed.site(d).expect("a site per agent");
            let c = site.counts();
            out.well_known += c.well_known;
            out.not_modified += c.not_modified;
            out.chat += c.chat;
            out.document_bytes += (c.well_known - c.not_modified) * site.body().len() as u64;
        }
        out
    }

    fn minus(self, o: Self) -> Self {
        Self {
            dns: self.dns - o.dns,
            well_known: self.well_known - o.well_known,
            not_modified: self.not_modified - o.not_modified,
            other_https: self.other_https - o.other_https,
            chat: self.chat - o.chat,
            document_bytes: self.document_bytes - o.document_bytes,
        }
    }
}

struct Run {
    first: Load,
    revisits: Load,
    visits: u64,
    unchanged: u64,
    hours: f64,
}

async fn run(agents: usize, hours: u64, etag: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let testbed = Testbed::start(
        Population::generate(&PopulationConfig::healthy(90, agents)),
        TestbedOptions::default(),
    )
    .await
    .expect("the testbed starts");
    let ca = dir.path().join("ca.pem");
    testbed.write_ca(&ca).unwrap();
    let domains: Vec<String> = testbed
        .population()
        .agents()
        .iter()
        .map(|a| a.domain.clone())
        .collect();
    for d in &domains {
        testbed.site(d).unwrap().set_no_etag(!etag);
    }
    let store = Store::open(&dir.path().join("store"), 64 << 20).unwrap();
    let key = Arc::new(agentmesh::identity::generate());
    let issuer = Issuer::new(store, key.clone(), Duration::from_secs(7 * 24 * 3600));
    let config = CrawlConfig::default();
    let options = CrawlerOptions {
        resolvers: vec![testbed.dns_addr()],
        ca_files: vec![ca],
        policy: AddressPolicy {
            allow_private: true,
        },
        dns_cache_size: 0,
        allowed_ports: AllowedPorts::new([testbed.https_port()]),
        ..CrawlerOptions::from_config(&config)
    };
    let crawler = Crawler::new(options, key.clone(), agentmesh::identity::peer_id_of(&key))
        .expect("the crawler builds");
    let clock = Arc::new(ManualClock::new(agentmesh::record::unix_now()));
    let scheduler = Scheduler::load(
        crawler,
        issuer,
        SchedulePolicy::from_config(&config),
        clock.clone(),
    )
    .await
    .unwrap();

    let start = Load::of(&testbed, &domains);
    for chunk in domains.chunks(64) {
        let visits = chunk.iter().map(|d| scheduler.visit(d));
        for reports in futures_util::future::join_all(visits).await {
            assert!(reports.unwrap()[0].stored, "a healthy agent is stored");
        }
    }
    let after_first = Load::of(&testbed, &domains);
    let (mut visits, mut unchanged) = (0u64, 0u64);
    let began = clock.now();
    let end = began + hours * 3600;
    let mut last_report = Instant::now();
    while clock.now() < end {
        clock.advance(Duration::from_secs(10));
        let round = scheduler.run_due().await.unwrap();
        visits += round.visited as u64;
        unchanged += round.unchanged as u64;
        if last_report.elapsed() > Duration::from_secs(15) {
            eprintln!(
                "  etag {etag}: {} of {} simulated s, {visits} revisits",
                clock.now() - began,
                end - began
            );
            last_report = Instant::now();
        }
    }
    let done = Load::of(&testbed, &domains);
    testbed.shutdown().await;
    Run {
        first: after_first.minus(start),
        revisits: done.minus(after_first),
        visits,
        unchanged,
        hours: hours as f64,
    }
}

fn print(name: &str, agents: usize, r: &Run) {
    let n = agents as f64;
    let per_agent_hour = |x: u64| x as f64 / n / r.hours;
    let scale = 10_000.0;
    println!("\n## {name} ({agents} agents, {} simulated h)", r.hours);
    println!(
        "first visit, per agent: {:.1} DNS queries, {:.1} well-known GETs, {:.1} other HTTPS GETs, {:.1} challenges",
        r.first.dns as f64 / n,
        r.first.well_known as f64 / n,
        r.first.other_https as f64 / n,
        r.first.chat as f64 / n
    );
    println!(
        "revisits: {} ({:.1} per agent per hour), {} with the held document",
        r.visits,
        per_agent_hour(r.visits),
        r.unchanged
    );
    println!("| per hour, for 10,000 agents | measured (revisits) | computed |");
    println!("| --- | ---: | ---: |");
    let visits_h = per_agent_hour(r.visits) * scale;
    let dns_per_visit = r.first.dns as f64 / n;
    println!(
        "| DNS queries | {:.0} | {:.0} ({dns_per_visit:.1} per visit) |",
        per_agent_hour(r.revisits.dns) * scale,
        visits_h * dns_per_visit
    );
    println!(
        "| well-known GETs | {:.0} | {:.0} |",
        per_agent_hour(r.revisits.well_known) * scale,
        visits_h
    );
    println!(
        "| of which 304 | {:.0} | |",
        per_agent_hour(r.revisits.not_modified) * scale
    );
    println!(
        "| other HTTPS GETs (cards, catalogs) | {:.0} | {:.0} |",
        per_agent_hour(r.revisits.other_https) * scale,
        visits_h * r.first.other_https as f64 / n
    );
    println!(
        "| WebSocket challenges | {:.0} | {:.0} (one per agent per 24 h) |",
        per_agent_hour(r.revisits.chat) * scale,
        scale / 24.0
    );
    println!(
        "| document bytes | {:.1} MB | |",
        per_agent_hour(r.revisits.document_bytes) * scale / 1e6
    );
}

fn main() {
    let agents = env_u64("AGENTMESH_BENCH_AGENTS", 300) as usize;
    let hours = env_u64("AGENTMESH_BENCH_HOURS", 1);
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    println!("# recrawl load: {agents} agents, {hours} simulated h, default [crawl] schedule");
    let with = rt.block_on(run(agents, hours, true));
    print("publishers with ETag", agents, &with);
    let without = rt.block_on(run(agents, hours, false));
    print("publishers without ETag", agents, &without);
}
