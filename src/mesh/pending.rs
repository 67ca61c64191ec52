//! In-flight client calls of the event loop: publishes waiting for their
//! DHT writes, record lookups waiting for a verdict, provider lookups over
//! the S shards, and search fan-outs. Keyed by Kademlia `QueryId`,
//! request-response `OutboundRequestId`, or a local call id; each entry
//! holds the caller's `oneshot` and is answered exactly once: when its
//! work is done or when its [`Deadline`] fires, whichever is first. Only
//! the event loop touches this (no swarm access here: the loop finishes
//! the Kademlia queries these methods hand back).

use std::collections::{HashMap, HashSet};

use libp2p::kad::QueryId;
use libp2p::request_response::OutboundRequestId;
use libp2p::PeerId;
use tokio::sync::oneshot;

use super::client::{DhtOutcome, PublishReport, SearchEnd, SearchOutcome};
use super::stats::MeshStats;
use super::wire::SearchResponse;
use super::MeshError;

/// A log request in flight: where its answer goes (the inner `Err` says
/// why none came).
pub(super) type LogReply =
    oneshot::Sender<Result<Result<super::log::LogResponse, String>, MeshError>>;

type Reply<T> = oneshot::Sender<Result<T, MeshError>>;

/// A timer that fired for one pending call.
#[derive(Debug, Clone, Copy)]
pub(super) enum Deadline {
    Publish(u64),
    Get(QueryId),
    Providers(u64),
    Search(u64),
}

/// Which DHT write of a publish a query is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Slot {
    Record,
    Capability(usize),
}

pub(super) struct PendingPublish {
    pub reply: Reply<PublishReport>,
    pub gossiped: bool,
    pub record: Option<DhtOutcome>,
    pub capabilities: Vec<(String, Option<DhtOutcome>)>,
}

impl PendingPublish {
    fn settled(&self) -> bool {
        self.record.is_some() && self.capabilities.iter().all(|(_, o)| o.is_some())
    }

    fn answer(self) {
        let timed_out = || DhtOutcome::TimedOut;
        let report = PublishReport {
            gossiped: self.gossiped,
            record: self.record.unwrap_or_else(timed_out),
            capabilities: self
                .capabilities
                .into_iter()
                .map(|(c, o)| (c, o.unwrap_or_else(timed_out)))
                .collect(),
        };
        let _ = self.reply.send(Ok(report));
    }
}

struct PendingGet {
    reply: Reply<Option<Vec<u8>>>,
    checks: usize,
    query_done: bool,
}

struct PendingProviders {
    capability: String,
    reply: Reply<Vec<PeerId>>,
    queries: HashSet<QueryId>,
    found: Vec<PeerId>,
    limit: usize,
}

/// What a step of a providers call settled.
#[derive(Default)]
pub(super) struct ProvidersAnswered {
    /// Shard queries to stop.
    pub stop: Vec<QueryId>,
    /// The capability looked up (empty while the call is not answered).
    pub capability: String,
    /// The providers found (empty while the call is not answered).
    pub found: Vec<PeerId>,
}

struct PendingSearch {
    reply: Reply<SearchOutcome>,
    waiting: HashMap<OutboundRequestId, PeerId>,
    outcome: SearchOutcome,
    limit: u32,
    end: SearchEnd,
    /// Peers the request went to.
    asked: usize,
    /// The distinct records the answers carried so far, by a hash of
    /// their bytes (a record relayed by two peers is the same bytes),
    /// keyed per search so no peer can aim collisions at it.
    records: HashSet<u64>,
    hasher: std::hash::RandomState,
}

impl PendingSearch {
    /// Whether the fan-out may answer now: everyone asked has, or (when
    /// its end says so) the answer is full.
    fn settled(&self) -> bool {
        if self.waiting.is_empty() {
            return true;
        }
        let answered = self.outcome.responses.len();
        self.end == SearchEnd::WhenFull
            && self.records.len() >= self.limit as usize
            && 2 * answered >= self.asked
    }
}

/// Every in-flight call.
#[derive(Default)]
pub(super) struct Pending {
    next_id: u64,
    publishes: HashMap<u64, PendingPublish>,
    publish_queries: HashMap<QueryId, (u64, Slot)>,
    gets: HashMap<QueryId, PendingGet>,
    providers: HashMap<u64, PendingProviders>,
    provider_queries: HashMap<QueryId, u64>,
    searches: HashMap<u64, PendingSearch>,
    search_requests: HashMap<OutboundRequestId, u64>,
}

