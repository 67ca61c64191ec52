//! The asking half of a mesh search, stage by stage, each ending at its
//! share of one [`Budget`]:
//!
//! 1. whom to ask: the connected peers whose identify lists the search
//!    protocol (one round trip to the mesh loop). None: the search is local, at
//!    once, with no provider lookup and no wait;
//! 2. at the same time, the providers of the rarest capability (the
//!    lookup answers once `fanout` are known) and `known`, what this node
//!    already holds of the answer, which peers leave out;
//! 3. the fan-out, chosen by [`choose`]: at most `fanout` providers in
//!    random order, and a quarter as many more peers this node chose
//!    itself (trusted, then random connected speakers); with no provider,
//!    at most `fanout` connected speakers. So neither the DHT's answer
//!    nor the connections alone decide whom a search hears; who has not
//!    answered when its share ends is reported. It ends sooner once the
//!    answer is full (`p2p.search_ends_when_full`): a page of distinct
//!    records, and half the peers asked heard; the rest are not waited
//!    for (the wide-area model's p50 at 100,000 nodes halves, the
//!    slowest providers no longer set it);
//! 4. judging what came back, on a blocking thread, record by record
//!    until its share ends; then the text index catches up with what was
//!    stored, so the local ranking that follows sees it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use libp2p::PeerId;
use tokio::time::{timeout_at, Instant};

use super::{Asked, Budget, MeshAsk, MeshReport, Unanswered};
use crate::mesh::wire::{known_digest, SearchRequest, SearchResponse, MAX_KNOWN};
use crate::mesh::{PeerInfo, SearchEnd, SEARCH_PROTOCOL};
use crate::registry::{Registry, SearchQuery};
use crate::store::Audience;

/// Asks the mesh for `query` within `budget`; what verifies is stored.
pub(super) async fn ask(
    registry: &Registry,
    mesh: &MeshAsk,
    query: &SearchQuery,
    budget: Budget,
) -> MeshReport {
    let mut report = MeshReport::nobody(mesh.budget);
    let connected = match timeout_at(budget.lookup_by(), mesh.client.peers()).await {
        Ok(Ok(peers)) => peers,
        _ => Vec::new(),
    };
    let speakers: Vec<PeerId> = connected
        .iter()
        .filter(|p| speaks_search(p))
        .map(|p| p.peer_id)
        .collect();
    if speakers.is_empty() {
        tracing::debug!("mesh search: nobody to ask");
        return report;
    }

    let (providers, known) = tokio::join!(
        providers(registry, mesh, query, budget.lookup_by()),
        known(registry, query, budget.lookup_by()),
    );
    // A provider we are connected to and that told us what it speaks is
    // asked only if search is among it; one we do not know is asked.
    let providers: Vec<PeerId> = providers
        .into_iter()
        .filter(|p| {
            connected
                .iter()
                .find(|c| c.peer_id == *p)
                .is_none_or(speaks_search)
        })
        .collect();
    let whom = if providers.is_empty() {
        Asked::Connected
    } else {
        Asked::Providers
    };
    let peers = choose(
        &providers,
        &speakers,
        |p| mesh.trusted.contains(p),
        mesh.fanout,
        &mut rand::thread_rng(),
    );
    report.whom = whom;
    report.asked = peers.len();
    let request = SearchRequest {
        capabilities: query.filter.capabilities.clone(),
        tags: query.filter.tags.clone(),
        languages: query.filter.languages.clone(),
        query: query.query.clone(),
        limit: u32::try_from(query.limit).unwrap_or(u32::MAX),
        known,
    };

    let (responses, unanswered, not_waited, cut) = fan_out(mesh, peers, request, budget).await;
    report.answered = responses.len();
    report.unanswered = unanswered;
    report.not_waited = not_waited;
    report.budget_exhausted |= cut;
    let records: Vec<Vec<u8>> = responses
        .into_iter()
        .flat_map(|(_, r)| r.records.into_iter().map(serde_bytes::ByteBuf::into_vec))
        .collect();
    report.records_received = records.len();
    tracing::debug!(
        ?whom,
        asked = report.asked,
        answered = report.answered,
        records = report.records_received,
        ms = budget_ms(budget),
        "mesh search: answers"
    );

    let (judged, stored) = judge(mesh, records, budget).await;
    report.records_stored = stored;
    report.records_unjudged = report.records_received - judged;
    report.budget_exhausted |= report.records_unjudged > 0;
    // What was stored is ranked with the rest: the index must hold it.
    if stored > 0 {
        match timeout_at(budget.indexed_by(), registry.store().sync_text()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "mesh search: text index not caught up"),
            Err(_) => report.budget_exhausted = true,
        }
    }
    report.partial = !report.unanswered.is_empty() || report.records_unjudged > 0;
    tracing::debug!(
        stored,
        unjudged = report.records_unjudged,
        ms = budget_ms(budget),
        "mesh search: judged"
    );
    report
}

