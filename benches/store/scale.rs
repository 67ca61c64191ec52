//! Section (f) of the store bench: search at scale, after a restart and
//! during an import. `cargo bench --bench store -- scale` runs it alone,
//! over `AGENTMESH_BENCH_AGENTS` agents (default 100000); with
//! `AGENTMESH_BENCH_STORE=DIR` the filled store is kept in `DIR` and
//! reused by the next run when it holds the same number of agents (a
//! fill of a million takes minutes).
//!
//! What it measures, each through the service the API calls (summaries
//! included):
//! - 200 filter searches (`Registry::search_local`, limit 10; capability, tag
//!   and language terms in a mix, the empty intersection of two common
//!   terms and an unknown capability among them), 200 free-text top-10
//!   searches, the same 200 with one capability filter (`translation`,
//!   the rows earlier runs measured), the same 200 each with a filter of
//!   its own from a mix (capability, tag and language terms, 172
//!   distinct filters: more than the text index's cache of filter sets
//!   holds at a million agents, so most are read afresh), and 100
//!   `POST /resolve` plans (`Resolver::resolve`);
//! - right after `Store::open` (a restart: the first round, then a
//!   second), then warm, then while an import of new agents runs in the
//!   same process (`Importer` on a background-priority thread, as
//!   `POST /admin/import` runs it: validation, signing, store, index);
//! - during the import, two canary threads at the queries' priority, one
//!   that only sleeps a millisecond at a time and one that reads a
//!   compact record every millisecond, with the gaps over 20 ms each saw
//!   (a gap in both: the process or machine paused; in the reader alone:
//!   the store made reads wait);
//! - bytes on disk per agent, the store's and the text index's, and the
//!   text index's segments (each text search walks every one) before and
//!   during the import.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::StoreConfig;
use agentmesh::issuer::Issuer;
use agentmesh::registry::import::{ImportLimits, Importer, SERVING_ISSUE_CHUNK};
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::resolve::{Plan, ResolveRequest, Resolver};
use agentmesh::store::{Filter, Store};
use agentmesh::testbed::{
    synthetic_agent, SYNTHETIC_CAPABILITIES, SYNTHETIC_DOMAINS, SYNTHETIC_LANGUAGES,
};
use anyhow::{ensure, Context as _};
use ed25519_dalek::SigningKey;

use super::{dir_bytes, load_average, prepare_range, put_all, scratch, text, us, Dist};

/// Agents prepared and stored per step of the fill (bounds its memory).
const FILL_CHUNK: usize = 100_000;
/// Agents the import during the measurements brings in.
const IMPORT_AGENTS: usize = 100_000;

/// 200 filters over the population's own vocabulary.
fn filters() -> anyhow::Result<Vec<(String, Filter)>> {
    let mut out = Vec::new();
    let f = |caps: &[&str], tags: &[&str], langs: &[&str]| {
        Filter::new(
            caps.iter().copied(),
            tags.iter().copied(),
            langs.iter().copied(),
        )
        .map_err(anyhow::Error::msg)
    };
    for i in 0..200 {
        let cap = SYNTHETIC_CAPABILITIES[i % SYNTHETIC_CAPABILITIES.len()];
        let tag = SYNTHETIC_DOMAINS[(i / 12) % SYNTHETIC_DOMAINS.len()];
        let lang = SYNTHETIC_LANGUAGES[(i / 3) % SYNTHETIC_LANGUAGES.len()];
        let (name, filter) = match i % 10 {
            0 | 1 => (format!("cap {cap}"), f(&[cap], &[], &[])?),
            2 | 3 => (format!("cap {cap} + tag {tag}"), f(&[cap], &[tag], &[])?),
            4 | 5 => (
                format!("cap {cap} + tag {tag} + lang {lang}"),
                f(&[cap], &[tag], &[lang])?,
            ),
            6 => (format!("tag {tag} + lang {lang}"), f(&[], &[tag], &[lang])?),
            // Two common terms that no agent has together: tags are the
            // agent's domain (index i % 6) and cloud/on-premises (i % 2),
            // so "legal" (0) and "on_premises" (odd) never meet.
            7 => (
                "empty: tag legal + tag on_premises".into(),
                f(&[], &["legal", "on_premises"], &[])?,
            ),
            8 => (
                "empty: cap teleportation (unknown)".into(),
                f(&["teleportation"], &[], &[])?,
            ),
            _ => ("no filter".into(), Filter::default()),
        };
        out.push((name, filter));
    }
    Ok(out)
}

