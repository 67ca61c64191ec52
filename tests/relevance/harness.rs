//! The population in a real store, and the ranker the set is run with:
//! [`current`] (the node's `Registry::search_local`, text and filter as sent).
//! [`run`] is the whole evaluation at a population size, for the test and
//! the bench.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

use agentmesh::aidip::{self, MetadataValidator};
use agentmesh::issuer::{DescriptorIssue, Durability, Issuer};
use agentmesh::registry::{Registry, SearchQuery};
use agentmesh::store::{Expect, Filter, Origin, Store};
use agentmesh::trust::{ChallengeProof, Evidence, TrustLevel};

use super::eval::{evaluate, search_ids, semantic_from_env, with_semantic, Judged, Report};
use super::population::{population, Agent};
use super::queries::{judge, queries, Query};

/// A registry holding a population, in a temporary directory.
pub(crate) struct Loaded {
    pub(crate) registry: Registry,
    pub(crate) agents: Vec<Agent>,
    /// Kept for the registry's lifetime.
    _dir: tempfile::TempDir,
}

/// Evidence that proves `level` (the issuer signs what it is given; no
/// check happens on this path).
fn evidence(level: TrustLevel) -> Evidence {
    let proof = || ChallengeProof {
        verifier: "relevance-set".into(),
        unix_ms: 0,
        rand: vec![0; 16],
        signature: vec![0; 64],
    };
    match level {
        TrustLevel::Unverified => Evidence::default(),
        TrustLevel::DnsVerified => Evidence {
            dnssec: true,
            ..Evidence::default()
        },
        TrustLevel::KeyVerified => Evidence {
            fingerprint: true,
            challenge: Some(proof()),
            ..Evidence::default()
        },
        TrustLevel::PeerVerified => Evidence {
            fingerprint: true,
            challenge: Some(proof()),
            mutual_peer: true,
            ..Evidence::default()
        },
    }
}

/// Registers agents `0..n` into a fresh store: validated as AIDIP,
/// normalised, signed and stored by the issuer as a registration would
/// be (without a flush per record; one flush at the end).
pub(crate) async fn load(n: usize) -> anyhow::Result<Loaded> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), 64 << 20)?;
    let key = Arc::new(ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]));
    let issuer = Issuer::new(store.clone(), key, Duration::from_secs(24 * 3600));
    let registry = Registry::new(issuer.clone());
    let validator = MetadataValidator::new();
    let agents = population(n);
    for a in &agents {
        let doc = aidip::with_id(&a.doc, &a.id);
        let meta = validator
            .parse(&doc)
            .map_err(|p| anyhow::anyhow!("agent {} is not valid AIDIP: {p:?}", a.id))?;
        issuer
            .descriptor(DescriptorIssue {
                descriptor: meta.to_descriptor(&a.id),
                document: serde_json::to_string(&doc)?,
                evidence: evidence(a.truth.trust),
                origin: Origin::Local,
                expect: Expect::Any,
                durability: Durability::Periodic,
            })
            .await?;
    }
    store.flush().await?;
    Ok(Loaded {
        registry,
        agents,
        _dir: dir,
    })
}

/// Results a ranker returns (the set's nDCG cut-off).
pub(crate) const TOP: usize = 10;

fn filter_of(q: &Query, capabilities: &[String], languages: &[String]) -> Filter {
    let (mut caps, mut langs): (Vec<String>, Vec<String>) = q
        .filter
        .as_ref()
        .map(|f| {
            let caps = f.capabilities.iter().map(|c| c.to_string()).collect();
            (caps, f.languages.clone())
        })
        .unwrap_or_default();
    caps.extend(capabilities.iter().cloned());
    langs.extend(languages.iter().cloned());
    Filter::new(
        caps.iter().map(String::as_str),
        [],
        langs.iter().map(String::as_str),
    )
    .expect("the set's languages are BCP 47")
}

