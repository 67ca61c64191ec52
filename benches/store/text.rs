//! Section (e) of the store bench: free-text search (the text index).
//! Run alone with `cargo bench --bench store -- text` (section (e) only,
//! over `AGENTMESH_BENCH_AGENTS` agents, default 100000).
//!
//! What it measures, on a store filled the way registrations fill it:
//! - the index catching up with the bulk load (the flush after the puts);
//! - text top-10 through `Registry::search_local` (summaries included, what
//!   `POST /agents/search` answers) and through `Store::text_search`
//!   alone, warm; the same with a capability filter;
//! - the same queries right after `Store::open` (a restart: the first
//!   round, and a second one);
//! - the baseline in the same run: the ranking this replaced, a scan that
//!   decodes every live record and scores term overlap (a few queries
//!   only: one takes seconds at 100k);
//! - the index's size on disk, beside the store's.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentmesh::config::StoreConfig;
use agentmesh::issuer::Issuer;
use agentmesh::record::{self, RecordBody};
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::store::{Filter, Store, TextQuery};
use agentmesh::testbed::SYNTHETIC_DOMAINS;
use anyhow::{ensure, Context as _};
use ed25519_dalek::SigningKey;

use super::{dir_bytes, measure, prepare_all, put_all, scratch, us, Dist};

/// The synthetic population's vocabulary, as a user would word it.
const CAPABILITY_WORDS: [&str; 12] = [
    "translate",
    "summarize",
    "text generation",
    "code review",
    "image captioning",
    "speech to text",
    "sentiment analysis",
    "search",
    "scheduling",
    "data extraction",
    "question answering",
    "classification",
];
/// How many text queries each round runs (all distinct).
const QUERIES: usize = 200;

/// `QUERIES` queries of one to five words, in a few phrasings.
pub(super) fn queries() -> Vec<String> {
    let mut out = Vec::with_capacity(QUERIES);
    for i in 0..QUERIES {
        let cap = CAPABILITY_WORDS[i % CAPABILITY_WORDS.len()];
        let domain = SYNTHETIC_DOMAINS[(i / CAPABILITY_WORDS.len()) % SYNTHETIC_DOMAINS.len()];
        out.push(match i % 5 {
            0 => cap.to_owned(),
            1 => format!("{domain} {cap}"),
            2 => format!("an agent to {cap} {domain} documents"),
            3 => format!("{cap} for {domain} teams, in the cloud"),
            _ => format!("{domain} agent #{}", i * 37),
        });
    }
    out
}

