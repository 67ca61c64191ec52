//! Crawl-and-verify throughput against the in-process testbed: N healthy
//! agents (default 5,000; `AGENTMESH_BENCH_AGENTS`), crawled with bounded
//! concurrency (`AGENTMESH_BENCH_CONCURRENCY`, default 64) into a sled
//! store, every agent key-verified over real DNS, TLS 1.3 and WebSocket on
//! loopback. Prints domains/s, per-domain latency percentiles, the time
//! split by step, a TLS-handshake-only baseline measured in the same run,
//! and peak memory. Both ends share this machine's cores.
//!
//! Run: `cargo bench --bench crawl` (release build).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::crawl::{AllowedPorts, Crawler, CrawlerOptions};
use agentmesh::net::AddressPolicy;
use agentmesh::store::Store;
use agentmesh::testbed::{Population, PopulationConfig, Testbed, TestbedOptions};
use agentmesh::trust::TrustLevel;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Median time of a bare TLS 1.3 handshake against the testbed, the
/// ceiling the crawl cannot beat (two handshakes per domain).
async fn tls_handshake_ms(testbed: &Testbed, domains: &[String], samples: usize) -> f64 {
    let connector = tokio_rustls::TlsConnector::from(testbed.client_config());
    let mut times = Vec::new();
    for d in domains.iter().take(samples) {
        let started = Instant::now();
        let tcp = tokio::net::TcpStream::connect(testbed.https_addr())
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from(d.clone()).expect("a DNS name");
        let _tls = connector.connect(name, tcp).await.expect("handshake");
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    percentile(&times, 0.5)
}

fn main() {
    let agents = env_usize("AGENTMESH_BENCH_AGENTS", 5000);
    let concurrency = env_usize("AGENTMESH_BENCH_CONCURRENCY", 64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let testbed = Testbed::start(Population::generate(&PopulationConfig::healthy(42, agents)), TestbedOptions::default())
            .await
            .expect("testbed");
        let testbed_start = started.elapsed();
        let ca = dir.path().join("ca.pem");
        testbed.write_ca(&ca).expect("ca");
        let store = Store::open(&dir.path().join("store"), 64 << 20).expect("store");
        let key = agentmesh::identity::generate();
        let verifier = agentmesh::identity::peer_id_of(&key);
        let options = CrawlerOptions {
            resolvers: vec![testbed.dns_addr()],
            ca_files: vec![ca],
            policy: AddressPolicy { allow_private: true },
            concurrency,
            https_port: testbed.https_port(),
            allowed_ports: AllowedPorts::new([testbed.https_port()]),
            // Every testbed agent is on one address: this measures the
            // crawl, not the per-address politeness budget.
            politeness: agentmesh::crawl::polite::Politeness {
                per_address_concurrency: 256,
                per_address_interval: Duration::ZERO,
                ..Default::default()
            },
            ..CrawlerOptions::default()
        };
        let key = Arc::new(key);
        let issuer = agentmesh::issuer::Issuer::new(store.clone(), key.clone(), Duration::from_secs(24 * 3600));
        let crawler = Crawler::new(options, key, verifier).expect("crawler");
        let domains: Vec<String> = testbed.population().agents().iter().map(|a| a.domain.clone()).collect();

        let tls_ms = tls_handshake_ms(&testbed, &domains, 200).await;

        let started = Instant::now();
        let reports = crawler.crawl_many(&issuer, domains, false, usize::MAX, |_| {}).await;
        let wall = started.elapsed();

        let verified = reports.iter().filter(|r| r.level() >= TrustLevel::KeyVerified).count();
        let mut totals: Vec<f64> = reports.iter().map(|r| r.steps.iter().map(|s| s.ms).sum()).collect();
        totals.sort_by(f64::total_cmp);
        let mut split: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
        for r in &reports {
            for s in &r.steps {
                let bucket = match s.step.as_str() {
                    "dns_txt" | "dns_srv" | "dns_address" => "dns",
                    "fetch" => "fetch (TCP + TLS + HTTP)",
                    "challenge" => "challenge (DNS + TCP + TLS + WS)",
                    "record" | "peers" => "sign + store",
                    _ => "document checks",
                };
                *split.entry(bucket).or_default() += s.ms;
            }
        }
        let all: f64 = split.values().sum();

        println!("crawl benchmark: {agents} healthy testbed agents, concurrency {concurrency}");
        println!(
            "machine: {} cores, {}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned()))
                .unwrap_or_default()
        );
        println!("testbed start: {:.2} s", testbed_start.as_secs_f64());
        println!(
            "crawled {} domains in {:.2} s: {:.0} domains/s; {} key-verified or better",
            reports.len(),
            wall.as_secs_f64(),
            reports.len() as f64 / wall.as_secs_f64(),
            verified
        );
        println!(
            "per-domain latency: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            percentile(&totals, 0.5),
            percentile(&totals, 0.9),
            percentile(&totals, 0.99),
            totals.last().copied().unwrap_or(f64::NAN)
        );
        println!("time split (sum over domains, as share of step time):");
        for (bucket, ms) in &split {
            println!("  {bucket:<34} {:>5.1} %  ({:.1} ms per domain)", ms / all * 100.0, ms / reports.len() as f64);
        }
        println!("baseline in the same run: bare TLS 1.3 handshake to the testbed, median {tls_ms:.2} ms");
        println!("peak RSS (crawler + testbed in one process): {:.0} MiB", peak_rss_mib());
        testbed.shutdown().await;
    });
}