impl Pending {
    /// A fresh call id.
    pub(super) fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Registers a publish; answers at once when nothing is outstanding.
    /// Returns whether it is still pending (a deadline is needed).
    pub(super) fn add_publish(
        &mut self,
        id: u64,
        publish: PendingPublish,
        queries: Vec<(QueryId, Slot)>,
    ) -> bool {
        if publish.settled() {
            publish.answer();
            return false;
        }
        for (q, slot) in queries {
            self.publish_queries.insert(q, (id, slot));
        }
        self.publishes.insert(id, publish);
        true
    }

    /// A publish query finished (true if it was one).
    pub(super) fn publish_result(&mut self, query: QueryId, outcome: DhtOutcome) -> bool {
        let Some((id, slot)) = self.publish_queries.remove(&query) else {
            return false;
        };
        let Some(p) = self.publishes.get_mut(&id) else {
            return true;
        };
        match slot {
            Slot::Record => p.record = Some(outcome),
            Slot::Capability(i) => {
                if let Some(c) = p.capabilities.get_mut(i) {
                    c.1 = Some(outcome);
                }
            }
        }
        if p.settled() {
            if let Some(p) = self.publishes.remove(&id) {
                p.answer();
            }
        }
        true
    }

    pub(super) fn publish_deadline(&mut self, id: u64) {
        if let Some(p) = self.publishes.remove(&id) {
            self.publish_queries.retain(|_, (pid, _)| *pid != id);
            p.answer();
        }
    }

    pub(super) fn add_get(&mut self, query: QueryId, reply: Reply<Option<Vec<u8>>>) {
        let get = PendingGet {
            reply,
            checks: 0,
            query_done: false,
        };
        self.gets.insert(query, get);
    }

    /// A record was found for a lookup we still wait on: one more check.
    pub(super) fn get_found(&mut self, query: QueryId) -> bool {
        match self.gets.get_mut(&query) {
            Some(g) => {
                g.checks += 1;
                true
            }
            None => false,
        }
    }

    /// A check could not start after `get_found` (overloaded).
    pub(super) fn get_check_dropped(&mut self, query: QueryId) {
        self.get_verdict(query, None);
    }

    /// A check ended; `accepted` carries the record when the handler took
    /// it. Returns true when the lookup is answered and its query can stop.
    pub(super) fn get_verdict(&mut self, query: QueryId, accepted: Option<Vec<u8>>) -> bool {
        let Some(g) = self.gets.get_mut(&query) else {
            return false;
        };
        g.checks = g.checks.saturating_sub(1);
        if accepted.is_some() || (g.query_done && g.checks == 0) {
            if let Some(g) = self.gets.remove(&query) {
                let _ = g.reply.send(Ok(accepted));
            }
            return true;
        }
        false
    }

    /// The Kademlia lookup ended; answers `None` if no check is running.
    pub(super) fn get_query_done(&mut self, query: QueryId) {
        if let Some(g) = self.gets.get_mut(&query) {
            g.query_done = true;
            if g.checks == 0 {
                if let Some(g) = self.gets.remove(&query) {
                    let _ = g.reply.send(Ok(None));
                }
            }
        }
    }

    /// Deadline of a lookup: answers `None`; true if it was still pending.
    pub(super) fn get_deadline(&mut self, query: QueryId) -> bool {
        match self.gets.remove(&query) {
            Some(g) => {
                let _ = g.reply.send(Ok(None));
                true
            }
            None => false,
        }
    }

    pub(super) fn add_providers(
        &mut self,
        id: u64,
        capability: String,
        queries: HashSet<QueryId>,
        limit: usize,
        reply: Reply<Vec<PeerId>>,
    ) {
        for q in &queries {
            self.provider_queries.insert(*q, id);
        }
        let p = PendingProviders {
            capability,
            reply,
            queries,
            found: Vec::new(),
            limit,
        };
        self.providers.insert(id, p);
    }