/// The ranking the text index replaced: every live record decoded, the
/// share of query words found in capabilities/tags (1.0), the name (0.8)
/// or the description (0.5). The baseline.
fn scan_rank(store: &Store, text: &str, limit: usize) -> anyhow::Result<usize> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect();
    let mut scored = Vec::new();
    for a in store
        .blocking()
        .search(&Filter::default(), None, usize::MAX)?
    {
        let RecordBody::Descriptor(d) = &a.body else {
            continue;
        };
        let d = &d.descriptor;
        let (name, desc) = (d.name.to_lowercase(), d.description.to_lowercase());
        let mut total = 0.0f64;
        for w in &words {
            let in_terms = d
                .capabilities
                .iter()
                .chain(&d.tags)
                .any(|c| c == w || c.split('_').any(|p| p == w));
            total += if in_terms {
                1.0
            } else if name.contains(w.as_str()) {
                0.8
            } else if desc.contains(w.as_str()) {
                0.5
            } else {
                0.0
            };
        }
        if total > 0.0 {
            scored.push((total, d.id.clone()));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.truncate(limit);
    Ok(scored.len())
}

fn row(name: &str, d: &Dist) {
    println!(
        "| {name} | {:.0} µs | {:.0} µs | {:.0} µs |",
        d.p50_us(),
        d.p99_us(),
        us(d.pct(1.0))
    );
}

/// One round of every query through the registry; each query once.
pub(super) fn round(
    rt: &tokio::runtime::Runtime,
    registry: &Registry,
    qs: &[String],
    filter: &Filter,
) -> anyhow::Result<Dist> {
    round_each(rt, registry, qs, std::slice::from_ref(filter))
}

/// As [`round`], query `i` narrowed by `filters[i % filters.len()]`.
pub(super) fn round_each(
    rt: &tokio::runtime::Runtime,
    registry: &Registry,
    qs: &[String],
    filters: &[Filter],
) -> anyhow::Result<Dist> {
    // A filter leaves most queries with nothing to find (a translation
    // filter and a code-review query): only unfiltered rounds must find.
    let must_find = filters.iter().all(Filter::is_empty);
    let mut samples = Vec::with_capacity(qs.len());
    let mut empty = 0;
    for (q, filter) in qs.iter().zip(filters.iter().cycle()) {
        let query = SearchQuery {
            filter: filter.clone(),
            query: Some(q.clone()),
            after: None,
            limit: 10,
            explain: false,
        };
        let t = Instant::now();
        let page = rt.block_on(registry.search_local(&query))?;
        samples.push(t.elapsed());
        empty += usize::from(page.items.is_empty());
    }
    ensure!(
        !must_find || empty < qs.len() / 4,
        "{empty} of {} queries found nothing",
        qs.len()
    );
    Ok(Dist::new(samples))
}

pub(super) fn run(
    base: &Path,
    n: usize,
    cfg: &StoreConfig,
    key: &SigningKey,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let dir = scratch(base, "text")?;
    let path = dir.path().join("store");
    println!("\n(e) text search over {n} agents");
    let t = Instant::now();
    let records = prepare_all(n, key, cfg.record_ttl)?;
    let prepared = t.elapsed();
    let store = Store::open(&path, cfg.cache_bytes)?;
    let t = Instant::now();
    put_all(&store, &records)?;
    let put = t.elapsed();
    let t = Instant::now();
    store.blocking().flush()?;
    let caught_up = t.elapsed();
    drop(records);
    println!(
        "load: prepared in {:.1} s, stored in {:.1} s, then the flush (sled and the text index's last commit) took {:.2} s",
        prepared.as_secs_f64(),
        put.as_secs_f64(),
        caught_up.as_secs_f64()
    );

    let qs = queries();
    let translation = Filter::new(["translation"], [], []).map_err(anyhow::Error::msg)?;
    let registry = |store: &Store| {
        Registry::new(Issuer::new(
            store.clone(),
            Arc::new(key.clone()),
            cfg.record_ttl,
        ))
    };
    println!("\n| text top-10, {QUERIES} queries | p50 | p99 | max |");
    println!("| --- | ---: | ---: | ---: |");
    {
        let reg = registry(&store);
        round(&rt, &reg, &qs, &Filter::default())?; // warm-up
        row(
            "`Registry::search_local` (warm)",
            &round(&rt, &reg, &qs, &Filter::default())?,
        );
        let now = record::unix_now();
        let alone = measure(QUERIES, QUERIES, QUERIES, Duration::ZERO, |k| {
            let hits = store.blocking().text_search(&TextQuery {
                text: &qs[k % qs.len()],
                filter: &Filter::default(),
                limit: 10,
                now,
                min_trust: None,
                capabilities: &[],
                subjects: &[],
            })?;
            ensure!(hits.is_some(), "query {k} had no words");
            Ok(())
        })?;
        row("`Store::text_search` alone (warm)", &alone);
        row(
            "+ filter capability `translation` (warm)",
            &round(&rt, &reg, &qs, &translation)?,
        );
    }
    drop(store);

    // A restart: reopen, then the same rounds.
    let t = Instant::now();
    let store = Store::open(&path, cfg.cache_bytes)?;
    let opened = t.elapsed();
    ensure!(
        store.len() == n as u64,
        "reopened store holds {}",
        store.len()
    );
    {
        let reg = registry(&store);
        row(
            "after a restart: first round",
            &round(&rt, &reg, &qs, &Filter::default())?,
        );
        row(
            "after a restart: second round",
            &round(&rt, &reg, &qs, &Filter::default())?,
        );
    }

    // The baseline: a few queries through the scan this replaced.
    let scans = measure(0, 3, 3, Duration::ZERO, |k| {
        // Queries of the "{domain} {capability}" shape, which the scan
        // can answer (it knows no stems).
        let found = scan_rank(&store, &qs[(k * 35 + 1) % qs.len()], 10)?;
        ensure!(found > 0, "the scan found nothing");
        Ok(())
    })?;
    row("baseline: the former scan ranking (3 queries)", &scans);

    let index = path.join("text-index");
    println!(
        "\nreopen (the index opened with it): {:.2} s; on disk: store {:.0} MiB, of which the text index {:.0} MiB ({:.0} bytes per agent)",
        opened.as_secs_f64(),
        dir_bytes(&path) as f64 / f64::from(1 << 20),
        dir_bytes(&index) as f64 / f64::from(1 << 20),
        dir_bytes(&index) as f64 / n as f64
    );
    std::fs::metadata(&index).context("the text index directory exists")?;
    Ok(())
}