/// Milliseconds since the budget started, for the traces.
fn budget_ms(budget: Budget) -> u64 {
    budget.elapsed().as_millis() as u64
}

/// Whom a search asks, each peer once: at most `fanout` of `providers`,
/// in random order, and besides them up to a quarter of `fanout` (at
/// least one) connected speakers that are not providers, those in
/// `p2p.trusted_peers` first, then others chosen at random. With no
/// provider, at most `fanout` speakers, trusted first.
///
/// So an eclipse of the capability's keys (Sybils that answer the lookup
/// with their own ids, or none) still leaves the search peers this node
/// chose itself, and peers that fill this node's connections still leave
/// it every provider it found, in an order no peer sets. The peers it
/// chose are asked on top of the providers, not instead of some: where
/// providers hold few agents each and some are silent, every provider
/// asked counts (the simulator measured 3.5 points of recall lost when
/// they shared the fan-out).
pub fn choose<P: Copy + PartialEq>(
    providers: &[P],
    speakers: &[P],
    is_trusted: impl Fn(&P) -> bool,
    fanout: usize,
    rng: &mut impl rand::Rng,
) -> Vec<P> {
    use rand::seq::SliceRandom;
    let mut others: Vec<P> = speakers
        .iter()
        .filter(|p| !is_trusted(p))
        .copied()
        .collect();
    others.shuffle(rng);
    let own_choice = speakers
        .iter()
        .filter(|p| is_trusted(p))
        .chain(others.iter())
        .copied();
    let mut chosen: Vec<P> = Vec::with_capacity(fanout + fanout.div_ceil(4));
    if providers.is_empty() {
        for p in own_choice {
            if chosen.len() == fanout {
                break;
            }
            if !chosen.contains(&p) {
                chosen.push(p);
            }
        }
        return chosen;
    }
    let mut shuffled: Vec<P> = providers.to_vec();
    shuffled.shuffle(rng);
    for p in shuffled {
        if chosen.len() == fanout {
            break;
        }
        if !chosen.contains(&p) {
            chosen.push(p);
        }
    }
    let asked_providers = chosen.len();
    for p in own_choice {
        if chosen.len() == asked_providers + fanout.div_ceil(4) {
            break;
        }
        if !chosen.contains(&p) && !providers.contains(&p) {
            chosen.push(p);
        }
    }
    chosen
}

/// Whether a connected peer answers searches: its identify said so. A
/// peer that has not identified itself (yet, or ever: a plain DHT client
/// may not run identify) is not asked, so it cannot make an answer
/// partial; identify arrives within a round trip of connecting.
fn speaks_search(peer: &PeerInfo) -> bool {
    peer.protocols.iter().any(|p| p == SEARCH_PROTOCOL)
}

/// The providers of the query's rarest capability (none without one), at
/// most `fanout`, this node left out, found by `by`.
async fn providers(
    registry: &Registry,
    mesh: &MeshAsk,
    query: &SearchQuery,
    by: Instant,
) -> Vec<PeerId> {
    let store = registry.store();
    let Some(rarest) = query
        .filter
        .capabilities
        .iter()
        .min_by_key(|c| store.term_count('c', c))
    else {
        return Vec::new();
    };
    let share = by.saturating_duration_since(Instant::now());
    let lookup = mesh.client.providers_up_to(rarest, mesh.fanout, share);
    let own = mesh.client.peer_id();
    match timeout_at(by, lookup).await {
        Ok(Ok(found)) => found.into_iter().filter(|p| *p != own).collect(),
        _ => Vec::new(),
    }
}

