//! Store and registry benchmarks: registration throughput (the raw
//! `Store::put` and the acknowledged `Registry::register`), filter-search
//! latency, and reopening a full store. A custom harness (`harness =
//! false`) so that every case reports a latency distribution (p50/p99),
//! not only a mean; results go to stdout as small tables (BENCHMARKS.md).
//!
//! `cargo bench --bench store` runs everything over `AGENTMESH_BENCH_AGENTS`
//! synthetic agents (default 100000), with stores in temporary directories
//! under `AGENTMESH_BENCH_DIR` (default: the system temp directory).
//! `AGENTMESH_BENCH_REGISTER_SECS` (default 5) bounds each
//! `Registry::register` run.
//!
//! Sections: (a) registration (`store/registration.rs`), (b) filter search
//! (`store/search.rs`), (c) reopening, here, (e) free-text search
//! (`store/text.rs`; `cargo bench --bench store -- text` runs it alone),
//! (f) search at scale after a restart and during an import
//! (`store/scale.rs`; `cargo bench --bench store -- scale` runs it alone,
//! and only when asked). Each concurrent-registration
//! run happens in a child process (this binary, `register TASKS N SECS
//! DIR`) that the parent kills when it hangs: sled 0.34 can deadlock under
//! concurrent writes and flushes (see `Store`'s write gate), and a hung run
//! must neither hang the bench nor leave stuck threads in sled's global
//! thread pool for the runs after it.
//!
//! `<bench binary> ndjson FILE N` writes the population as NDJSON, for
//! `agentmesh import`.
//!
//! `<bench binary> fill DIR [N]` instead fills a node data directory with N
//! agents registered as local and signed with `DIR/node.key`, exactly as
//! `Registry::register` stores them but without a flush per record;
//! `benches/http_get.sh` uses it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::aidip::{self, MetadataValidator};
use agentmesh::config::{Config, StoreConfig};
use agentmesh::identity;
use agentmesh::issuer::Issuer;
use agentmesh::record::{self, DescriptorRecord, RecordBody, SignedRecord};
use agentmesh::registry::Registry;
use agentmesh::store::{Expect, Origin, Store};
use agentmesh::testbed::synthetic_agent;
use agentmesh::trust::Evidence;
use anyhow::{ensure, Context as _};
use ed25519_dalek::SigningKey;
use serde_json::Value;

#[path = "store/registration.rs"]
mod registration;
#[path = "store/scale.rs"]
mod scale;
#[path = "store/search.rs"]
mod search;
#[path = "store/text.rs"]
mod text;

const DEFAULT_AGENTS: usize = 100_000;
/// A tag only every `RARE_EVERY`-th agent carries (10 of 100000).
const RARE_TAG: &str = "quantum";
const RARE_EVERY: usize = 10_000;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("fill") {
        let dir = args.get(1).context("usage: store fill DIR [N]")?;
        let n = match args.get(2) {
            Some(n) => n.parse().context("N must be a number")?,
            None => env_usize("AGENTMESH_BENCH_AGENTS", DEFAULT_AGENTS)?,
        };
        return fill(Path::new(dir), n);
    }
    if args.first().map(String::as_str) == Some("ndjson") {
        let (Some(file), Some(n)) = (args.get(1), args.get(2)) else {
            anyhow::bail!("usage: store ndjson FILE N");
        };
        return ndjson(Path::new(file), n.parse().context("N must be a number")?);
    }
    if args.first().map(String::as_str) == Some("register") {
        return registration::child(&args[1..]);
    }
    // `cargo bench` passes `--bench` (and any filter): `text` runs section
    // (e) alone; anything else runs every section.
    if args.iter().any(|a| a == "text") {
        return run_text();
    }
    if args.iter().any(|a| a == "scale") {
        return run_scale();
    }
    run_all()
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

/// Agent `i` of the benchmark population: `synthetic_agent(i)` (id
/// `demo-{i:05}`), plus the rare tag on one agent in `RARE_EVERY`.
fn bench_doc(i: usize) -> Value {
    let mut doc = synthetic_agent(i);
    if i % RARE_EVERY == 7 {
        doc["tags"]
            .as_array_mut()
            .expect("synthetic agents have a tags array")
            .push(RARE_TAG.into());
    }
    doc
}