/// One filter per text query, from a mix over the population's terms:
/// 172 distinct filters in 200 queries (capability; capability and
/// language; tag and language; capability and tag; all three). A million
/// agents' filter set is 125 KiB, so the text index's 16 MiB cache of
/// them holds fewer (about 130), and a round walks them in the same order
/// each time: under the cache's least-recently-used order nearly every
/// set is read afresh, the fair case for a node whose users filter on
/// many things (the `translation` rows are the other end: always cached).
fn mixed_text_filters(n: usize) -> anyhow::Result<Vec<Filter>> {
    let caps = SYNTHETIC_CAPABILITIES;
    let tags = SYNTHETIC_DOMAINS;
    let langs = SYNTHETIC_LANGUAGES;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // Five kinds in turn; within a kind, `j` walks the pairs so that
        // consecutive uses differ in every term.
        let j = i / 5;
        let cap = caps[j % caps.len()];
        let shift = j + j / caps.len();
        let filter = match i % 5 {
            0 => Filter::new([cap], [], []),
            1 => Filter::new([cap], [], [langs[shift % langs.len()]]),
            2 => Filter::new(
                [],
                [tags[j % tags.len()]],
                [langs[(j + j / tags.len()) % langs.len()]],
            ),
            3 => Filter::new([cap], [tags[shift % tags.len()]], []),
            _ => Filter::new(
                [cap],
                [tags[shift % tags.len()]],
                [langs[(j / 3) % langs.len()]],
            ),
        }
        .map_err(anyhow::Error::msg)?;
        out.push(filter);
    }
    Ok(out)
}

/// 100 resolution intents, with a policy.
fn plans() -> anyhow::Result<Vec<Plan>> {
    let mut out = Vec::new();
    for i in 0..100 {
        let domain = SYNTHETIC_DOMAINS[i % SYNTHETIC_DOMAINS.len()];
        let what = ["translate", "summarize", "review code", "transcribe speech"][i % 4];
        let body = serde_json::json!({
            "intent": format!("I need an agent to {what} for {domain} work"),
            "policy": {"languages": [SYNTHETIC_LANGUAGES[i % 3]], "status": ["active"]},
            "top": 5,
            "scope": "local",
        });
        let request = ResolveRequest::parse(&body)
            .map_err(|p| anyhow::anyhow!("resolve request {i}: {p:?}"))?;
        out.push(Plan::new(request));
    }
    Ok(out)
}

/// The workloads, one round each.
struct Workloads {
    filters: Vec<(String, Filter)>,
    texts: Vec<String>,
    /// One filter per text query (see [`mixed_text_filters`]).
    text_filters: Vec<Filter>,
    plans: Vec<Plan>,
}

impl Workloads {
    fn filter_round(&self, rt: &tokio::runtime::Runtime, reg: &Registry) -> anyhow::Result<Dist> {
        let mut samples = Vec::with_capacity(self.filters.len());
        let mut found = 0;
        for (name, filter) in &self.filters {
            let q = SearchQuery {
                filter: filter.clone(),
                query: None,
                after: None,
                limit: 10,
                explain: false,
            };
            let t = Instant::now();
            let page = rt.block_on(reg.search_local(&q))?;
            samples.push(t.elapsed());
            ensure!(
                !name.starts_with("empty") || page.items.is_empty(),
                "{name}: {} results",
                page.items.len()
            );
            found += usize::from(!page.items.is_empty());
        }
        // Many combinations of the population's terms never meet.
        ensure!(
            found > self.filters.len() / 4,
            "only {found} filters found anything"
        );
        Ok(Dist::new(samples))
    }