/// What this node holds of the answer, as `(known_digest, seq)`, at most
/// [`MAX_KNOWN`], found by `by` (else none: peers then send what we hold
/// too, which the judge counts as duplicates). Only public agents: the
/// digests go to peers, and a hidden agent's must not.
async fn known(registry: &Registry, query: &SearchQuery, by: Instant) -> Vec<(u64, u64)> {
    let mut held = SearchQuery {
        limit: MAX_KNOWN,
        after: None,
        ..query.clone()
    };
    held.filter.audience = Audience::Public;
    match timeout_at(by, registry.find(&held)).await {
        Ok(Ok((found, _))) => found
            .iter()
            .map(|(_, a)| (known_digest(a.body.agent_id()), a.body.seq()))
            .collect(),
        _ => Vec::new(),
    }
}

/// The answers, the peers that gave none (and why), how many were not
/// waited for (the answer was full first), and whether the budget cut
/// the fan-out short.
type FanOut = (
    Vec<(PeerId, SearchResponse)>,
    Vec<(PeerId, Unanswered)>,
    usize,
    bool,
);

/// Sends `request` to `peers` and waits for their answers until the
/// fan-out's share of `budget` ends, or, with `mesh.ends_when_full`,
/// until the answer is full ([`SearchEnd::WhenFull`]).
async fn fan_out(
    mesh: &MeshAsk,
    peers: Vec<PeerId>,
    request: SearchRequest,
    budget: Budget,
) -> FanOut {
    let share = budget
        .answers_by()
        .saturating_duration_since(Instant::now());
    // The loop answers at the fan-out's end; should it be late (busy),
    // the search does not wait for it past the judging's share.
    let end = if mesh.ends_when_full {
        SearchEnd::WhenFull
    } else {
        SearchEnd::AllAnswered
    };
    let asked = mesh.client.search(peers.clone(), request, share, end);
    match timeout_at(budget.judged_by(), asked).await {
        Ok(Ok(outcome)) => {
            let cut = !outcome.timed_out.is_empty();
            let mut unanswered: Vec<(PeerId, Unanswered)> = outcome
                .timed_out
                .into_iter()
                .map(|p| (p, Unanswered::TimedOut))
                .collect();
            unanswered.extend(
                outcome
                    .failed
                    .into_iter()
                    .map(|(p, reason)| (p, Unanswered::Failed { reason })),
            );
            let not_waited = outcome.not_waited.len();
            (outcome.responses, unanswered, not_waited, cut)
        }
        Ok(Err(e)) => {
            let reason = e.to_string();
            let failed = peers
                .into_iter()
                .map(|p| {
                    let reason = reason.clone();
                    (p, Unanswered::Failed { reason })
                })
                .collect();
            (Vec::new(), failed, 0, false)
        }
        Err(_) => {
            let late = peers.into_iter().map(|p| (p, Unanswered::TimedOut));
            (Vec::new(), late.collect(), 0, true)
        }
    }
}

/// Judges `records` on a blocking thread until the judging's share of
/// `budget` ends; answers how many were judged and how many stored.
async fn judge(mesh: &MeshAsk, records: Vec<Vec<u8>>, budget: Budget) -> (usize, usize) {
    if records.is_empty() {
        return (0, 0);
    }
    let judged = Arc::new(AtomicUsize::new(0));
    let stored = Arc::new(AtomicUsize::new(0));
    let until = budget.judged_by().into_std();
    let (admit, j, s) = (mesh.admit.clone(), judged.clone(), stored.clone());
    let task = tokio::task::spawn_blocking(move || {
        for record in records {
            if std::time::Instant::now() >= until {
                break;
            }
            if admit.admit(&record) {
                s.fetch_add(1, Ordering::Relaxed);
            }
            j.fetch_add(1, Ordering::Relaxed);
        }
    });
    // The task stops by itself at its share; one record judged late (a
    // store write waiting for a flush) is not waited for past the index's.
    let _ = timeout_at(budget.indexed_by(), task).await;
    (
        judged.load(Ordering::Relaxed),
        stored.load(Ordering::Relaxed),
    )
}