/// A signed record and its decoded body, ready for `Store::put`.
struct Prepared {
    record: SignedRecord,
    body: RecordBody,
}

/// What `Registry::register` does before its put: schema validation,
/// normalisation, the record payload, the signature.
fn prepare(
    validator: &MetadataValidator,
    key: &SigningKey,
    ttl: Duration,
    doc: &Value,
    held: Option<u64>,
) -> anyhow::Result<Prepared> {
    let id = doc["id"]
        .as_str()
        .expect("synthetic agents have an id")
        .to_owned();
    let doc = aidip::with_id(doc, &id);
    let meta = validator
        .parse(&doc)
        .map_err(|p| anyhow::anyhow!("agent {id} is invalid: {p:?}"))?;
    let body = DescriptorRecord::new(
        meta.to_descriptor(&id),
        serde_json::to_string(&doc)?,
        record::next_seq(held),
        record::unix_now(),
        ttl.as_secs(),
        Evidence::default(),
    );
    let record = SignedRecord::sign_descriptor(&body, key)?;
    Ok(Prepared {
        record,
        body: RecordBody::Descriptor(Box::new(body)),
    })
}

/// Prepares agents `0..n` on every core, in order.
fn prepare_all(n: usize, key: &SigningKey, ttl: Duration) -> anyhow::Result<Vec<Prepared>> {
    prepare_range(0..n, key, ttl)
}

