//! Section (a) of the store bench: registration throughput, through
//! `Store::put` of pre-signed records, bare sled transactions (what a put
//! costs without the store, and what batching would save), and
//! `Registry::register` from concurrent tasks, each level in a child
//! process with a watchdog.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::StoreConfig;
use agentmesh::record::RecordBody;
use agentmesh::registry::Registry;
use agentmesh::store::Store;
use anyhow::{ensure, Context as _};
use ed25519_dalek::SigningKey;

use super::{bench_doc, env_usize, prepare_all, put_all, scratch, Dist, Prepared};

const DEFAULT_REGISTER_SECS: u64 = 5;
/// Concurrent registering tasks tried for `Registry::register`.
const REGISTER_TASKS: [usize; 4] = [1, 4, 16, 64];
/// Records written straight into sled to show the cost of a transaction.
const SLED_SAMPLE: usize = 20_000;

/// Section (a): the population through `Store::put` (the store that the
/// later sections use, returned with its directory), bare sled for
/// comparison, and `Registry::register` at several concurrencies.
pub(super) fn run(
    base: &Path,
    n: usize,
    cfg: &StoreConfig,
    key: &SigningKey,
) -> anyhow::Result<(tempfile::TempDir, Store)> {
    let register_budget = Duration::from_secs(env_usize(
        "AGENTMESH_BENCH_REGISTER_SECS",
        DEFAULT_REGISTER_SECS as usize,
    )? as u64);
    println!("\n(a) registration, {n} synthetic agents");
    println!(
        "{:<46} {:>8} {:>8} {:>11} {:>9} {:>9}",
        "path", "records", "wall s", "records/s", "p50 us", "p99 us"
    );
    let t = Instant::now();
    let records = prepare_all(n, key, cfg.record_ttl)?;
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    row(
        &format!("validate + sign, no store ({threads} threads)"),
        n,
        t.elapsed(),
        None,
    );

    let main_dir = scratch(base, "main")?;
    let store_path = main_dir.path().join("store");
    let store = Store::open(&store_path, cfg.cache_bytes)?;
    let t = Instant::now();
    let lat = Dist::new(put_all(&store, &records)?);
    let put_wall = t.elapsed();
    row("Store::put, pre-signed, 1 thread", n, put_wall, Some(&lat));
    let t = Instant::now();
    store.blocking().flush()?;
    row("  + one flush at the end", n, put_wall + t.elapsed(), None);
    ensure!(
        store.len() == n as u64,
        "store holds {} agents",
        store.len()
    );

    {
        let dir = scratch(base, "put2")?;
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
        let dir = scratch(base, "sled")?;
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
        match register_in_child(base, tasks, n, register_budget)? {
            Some((count, wall, lat)) => row(&name, count, wall, Some(&lat)),
            None => println!(
                "{name:<46} HUNG: no answer {} s after its {} s budget; killed",
                HANG_GRACE.as_secs(),
                register_budget.as_secs()
            ),
        }
    }

    Ok((main_dir, store))
}

/// One line of the registration table.
fn row(name: &str, count: usize, wall: Duration, lat: Option<&Dist>) {
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
pub(super) fn child(args: &[String]) -> anyhow::Result<()> {
    let [tasks, n, secs, dir] = args else {
        anyhow::bail!("usage: store register TASKS N SECS DIR");
    };
    let tasks: usize = tasks.parse()?;
    let n: usize = n.parse()?;
    let budget = Duration::from_secs(secs.parse()?);
    let dir = Path::new(dir);
    let cfg = StoreConfig::default();
    let registry = Registry::new(agentmesh::issuer::Issuer::new(
        Store::open(&dir.join("store"), cfg.cache_bytes)?,
        Arc::new(SigningKey::from_bytes(&[7; 32])),
        cfg.record_ttl,
    ));
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
