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
//! Each concurrent-registration run happens in a child process (this
//! binary, `register TASKS N SECS DIR`) that the parent kills when it
//! hangs: sled 0.34 can deadlock under concurrent writes and flushes (see
//! `Store`'s write gate), and a hung run must neither hang the bench nor
//! leave stuck threads in sled's global thread pool for the runs after it.
//!
//! `<bench binary> fill DIR [N]` instead fills a node data directory with N
//! agents registered as local and signed with `DIR/node.key`, exactly as
//! `Registry::register` stores them but without a flush per record;
//! `benches/http_get.sh` uses it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::aidip::{self, MetadataValidator};
use agentmesh::config::{Config, StoreConfig};
use agentmesh::demo::synthetic_agent;
use agentmesh::descriptor::{self, Descriptor};
use agentmesh::identity;
use agentmesh::record::{self, DescriptorRecord, RecordBody, SignedRecord};
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::store::{Expect, Filter, Origin, Store};
use agentmesh::verify::Evidence;
use anyhow::{ensure, Context as _};
use ed25519_dalek::SigningKey;
use serde_json::Value;

const DEFAULT_AGENTS: usize = 100_000;
const DEFAULT_REGISTER_SECS: u64 = 5;
/// Concurrent registering tasks tried for `Registry::register`.
const REGISTER_TASKS: [usize; 4] = [1, 4, 16, 64];
/// A tag only every `RARE_EVERY`-th agent carries (10 of 100000).
const RARE_TAG: &str = "quantum";
const RARE_EVERY: usize = 10_000;
/// The page size `POST /agents/search` uses by default.
const SEARCH_LIMIT: usize = 10;
/// Records written straight into sled to show the cost of a transaction.
const SLED_SAMPLE: usize = 20_000;
/// Records the full-scan baseline decodes per `Store::search` call.
const SCAN_PAGE: usize = 100;

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
    if args.first().map(String::as_str) == Some("register") {
        return register_child(&args[1..]);
    }
    // `cargo bench` passes `--bench` (and any filter); this harness runs
    // every case, so the arguments are ignored.
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
    let validator = MetadataValidator::new();
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = n.div_ceil(threads).max(1);
    let parts: Vec<anyhow::Result<Vec<Prepared>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
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
    let mut out = Vec::with_capacity(n);
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
        store.put(&p.record, &p.body, Origin::Local, Expect::LocalOrAbsent)?;
        latencies.push(t.elapsed());
    }
    Ok(latencies)
}