/// Prepares agents `range` on every core, in order.
fn prepare_range(
    range: std::ops::Range<usize>,
    key: &SigningKey,
    ttl: Duration,
) -> anyhow::Result<Vec<Prepared>> {
    let validator = MetadataValidator::new();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let (first, n) = (range.start, range.end);
    let chunk = range.len().div_ceil(threads).max(1);
    let parts: Vec<anyhow::Result<Vec<Prepared>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (first..n)
            .step_by(chunk)
            .map(|start| {
                let validator = &validator;
                s.spawn(move || {
                    (start..(start + chunk).min(n))
                        .map(|i| prepare(validator, key, ttl, &bench_doc(i), None))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a preparing thread does not panic"))
            .collect()
    });
    let mut out = Vec::with_capacity(n - first);
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// Puts every record as a local registration would; returns each put's
/// latency.
fn put_all(store: &Store, records: &[Prepared]) -> anyhow::Result<Vec<Duration>> {
    let mut latencies = Vec::with_capacity(records.len());
    for p in records {
        let t = Instant::now();
        store
            .blocking()
            .put(&p.record, &p.body, Origin::Local, Expect::LocalOrAbsent)?;
        latencies.push(t.elapsed());
    }
    Ok(latencies)
}

/// `store fill DIR N`: a node data directory holding N local agents.
fn fill(dir: &Path, n: usize) -> anyhow::Result<()> {
    let config = Config {
        data_dir: dir.to_owned(),
        ..Config::default()
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let key = identity::load_or_create(&config.node_key_path())?;
    let store = Store::open(&config.store_path(), config.store.cache_bytes)?;
    let t = Instant::now();
    let records = prepare_all(n, &key, config.store.record_ttl)?;
    put_all(&store, &records)?;
    store.blocking().flush()?;
    ensure!(
        store.len() >= n as u64,
        "store holds {} agents, expected at least {n}",
        store.len()
    );
    println!(
        "filled {} with {n} agents (ids demo-00000..) in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `store ndjson FILE N`: the population `0..N` as AIDIP documents, one
/// per line (what `agentmesh import` reads).
fn ndjson(file: &Path, n: usize) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?,
    );
    for i in 0..n {
        serde_json::to_writer(&mut out, &bench_doc(i))?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    println!("wrote {n} documents to {}", file.display());
    Ok(())
}

/// Sorted latencies.
struct Dist(Vec<Duration>);

impl Dist {
    fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self(samples)
    }

    /// Nearest-rank percentile, `q` in 0..=1.
    fn pct(&self, q: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        self.0[rank - 1]
    }

    fn p50_us(&self) -> f64 {
        us(self.pct(0.50))
    }

    fn p99_us(&self) -> f64 {
        us(self.pct(0.99))
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs `f` `warmup` times, then measures it until `max_iters` runs, or
/// until `budget` has passed and at least `min_iters` ran.
fn measure(
    warmup: usize,
    min_iters: usize,
    max_iters: usize,
    budget: Duration,
    mut f: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<Dist> {
    for k in 0..warmup {
        f(k)?;
    }
    let start = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < max_iters && (samples.len() < min_iters || start.elapsed() < budget) {
        let t = Instant::now();
        f(samples.len())?;
        samples.push(t.elapsed());
    }
    Ok(Dist::new(samples))
}

/// A fresh directory for one store, removed on drop.
fn scratch(base: &Path, name: &str) -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("agentmesh-bench-{name}-"))
        .tempdir_in(base)
        .with_context(|| format!("creating a scratch directory in {}", base.display()))
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

fn run_all() -> anyhow::Result<()> {
    let n = env_usize("AGENTMESH_BENCH_AGENTS", DEFAULT_AGENTS)?;
    ensure!(n >= 100, "AGENTMESH_BENCH_AGENTS must be at least 100");
    let base = bench_base();
    let cfg = StoreConfig::default();
    let key = SigningKey::from_bytes(&[7; 32]);
    println!(
        "agentmesh store bench: {n} agents, stores under {}, sled cache {} MiB, load average {}",
        base.display(),
        cfg.cache_bytes >> 20,
        load_average()
    );

    // (a) registration; its store is the population for (b) and (c).
    let (main_dir, store) = registration::run(&base, n, &cfg, &key)?;
    let store_path = main_dir.path().join("store");

    // (b) search.
    let registry = Registry::new(Issuer::new(
        store.clone(),
        Arc::new(key.clone()),
        cfg.record_ttl,
    ));
    search::run(&registry, &store, n)?;
    drop(registry);
    drop(store);

    // (c) reopen.
    println!(
        "\n(c) Store::open of {n} agents ({:.0} MiB on disk, page cache warm)",
        dir_bytes(&store_path) as f64 / f64::from(1 << 20)
    );
    let mut opens = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let store = Store::open(&store_path, cfg.cache_bytes)?;
        opens.push(t.elapsed());
        ensure!(
            store.len() == n as u64,
            "reopened store holds {} agents",
            store.len()
        );
    }
    let runs: Vec<String> = opens
        .iter()
        .map(|d| format!("{:.2} s", d.as_secs_f64()))
        .collect();
    println!(
        "runs {}; median {:.2} s",
        runs.join(", "),
        Dist::new(opens).pct(0.5).as_secs_f64()
    );

    // (e) text search, on a store of its own.
    text::run(&base, n, &cfg, &key)?;
    println!("\nload average at the end: {}", load_average());
    Ok(())
}

fn bench_base() -> PathBuf {
    std::env::var_os("AGENTMESH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from)
}

/// Section (e) alone.
fn run_text() -> anyhow::Result<()> {
    run_section("(e)", text::run)
}

/// Section (f) alone.
fn run_scale() -> anyhow::Result<()> {
    run_section("(f)", scale::run)
}

/// One section alone, over `AGENTMESH_BENCH_AGENTS` agents.
fn run_section(
    name: &str,
    section: fn(&Path, usize, &StoreConfig, &SigningKey) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let n = env_usize("AGENTMESH_BENCH_AGENTS", DEFAULT_AGENTS)?;
    ensure!(n >= 100, "AGENTMESH_BENCH_AGENTS must be at least 100");
    println!(
        "agentmesh store bench, section {name}: {n} agents, load average {}",
        load_average()
    );
    section(
        &bench_base(),
        n,
        &StoreConfig::default(),
        &SigningKey::from_bytes(&[7; 32]),
    )?;
    println!("\nload average at the end: {}", load_average());
    Ok(())
}

/// The 1, 5 and 15 minute load averages: on a shared machine, a busy
/// neighbour shows up here before it shows up as noise in the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