    /// Providers found by one shard query (`last`: the query ended;
    /// `from_network`: a peer answered, rather than this node's own
    /// provider store, which a lookup reads first). A shard query that a
    /// peer answered with providers other than this node is done: the
    /// peers that store a shard key's provider records hold much the same
    /// set, so asking the rest of them costs requests and finds little.
    /// What this node's own store holds never ends a query: it holds only
    /// the announcements that reached it, and a provider that announced
    /// before this node joined is known only to the others. Returns the
    /// queries to stop and, when the call is answered, what it answered.
    pub(super) fn providers_found(
        &mut self,
        query: QueryId,
        found: impl IntoIterator<Item = PeerId>,
        local: &PeerId,
        last: bool,
        from_network: bool,
    ) -> ProvidersAnswered {
        let Some(&id) = self.provider_queries.get(&query) else {
            return ProvidersAnswered::default();
        };
        let Some(p) = self.providers.get_mut(&id) else {
            return ProvidersAnswered::default();
        };
        let mut some = false;
        for peer in found {
            if &peer == local {
                continue;
            }
            some |= from_network;
            if !p.found.contains(&peer) && p.found.len() < p.limit {
                p.found.push(peer);
            }
        }
        let mut stop = Vec::new();
        if last || some {
            p.queries.remove(&query);
            self.provider_queries.remove(&query);
            if !last {
                stop.push(query);
            }
        }
        if p.found.len() >= p.limit || p.queries.is_empty() {
            let mut answered = self.providers_answer(id);
            answered.stop.extend(stop);
            return answered;
        }
        ProvidersAnswered {
            stop,
            ..ProvidersAnswered::default()
        }
    }

    /// Answers a providers call; returns what it answered and its
    /// still-running queries.
    pub(super) fn providers_answer(&mut self, id: u64) -> ProvidersAnswered {
        let Some(p) = self.providers.remove(&id) else {
            return ProvidersAnswered::default();
        };
        for q in &p.queries {
            self.provider_queries.remove(q);
        }
        let _ = p.reply.send(Ok(p.found.clone()));
        ProvidersAnswered {
            stop: p.queries.into_iter().collect(),
            capability: p.capability,
            found: p.found,
        }
    }

    /// Registers a search; answers at once when nothing was sent.
    /// Returns whether it is still pending (a deadline is needed).
    pub(super) fn add_search(
        &mut self,
        id: u64,
        waiting: HashMap<OutboundRequestId, PeerId>,
        outcome: SearchOutcome,
        (limit, end): (u32, SearchEnd),
        reply: Reply<SearchOutcome>,
    ) -> bool {
        if waiting.is_empty() {
            let _ = reply.send(Ok(outcome));
            return false;
        }
        for r in waiting.keys() {
            self.search_requests.insert(*r, id);
        }
        let s = PendingSearch {
            reply,
            asked: waiting.len(),
            waiting,
            outcome,
            limit,
            end,
            records: HashSet::new(),
            hasher: std::hash::RandomState::new(),
        };
        self.searches.insert(id, s);
        true
    }

    fn search_settle(
        &mut self,
        request: OutboundRequestId,
        settle: impl FnOnce(&mut PendingSearch, PeerId),
    ) -> bool {
        let Some(id) = self.search_requests.remove(&request) else {
            return false;
        };
        let Some(s) = self.searches.get_mut(&id) else {
            return false;
        };
        if let Some(peer) = s.waiting.remove(&request) {
            settle(s, peer);
        }
        if s.settled() {
            if let Some(mut s) = self.searches.remove(&id) {
                // The answer is full: the peers still out are not waited
                // for; their answers, should they come, are dropped.
                for (request, peer) in s.waiting.drain() {
                    self.search_requests.remove(&request);
                    s.outcome.not_waited.push(peer);
                }
                let _ = s.reply.send(Ok(s.outcome));
            }
        }
        true
    }

    /// A peer answered (true if the request belonged to a pending search).
    pub(super) fn search_response(
        &mut self,
        request: OutboundRequestId,
        response: SearchResponse,
    ) -> bool {
        self.search_settle(request, |s, peer| {
            use std::hash::BuildHasher;
            let response = response.bound(s.limit);
            // Counted only while the count can still end the search: this
            // runs in the swarm loop, and an answer may be 2 MiB.
            if s.end == SearchEnd::WhenFull && s.records.len() < s.limit as usize {
                let hashes = response.records.iter().map(|r| s.hasher.hash_one(r));
                s.records.extend(hashes);
            }
            s.outcome.responses.push((peer, response));
        })
    }

    /// A request failed (true if it belonged to a pending search).
    pub(super) fn search_failure(&mut self, request: OutboundRequestId, reason: String) -> bool {
        self.search_settle(request, |s, peer| s.outcome.failed.push((peer, reason)))
    }

    /// Deadline of a search: the unanswered peers time out (counted in
    /// `stats` before the caller hears of it).
    pub(super) fn search_deadline(&mut self, id: u64, stats: &MeshStats) {
        let Some(mut s) = self.searches.remove(&id) else {
            return;
        };
        stats.requests_timed_out(s.waiting.len() as u64);
        for (request, peer) in s.waiting.drain() {
            self.search_requests.remove(&request);
            s.outcome.timed_out.push(peer);
        }
        let _ = s.reply.send(Ok(s.outcome));
    }
}