/// Writes `records` straight into a fresh sled database laid out as the
/// store's (`records`, `index`, `local`), `per_tx` records per 3-tree
/// transaction, then flushes: the cost of `Store::put`'s transaction
/// without the store around it, and what batching transactions saves.
fn sled_transactions(
    dir: &Path,
    records: &[Prepared],
    per_tx: usize,
    cache_bytes: u64,
) -> anyhow::Result<Duration> {
    use sled::Transactional as _;
    let rows: Vec<(String, Vec<u8>, Vec<Vec<u8>>)> = records
        .iter()
        .map(|p| {
            let RecordBody::Descriptor(d) = &p.body else {
                unreachable!("the benchmark only prepares descriptors")
            };
            let id = d.agent_id.clone();
            let mut value = vec![b'd'];
            value.extend_from_slice(&p.record.encode());
            let d = &d.descriptor;
            let terms = (d.capabilities.iter().map(|t| (b'c', t)))
                .chain(d.tags.iter().map(|t| (b't', t)))
                .chain(d.languages.iter().map(|t| (b'l', t)));
            let keys = terms
                .map(|(field, term)| {
                    let mut k = vec![field];
                    k.extend_from_slice(term.to_ascii_lowercase().as_bytes());
                    k.push(0);
                    k.extend_from_slice(id.as_bytes());
                    k
                })
                .collect();
            (id, value, keys)
        })
        .collect();
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(cache_bytes)
        .flush_every_ms(Some(500))
        .open()?;
    let trees = (
        db.open_tree("records")?,
        db.open_tree("index")?,
        db.open_tree("local")?,
    );
    let t = Instant::now();
    for chunk in rows.chunks(per_tx) {
        (&trees.0, &trees.1, &trees.2)
            .transaction(|(r, i, l)| {
                for (id, value, keys) in chunk {
                    r.insert(id.as_bytes(), value.as_slice())?;
                    for k in keys {
                        i.insert(k.as_slice(), &[][..])?;
                    }
                    l.insert(id.as_bytes(), &[][..])?;
                }
                Ok::<_, sled::transaction::ConflictableTransactionError<()>>(())
            })
            .map_err(|e| anyhow::anyhow!("sled transaction failed: {e:?}"))?;
    }
    db.flush()?;
    Ok(t.elapsed())
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
    store.flush_blocking()?;
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
    let register_budget = Duration::from_secs(env_usize(
        "AGENTMESH_BENCH_REGISTER_SECS",
        DEFAULT_REGISTER_SECS as usize,
    )? as u64);
    let base: PathBuf =
        std::env::var_os("AGENTMESH_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let cfg = StoreConfig::default();
    let key = SigningKey::from_bytes(&[7; 32]);
    println!(
        "agentmesh store bench: {n} agents, stores under {}, sled cache {} MiB, load average {}",
        base.display(),
        cfg.cache_bytes >> 20,
        load_average()
    );

    // (a) registration.
    println!("\n(a) registration, {n} synthetic agents");
    println!(
        "{:<46} {:>8} {:>8} {:>11} {:>9} {:>9}",
        "path", "records", "wall s", "records/s", "p50 us", "p99 us"
    );
    let row = |name: &str, count: usize, wall: Duration, lat: Option<&Dist>| {
        let (p50, p99) = lat.map_or((String::from("-"), String::from("-")), |d| {
            (format!("{:.1}", d.p50_us()), format!("{:.1}", d.p99_us()))
        });
        println!(
            "{:<46} {:>8} {:>8.2} {:>11.0} {:>9} {:>9}",
            name,
            count,
            wall.as_secs_f64(),
            count as f64 / wall.as_secs_f64(),
            p50,
            p99
        );
    };
    let t = Instant::now();
    let records = prepare_all(n, &key, cfg.record_ttl)?;
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    row(
        &format!("validate + sign, no store ({threads} threads)"),
        n,
        t.elapsed(),
        None,
    );

    let main_dir = scratch(&base, "main")?;
    let store_path = main_dir.path().join("store");
    let store = Store::open(&store_path, cfg.cache_bytes)?;
    let t = Instant::now();
    let lat = Dist::new(put_all(&store, &records)?);
    let put_wall = t.elapsed();
    row("Store::put, pre-signed, 1 thread", n, put_wall, Some(&lat));
    let t = Instant::now();
    store.flush_blocking()?;
    row("  + one flush at the end", n, put_wall + t.elapsed(), None);
    ensure!(
        store.len() == n as u64,
        "store holds {} agents",
        store.len()
    );

    {
        let dir = scratch(&base, "put2")?;
        let store2 = Store::open(dir.path(), cfg.cache_bytes)?;
        let t = Instant::now();
        let lats: Vec<Vec<Duration>> = std::thread::scope(|s| {
            let handles: Vec<_> = records
                .chunks(n.div_ceil(2))
                .map(|chunk| {
                    let store2 = &store2;
                    s.spawn(move || put_all(store2, chunk))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a put thread does not panic"))
                .collect::<anyhow::Result<_>>()
        })?;
        let wall = t.elapsed();
        let lat = Dist::new(lats.into_iter().flatten().collect());
        row("Store::put, pre-signed, 2 threads", n, wall, Some(&lat));
    }
    let sample = &records[..n.min(SLED_SAMPLE)];
    for per_tx in [1, 64] {
        let dir = scratch(&base, "sled")?;
        let wall = sled_transactions(dir.path(), sample, per_tx, cfg.cache_bytes)?;
        row(
            &format!("sled alone: 3-tree tx per {per_tx} record(s)"),
            sample.len(),
            wall,
            None,
        );
    }
    drop(records);

    for tasks in REGISTER_TASKS {
        let name = format!("Registry::register, {tasks} tasks");
        match register_in_child(&base, tasks, n, register_budget)? {
            Some((count, wall, lat)) => row(&name, count, wall, Some(&lat)),
            None => println!(
                "{name:<46} HUNG: no answer {} s after its {} s budget; killed",
                HANG_GRACE.as_secs(),
                register_budget.as_secs()
            ),
        }
    }

    // (b) search.
    let registry = Registry::new(store.clone(), Arc::new(key.clone()), cfg.record_ttl);
    search_bench(&registry, &store, n)?;
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

/// How long past its budget a registration run may take before it is
/// declared hung (one registration normally takes milliseconds).
const HANG_GRACE: Duration = Duration::from_secs(10);

/// Where a registration child writes its result, in its directory.
const RESULT_FILE: &str = "result.txt";

/// Runs one registration case in a child process; `None` when it hung
/// (and was killed).
fn register_in_child(
    base: &Path,
    tasks: usize,
    n: usize,
    budget: Duration,
) -> anyhow::Result<Option<(usize, Duration, Dist)>> {
    let dir = scratch(base, "register")?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("register")
        .arg(tasks.to_string())
        .arg(n.to_string())
        .arg(budget.as_secs().to_string())
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .context("starting a registration child")?;
    let deadline = Instant::now() + budget + HANG_GRACE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            child.kill()?;
            child.wait()?;
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    ensure!(status.success(), "registration child failed ({status})");
    let out = std::fs::read_to_string(dir.path().join(RESULT_FILE))
        .context("reading the registration child's result")?;
    // `count wall_secs` then one latency in nanoseconds per line.
    let mut lines = out.lines();
    let head: Vec<&str> = lines
        .next()
        .context("empty answer from the registration child")?
        .split(' ')
        .collect();
    ensure!(head.len() == 2, "bad answer from the registration child");
    let count: usize = head[0].parse()?;
    let wall = Duration::from_secs_f64(head[1].parse()?);
    let lat = lines
        .map(|l| l.parse().map(Duration::from_nanos))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((count, wall, Dist::new(lat))))
}

/// `register TASKS N SECS DIR`: registers agents `0..N` into a fresh store
/// in DIR from TASKS concurrent tasks until all are in or SECS have passed;
/// writes `count wall_secs`, then each latency in nanoseconds, to
/// `DIR/result.txt`.
fn register_child(args: &[String]) -> anyhow::Result<()> {
    let [tasks, n, secs, dir] = args else {
        anyhow::bail!("usage: store register TASKS N SECS DIR");
    };
    let tasks: usize = tasks.parse()?;
    let n: usize = n.parse()?;
    let budget = Duration::from_secs(secs.parse()?);
    let dir = Path::new(dir);
    let cfg = StoreConfig::default();
    let registry = Registry::new(
        Store::open(&dir.join("store"), cfg.cache_bytes)?,
        Arc::new(SigningKey::from_bytes(&[7; 32])),
        cfg.record_ttl,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (count, wall, lat) = rt.block_on(register_concurrently(registry, tasks, n, budget))?;
    let mut out = format!("{count} {}\n", wall.as_secs_f64());
    for d in lat {
        out.push_str(&format!("{}\n", d.as_nanos()));
    }
    std::fs::write(dir.join(RESULT_FILE), out)?;
    Ok(())
}

/// Registers agents `0..n` from `tasks` concurrent tasks until all are in
/// or `budget` has passed: (records registered, wall time, latencies).
async fn register_concurrently(
    registry: Registry,
    tasks: usize,
    n: usize,
    budget: Duration,
) -> anyhow::Result<(usize, Duration, Vec<Duration>)> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tasks {
        let registry = registry.clone();
        let next = next.clone();
        set.spawn(async move {
            let mut lat = Vec::new();
            while start.elapsed() < budget {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let doc = bench_doc(i);
                let t = Instant::now();
                registry.register(doc).await?;
                lat.push(t.elapsed());
            }
            anyhow::Ok(lat)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done??);
    }
    let wall = start.elapsed();
    let count = all.len();
    ensure!(
        registry.store().len() == count as u64,
        "store holds {} agents after {count} registrations",
        registry.store().len()
    );
    Ok((count, wall, all))
}

struct Case {
    name: &'static str,
    filter: Filter,
    limit: usize,
}

fn cases() -> anyhow::Result<Vec<Case>> {
    let case = |name, caps: &[&str], tags: &[&str], langs: &[&str], limit| {
        Ok(Case {
            name,
            filter: Filter::new(
                caps.iter().copied(),
                tags.iter().copied(),
                langs.iter().copied(),
            )
            .map_err(|bad| anyhow::anyhow!("bad language {bad}"))?,
            limit,
        })
    };
    [
        case("cap translation", &["translation"], &[], &[], SEARCH_LIMIT),
        case(
            "cap translation + tag legal",
            &["translation"],
            &["legal"],
            &[],
            SEARCH_LIMIT,
        ),
        case(
            "cap translation + tag legal + lang zh",
            &["translation"],
            &["legal"],
            &["zh"],
            SEARCH_LIMIT,
        ),
        case("rare: tag quantum", &[], &[RARE_TAG], &[], SEARCH_LIMIT),
        case(
            "empty: cap translation + tag finance",
            &["translation"],
            &["finance"],
            &[],
            SEARCH_LIMIT,
        ),
        case(
            "empty: cap teleportation (unknown)",
            &["teleportation"],
            &[],
            &[],
            SEARCH_LIMIT,
        ),
        case("no filter, limit 20", &[], &[], &[], 20),
    ]
    .into_iter()
    .collect()
}

fn query(case: &Case) -> SearchQuery {
    SearchQuery {
        filter: case.filter.clone(),
        query: None,
        after: None,
        limit: case.limit,
    }
}

/// Whether `d` passes `f`, decided from the record alone (the scan
/// baseline): AND across and within fields, `zh` matching `zh-Hant`.
fn passes(f: &Filter, d: &Descriptor) -> bool {
    f.capabilities.iter().all(|c| d.capabilities.contains(c))
        && f.tags.iter().all(|t| d.tags.contains(t))
        && f.languages.iter().all(|l| {
            d.languages.iter().any(|have| {
                have.eq_ignore_ascii_case(l)
                    || descriptor::primary_language(have).eq_ignore_ascii_case(l)
            })
        })
}

/// The baseline: the same query answered without the index, by walking
/// every record in id order and testing it, stopping at `limit`.
fn scan(store: &Store, f: &Filter, limit: usize) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.search(&Filter::default(), after.as_deref(), SCAN_PAGE)?;
        let Some(last) = page.last() else {
            return Ok(out);
        };
        after = Some(last.body.agent_id().to_owned());
        for agent in &page {
            if let RecordBody::Descriptor(d) = &agent.body {
                if passes(f, &d.descriptor) {
                    out.push(d.agent_id.clone());
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
        }
        if page.len() < SCAN_PAGE {
            return Ok(out);
        }
    }
}

/// The index a fix could keep: every term's posting list in memory, as
/// sorted positions into `ids` (which is in id order). A filter is answered
/// by intersecting the lists, smallest first, and only the winners are read
/// from the store. The bench builds it from a full scan.
struct Postings {
    ids: Vec<String>,
    lists: HashMap<(u8, String), Vec<u32>>,
}

impl Postings {
    fn build(store: &Store) -> anyhow::Result<Self> {
        let mut ids = Vec::new();
        let mut lists: HashMap<(u8, String), Vec<u32>> = HashMap::new();
        let mut after: Option<String> = None;
        loop {
            let page = store.search(&Filter::default(), after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.body.agent_id().to_owned());
            for agent in &page {
                if let RecordBody::Descriptor(d) = &agent.body {
                    let pos = u32::try_from(ids.len())?;
                    ids.push(d.agent_id.clone());
                    for term in Self::terms(&d.descriptor) {
                        lists.entry(term).or_default().push(pos);
                    }
                }
            }
        }
        Ok(Self { ids, lists })
    }

    /// The terms the store indexes for `d`.
    fn terms(d: &Descriptor) -> BTreeSet<(u8, String)> {
        let mut out = BTreeSet::new();
        out.extend(d.capabilities.iter().map(|t| (b'c', t.clone())));
        out.extend(d.tags.iter().map(|t| (b't', t.clone())));
        for lang in &d.languages {
            out.insert((b'l', lang.to_ascii_lowercase()));
            out.insert((
                b'l',
                descriptor::primary_language(lang).to_ascii_lowercase(),
            ));
        }
        out
    }

    /// `None` for an empty filter (nothing to intersect).
    fn search(
        &self,
        store: &Store,
        f: &Filter,
        limit: usize,
    ) -> anyhow::Result<Option<Vec<String>>> {
        let terms: Vec<(u8, String)> = (f.capabilities.iter().map(|t| (b'c', t.clone())))
            .chain(f.tags.iter().map(|t| (b't', t.clone())))
            .chain(f.languages.iter().map(|t| (b'l', t.to_ascii_lowercase())))
            .collect();
        if terms.is_empty() {
            return Ok(None);
        }
        let mut lists = Vec::with_capacity(terms.len());
        for t in &terms {
            match self.lists.get(t) {
                Some(list) => lists.push(list.as_slice()),
                None => return Ok(Some(Vec::new())),
            }
        }
        lists.sort_by_key(|l| l.len());
        let (driver, rest) = lists.split_first().expect("the filter has a term");
        let mut cursors = vec![0; rest.len()];
        let mut out = Vec::new();
        'candidates: for &pos in *driver {
            for (list, cur) in rest.iter().zip(cursors.iter_mut()) {
                *cur += list[*cur..].partition_point(|&p| p < pos);
                match list.get(*cur) {
                    None => break 'candidates,
                    Some(&p) if p != pos => continue 'candidates,
                    Some(_) => {}
                }
            }
            let id = &self.ids[pos as usize];
            if let Some(agent) = store.get(id)? {
                out.push(agent.body.agent_id().to_owned());
                if out.len() == limit {
                    break;
                }
            }
        }
        Ok(Some(out))
    }
}

fn search_bench(registry: &Registry, store: &Store, n: usize) -> anyhow::Result<()> {
    let cases = cases()?;
    let t = Instant::now();
    let postings = Postings::build(store)?;
    let postings_build = t.elapsed();
    println!(
        "\n(b) filter search over {n} agents: Registry::search, limit 10 (POST /agents/search)"
    );
    println!(
        "{:<38} {:>7} {:>6} {:>9} {:>9} {:>10} {:>10} {:>10} {:>8}",
        "query",
        "matches",
        "iters",
        "p50 us",
        "p99 us",
        "store p50",
        "postings",
        "scan p50",
        "scan/idx"
    );
    let mut mix = Vec::new();
    for case in &cases {
        let q = query(case);
        let all_matches = scan(store, &case.filter, usize::MAX)?;
        let expected = &all_matches[..all_matches.len().min(case.limit)];
        let got: Vec<String> = registry
            .search(&q)?
            .items
            .into_iter()
            .map(|s| s.id)
            .collect();
        ensure!(
            got == expected,
            "{}: the index answered {got:?}, a full scan {expected:?}",
            case.name
        );
        let from_postings = postings.search(store, &case.filter, case.limit)?;
        ensure!(
            from_postings.as_ref().is_none_or(|ids| ids == expected),
            "{}: the posting lists answered {from_postings:?}, a full scan {expected:?}",
            case.name
        );
        let matches = all_matches.len();
        let api = measure(10, 200, 5_000, Duration::from_secs(2), |_| {
            registry.search(&q)?;
            Ok(())
        })?;
        let raw = measure(10, 200, 5_000, Duration::from_secs(1), |_| {
            store.search(&case.filter, None, case.limit)?;
            Ok(())
        })?;
        let mem = match from_postings {
            Some(_) => {
                let d = measure(10, 200, 5_000, Duration::from_secs(1), |_| {
                    postings.search(store, &case.filter, case.limit)?;
                    Ok(())
                })?;
                format!("{:.1}", d.p50_us())
            }
            None => "-".into(),
        };
        // The full scan just ran once (above), which warmed it up.
        let full = measure(0, 2, 200, Duration::from_secs(2), |_| {
            scan(store, &case.filter, case.limit)?;
            Ok(())
        })?;
        println!(
            "{:<38} {:>7} {:>6} {:>9.1} {:>9.1} {:>10.1} {:>10} {:>10.1} {:>7.0}x",
            case.name,
            matches,
            api.0.len(),
            api.p50_us(),
            api.p99_us(),
            raw.p50_us(),
            mem,
            full.p50_us(),
            full.p50_us() / api.p50_us()
        );
        mix.push(q);
    }
    let all = measure(10, 500, 7_000, Duration::from_secs(3), |k| {
        registry.search(&mix[k % mix.len()])?;
        Ok(())
    })?;
    println!(
        "{:<38} {:>7} {:>6} {:>9.1} {:>9.1}",
        "mix: the queries above in turn",
        "-",
        all.0.len(),
        all.p50_us(),
        all.p99_us()
    );
    println!(
        "(store p50: Store::search alone; postings: the same filter over in-memory posting \
         lists, built in {:.1} s; scan: no index, every record decoded in id order)",
        postings_build.as_secs_f64()
    );
    Ok(())
}