    /// The baseline in the same run: the same filters through
    /// `Store::search`, which picks the same agents but reads each one's
    /// whole signed record (as every filter search did before compact
    /// records), without summaries.
    fn whole_records_round(&self, store: &Store) -> anyhow::Result<Dist> {
        let mut samples = Vec::with_capacity(self.filters.len());
        for (_, filter) in &self.filters {
            let t = Instant::now();
            store.blocking().search(filter, None, 10)?;
            samples.push(t.elapsed());
        }
        Ok(Dist::new(samples))
    }

    fn text_round(
        &self,
        rt: &tokio::runtime::Runtime,
        reg: &Registry,
        filter: &Filter,
    ) -> anyhow::Result<Dist> {
        text::round(rt, reg, &self.texts, filter)
    }

    fn resolve_round(
        &self,
        rt: &tokio::runtime::Runtime,
        resolver: &Resolver,
    ) -> anyhow::Result<Dist> {
        let mut samples = Vec::with_capacity(self.plans.len());
        let mut empty = 0;
        for plan in &self.plans {
            let t = Instant::now();
            let r = rt.block_on(resolver.resolve(plan))?;
            samples.push(t.elapsed());
            empty += usize::from(r.candidates.is_empty());
        }
        ensure!(
            empty < self.plans.len() / 4,
            "{empty} resolutions found nothing"
        );
        Ok(Dist::new(samples))
    }

    /// Every workload once: filter, text, text + filter (the one and the
    /// mix), resolve.
    fn round(
        &self,
        rt: &tokio::runtime::Runtime,
        reg: &Registry,
        resolver: &Resolver,
        translation: &Filter,
    ) -> anyhow::Result<[Dist; WORKLOADS.len()]> {
        Ok([
            self.filter_round(rt, reg)?,
            self.text_round(rt, reg, &Filter::default())?,
            self.text_round(rt, reg, translation)?,
            text::round_each(rt, reg, &self.texts, &self.text_filters)?,
            self.resolve_round(rt, resolver)?,
        ])
    }
}

const WORKLOADS: [&str; 5] = [
    "filter, limit 10",
    "text top-10",
    "text top-10 + filter `translation`",
    "text top-10 + a mix of filters (172 distinct)",
    "resolve, top 5",
];

fn rows(when: &str, dists: &[Dist; WORKLOADS.len()]) {
    for (what, d) in WORKLOADS.iter().zip(dists) {
        row(when, what, d);
    }
}

fn row(when: &str, what: &str, d: &Dist) {
    println!(
        "| {when} | {what} | {:.0} µs | {:.0} µs | {:.0} µs | {} |",
        d.p50_us(),
        d.p99_us(),
        us(d.pct(1.0)),
        d.0.len()
    );
}

/// Fills `path` with agents `0..n` (in chunks), unless it already holds
/// exactly `n`.
fn fill(path: &Path, n: usize, cfg: &StoreConfig, key: &SigningKey) -> anyhow::Result<()> {
    if path.exists() {
        let held = Store::open(path, cfg.cache_bytes)?.len();
        if held == n as u64 {
            println!("reusing the store in {} ({held} agents)", path.display());
            return Ok(());
        }
        std::fs::remove_dir_all(path).with_context(|| format!("clearing {}", path.display()))?;
    }
    let t = Instant::now();
    let store = Store::open(path, cfg.cache_bytes)?;
    for start in (0..n).step_by(FILL_CHUNK) {
        let records = prepare_range(start..n.min(start + FILL_CHUNK), key, cfg.record_ttl)?;
        put_all(&store, &records)?;
    }
    store.blocking().flush()?;
    ensure!(store.len() == n as u64, "the fill stored {}", store.len());
    println!("filled {n} agents in {:.0} s", t.elapsed().as_secs_f64());
    Ok(())
}