/// The node's search: the text and the explicit filter, as the API sends
/// them to `Registry::search_local` (which understands the text itself).
pub(crate) async fn current(registry: &Registry, q: &Query) -> Vec<String> {
    let search = SearchQuery {
        filter: filter_of(q, &[], &[]),
        query: Some(q.text.clone()),
        after: None,
        limit: TOP,
        explain: false,
    };
    search_ids(registry, &search).await
}

/// Runs an async ranker on every query, a few at once (each search is a
/// blocking task of its own); the answers by query number.
pub(crate) async fn rank_all<'a, F, Fut>(judged: &'a [Judged<Query>], ranker: F) -> Vec<Vec<String>>
where
    F: Fn(&'a Query) -> Fut,
    Fut: std::future::Future<Output = Vec<String>>,
{
    let mut answers: Vec<(usize, Vec<String>)> = stream::iter(judged)
        .map(|j| {
            let answer = ranker(&j.query);
            async move { (j.query.n, answer.await) }
        })
        .buffer_unordered(CONCURRENT_QUERIES)
        .collect()
        .await;
    answers.sort_by_key(|(n, _)| *n);
    answers.into_iter().map(|(_, a)| a).collect()
}

/// Queries in flight at once in [`rank_all`].
const CONCURRENT_QUERIES: usize = 4;

/// The outcome of [`run`].
pub(crate) struct Run {
    pub(crate) agents: usize,
    pub(crate) load: Duration,
    pub(crate) current: Report,
    pub(crate) current_time: Duration,
    /// The same search with the semantic model of
    /// `AGENTMESH_SEMANTIC_MODEL` (a build with `--features semantic`),
    /// when it is set: the report, the time, the model's directory, and
    /// how long its vector index took to read the loaded store.
    pub(crate) semantic: Option<(Report, Duration, String, Duration)>,
}

/// The judged set over agents `0..n`.
pub(crate) fn judged(agents: &[Agent]) -> Vec<Judged<Query>> {
    judge(agents, queries())
}

/// Loads `n` agents and scores the node's search; what the test runs at 1,000
/// and the bench at 100,000.
pub(crate) async fn run(n: usize) -> anyhow::Result<Run> {
    let t = Instant::now();
    let loaded = load(n).await?;
    let load = t.elapsed();
    let judged = judged(&loaded.agents);
    let registry = &loaded.registry;
    let t = Instant::now();
    let answers = rank_all(&judged, |q| current(registry, q)).await;
    let current_time = t.elapsed();
    let current_report = evaluate(&judged, |q| answers[q.n].clone());
    let semantic = match semantic_from_env() {
        Some((model, dir, weight)) => {
            let t = Instant::now();
            let registry = &with_semantic(registry, model, weight).await;
            let read = t.elapsed();
            let t = Instant::now();
            let answers = rank_all(&judged, |q| current(registry, q)).await;
            let time = t.elapsed();
            Some((evaluate(&judged, |q| answers[q.n].clone()), time, dir, read))
        }
        None => None,
    };
    Ok(Run {
        agents: n,
        load,
        current: current_report,
        current_time,
        semantic,
    })
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per_query =
            |d: Duration| d.as_secs_f64() * 1000.0 / self.current.outcomes.len().max(1) as f64;
        writeln!(
            f,
            "relevance set over {} agents (loaded in {:.1} s)",
            self.agents,
            self.load.as_secs_f64()
        )?;
        writeln!(
            f,
            "Registry::search_local (text as typed), {:.1} ms/query:",
            per_query(self.current_time)
        )?;
        write!(f, "{}", self.current)?;
        if let Some((report, time, dir, read)) = &self.semantic {
            writeln!(
                f,
                "with the semantic model {dir} (its vector index read the store in {:.1} s), {:.1} ms/query:",
                read.as_secs_f64(),
                per_query(*time)
            )?;
            write!(f, "{report}")?;
        }
        Ok(())
    }
}