pub(super) fn run(
    base: &Path,
    n: usize,
    cfg: &StoreConfig,
    key: &SigningKey,
) -> anyhow::Result<()> {
    println!("\n(f) search over {n} agents, after a restart and during an import");
    let scratch_dir = scratch(base, "scale")?;
    let path = scratch_dir.path().join("store");
    match std::env::var_os("AGENTMESH_BENCH_STORE") {
        // The kept store is filled once and copied: the import below
        // changes the copy only.
        Some(kept) => {
            fill(Path::new(&kept), n, cfg, key)?;
            let t = Instant::now();
            copy_dir(Path::new(&kept), &path)?;
            println!(
                "copied the kept store in {:.0} s",
                t.elapsed().as_secs_f64()
            );
        }
        None => fill(&path, n, cfg, key)?,
    }

    let w = Workloads {
        filters: filters()?,
        texts: text::queries(),
        text_filters: mixed_text_filters(200)?,
        plans: plans()?,
    };
    let translation = Filter::new(["translation"], [], []).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let t = Instant::now();
    let store = Store::open(&path, cfg.cache_bytes)?;
    let opened = t.elapsed();
    ensure!(
        store.len() == n as u64,
        "reopened store holds {}",
        store.len()
    );
    let reg = Registry::new(Issuer::new(
        store.clone(),
        Arc::new(key.clone()),
        cfg.record_ttl,
    ));
    let resolver = Resolver::new(reg.clone());
    println!(
        "Store::open: {:.2} s; text index segments {}; load average {}",
        opened.as_secs_f64(),
        segments_now(&store),
        load_average()
    );
    println!("\n| when | query | p50 | p99 | max | queries |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    rows(
        "after a restart, first round",
        &w.round(&rt, &reg, &resolver, &translation)?,
    );
    rows(
        "after a restart, second round",
        &w.round(&rt, &reg, &resolver, &translation)?,
    );
    rows("warm", &w.round(&rt, &reg, &resolver, &translation)?);
    row(
        "warm",
        "baseline: the same filters, whole records (`Store::search`)",
        &w.whole_records_round(&store)?,
    );

    // During an import: new agents (ids past the population's) through the
    // importer on a runtime of its own, while the rounds run here.
    let mut ndjson = Vec::new();
    for i in n..n + IMPORT_AGENTS {
        serde_json::to_writer(&mut ndjson, &synthetic_agent(i))?;
        ndjson.push(b'\n');
    }
    let done = Arc::new(AtomicBool::new(false));
    // As `POST /admin/import` runs it on a node: on a thread and runtime of
    // its own at background priority, in the serving node's smaller
    // transactions.
    let importer = {
        let (reg, done) = (reg.clone(), done.clone());
        agentmesh::priority::spawn_background("bench-import", async move {
            let t = Instant::now();
            let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
            let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
            let summary = Importer::new(reg, ImportLimits::default())
                .with_issue_chunk(SERVING_ISSUE_CHUNK)
                .run(ndjson.as_slice(), tx)
                .await;
            let _ = drain.await;
            done.store(true, Ordering::SeqCst);
            (summary.created, t.elapsed())
        })
    };
    // Two canaries beside the rounds, at the queries' priority: one only
    // sleeps a millisecond at a time, one reads an agent's compact record
    // every millisecond. A gap in both is the machine pausing (the VM, the
    // scheduler); a gap in the reader alone is the store making reads wait.
    let import_start = Instant::now();
    let sleeper = Canary::start(import_start, || {});
    let reader = {
        let store = store.clone();
        let id = synthetic_agent(n / 2)["id"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_default();
        Canary::start(import_start, move || {
            let _ = store.blocking().compact(&id);
        })
    };
    let mut rounds = 0;
    let mut during: [Vec<Duration>; WORKLOADS.len()] = Default::default();
    // The text index's segments, sampled after every round.
    let mut segments = Vec::new();
    while !done.load(Ordering::SeqCst) && rounds < 200 {
        let round = w.round(&rt, &reg, &resolver, &translation)?;
        for (all, d) in during.iter_mut().zip(round) {
            all.extend(d.0);
        }
        rounds += 1;
        segments.extend(store.text_segments());
    }
    rows(
        &format!("during an import ({rounds} rounds)"),
        &during.map(Dist::new),
    );
    let (imported, took) = importer
        .blocking_recv()
        .map_err(|_| anyhow::anyhow!("the import thread failed"))?;
    for (name, canary) in [
        ("sleeping 1 ms", sleeper.stop()),
        ("reading a compact record every 1 ms", reader.stop()),
    ] {
        println!("canary {name}: {canary}");
    }
    println!(
        "\nthe import: {imported} agents in {:.1} s ({:.0}/s), {rounds} rounds of queries beside it",
        took.as_secs_f64(),
        imported as f64 / took.as_secs_f64()
    );
    segments.sort_unstable();
    if let (Some(first), Some(last)) = (segments.first(), segments.last()) {
        println!(
            "text index segments after each round during the import: min {first}, median {}, max {last}; after it {}",
            segments[segments.len() / 2],
            segments_now(&store)
        );
    }
    store.blocking().flush()?;
    let total = store.len();
    let index = path.join("text-index");
    println!(
        "on disk: {:.0} MiB for {total} agents ({:.0} bytes per agent), of which the text index {:.0} MiB ({:.0} bytes per agent); load average {}",
        dir_bytes(&path) as f64 / f64::from(1 << 20),
        dir_bytes(&path) as f64 / total as f64,
        dir_bytes(&index) as f64 / f64::from(1 << 20),
        dir_bytes(&index) as f64 / total as f64,
        load_average()
    );
    Ok(())
}

/// A thread that does `work` every millisecond and keeps the gaps between
/// two turns longer than [`Canary::GAP`] (when, in seconds since `t0`, and
/// how long).
struct Canary {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(usize, Vec<(f64, f64)>)>,
}

impl Canary {
    const GAP: Duration = Duration::from_millis(20);
    const TICK: Duration = Duration::from_millis(1);

    fn start(t0: Instant, mut work: impl FnMut() + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut turns, mut gaps) = (0, Vec::new());
                let mut last = Instant::now();
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Self::TICK);
                    work();
                    let now = Instant::now();
                    let gap = now - last;
                    if gap > Self::GAP {
                        gaps.push(((last - t0).as_secs_f64(), gap.as_secs_f64() * 1000.0));
                    }
                    last = now;
                    turns += 1;
                }
                (turns, gaps)
            })
        };
        Self { stop, thread }
    }

    /// Stops the thread and says what it saw.
    fn stop(self) -> String {
        self.stop.store(true, Ordering::SeqCst);
        let Ok((turns, gaps)) = self.thread.join() else {
            return "the thread panicked".into();
        };
        let longest = gaps.iter().map(|g| g.1).fold(0.0, f64::max);
        let long: Vec<String> = gaps
            .iter()
            .filter(|g| g.1 >= 50.0)
            .map(|(at, ms)| format!("{ms:.0} ms at {at:.2} s"))
            .collect();
        format!(
            "{turns} turns, {} gaps over {} ms, the longest {longest:.0} ms; of 50 ms or more: [{}]",
            gaps.len(),
            Self::GAP.as_millis(),
            long.join(", ")
        )
    }
}

fn segments_now(store: &Store) -> String {
    store
        .text_segments()
        .map_or_else(|| "(not open)".into(), |n| n.to_string())
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}
