//! A search as the node runs it (`search/ask.rs`), in virtual time: the
//! provider lookup of the capability over all S shard keys at once (a
//! shard query ends at its first network answer with providers; the call
//! answers once `fanout` providers are known, all shard queries ended, or
//! at 30 % of the budget), the `known` list, the fan-out to at most
//! `fanout` peers until all answered, the answer is full (a page of
//! distinct records from half the peers asked: `p2p.search_ends_when_full`,
//! unless `node.search_ends_when_full = false`) or 70 % of the budget
//! ([`choose`]: a quarter of them
//! connected peers, the rest providers in random order, as the node does
//! today; or, `node.search_choice = "providers_first"`, the providers as
//! found and connected peers only without any, as before), answers from
//! each peer's own holdings minus `known`, judging (who may write an id:
//! `adversarial.judge`), then the asker's local ranking over everything
//! it holds.
//!
//! "Connected peers" are the asker's live routing-table entries on its
//! side of any partition: the model has no connection set, and a node's
//! Kademlia peers are among its connections. Every one of them speaks the
//! search protocol. No peer is trusted (`p2p.trusted_peers` is empty by
//! default), so the quarter goes to connected peers chosen at random.

use std::collections::HashSet;

use agentmesh::config::Replication;
use rand::seq::SliceRandom;

use super::{
    Ev, Owner, Role, SearchRecord, Sim, KNOWN_ENTRY_BYTES, RECORD_BYTES, SEARCH_REQUEST_BYTES,
};
use crate::model::{SearchKind, SearchSample};
use crate::scenario::{JudgeRule, SearchChoice};
use agentmesh::search::choose;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Lookup,
    Fanout,
    Done,
}

pub(super) struct SearchState {
    from: u32,
    cap: u32,
    t0: u64,
    kind: SearchKind,
    phase: Phase,
    shard_lookups: Vec<u32>,
    open_shards: usize,
    providers: Vec<u32>,
    lookup_hops: Option<u32>,
    known: HashSet<u32>,
    asked: u32,
    pending: u32,
    all_answer: bool,
    answered: u32,
    asked_providers: bool,
    /// What the answers carried, in arrival order: (agent, a forger's version).
    received: Vec<(u32, bool)>,
    /// The distinct records among them (a forger's version is another).
    distinct: HashSet<(u32, bool)>,
    search_messages: u32,
    bytes: u64,
    expected: usize,
}

impl Sim<'_> {
    fn budget_at(&self, s: &SearchState, percent: u64) -> u64 {
        s.t0 + self.np.search_timeout_ms * 1000 * percent / 100
    }

    pub(super) fn search_start(&mut self, now: u64, i: u32) {
        let planned = self.pop.searches[i as usize];
        let honest = self.pop.peers.len() as u32;
        // A search is asked of a live node: the planned one, else the next live.
        let mut from = planned.from;
        for _ in 0..honest {
            if self.online[from as usize] {
                break;
            }
            from = (from + 1) % honest;
        }
        let cap = planned.capability;
        let expected = self.live_with(cap, now).min(self.sc.limit);
        let idx = self.searches.len() as u32;
        debug_assert_eq!(idx, i);
        self.searches.push(SearchState {
            from,
            cap,
            t0: now,
            kind: planned.kind,
            phase: Phase::Lookup,
            shard_lookups: Vec::new(),
            open_shards: 0,
            providers: Vec::new(),
            lookup_hops: None,
            known: HashSet::new(),
            asked: 0,
            pending: 0,
            all_answer: true,
            answered: 0,
            asked_providers: false,
            received: Vec::new(),
            distinct: HashSet::new(),
            search_messages: 0,
            bytes: 0,
            expected,
        });
        // Every shard key at once; Kademlia reads the local provider store first.
        for s in 0..self.np.shards {
            let key = match self.key_index.get(&(cap, s)) {
                Some(&k) => k,
                None => self.add_key(cap, s, Vec::new(), 0),
            };
            let local = self.providers_at(from, key);
            if !local.is_empty() {
                self.shard_found(now, idx, &local, 0, false);
            }
            let target = self.keys[key as usize].target;
            let id = self.start_lookup(now, from, target, Owner::Shard { search: idx, key });
            let st = &mut self.searches[idx as usize];
            st.shard_lookups.push(id);
            st.open_shards += 1;
        }
        // The node answers the call from its own provider store when that
        // alone names `fanout` providers: libp2p hands a query's local
        // providers over before it sends any request, and the mesh answers
        // (and stops every shard query) as soon as the call has its limit
        // (`mesh/pending.rs`, `providers_found`). No request is sent.
        let limit = self.provider_limit();
        if self.searches[idx as usize].providers.len() >= limit {
            self.providers_answered(now, idx);
            return;
        }
        let deadline = (self.budget_at(&self.searches[idx as usize], 30))
            .min(now + self.np.lookup_timeout_ms * 1000);
        self.queue.push(deadline, Ev::LookupDeadline(idx));
        for id in self.searches[idx as usize].shard_lookups.clone() {
            self.drive(now, id);
        }
    }

    /// Providers found by a shard query.
    pub(super) fn shard_found(
        &mut self,
        _now: u64,
        search: u32,
        found: &[u32],
        depth: u32,
        from_network: bool,
    ) {
        let limit = self.provider_limit();
        let st = &mut self.searches[search as usize];
        if st.phase != Phase::Lookup {
            return;
        }
        for &p in found {
            if p != st.from && !st.providers.contains(&p) && st.providers.len() < limit {
                st.providers.push(p);
            }
        }
        if from_network && st.lookup_hops.is_none() {
            st.lookup_hops = Some(depth);
        }
    }

    /// One shard query ended.
    pub(super) fn shard_done(&mut self, now: u64, search: u32) {
        let limit = self.provider_limit();
        let st = &mut self.searches[search as usize];
        if st.phase != Phase::Lookup {
            return;
        }
        st.open_shards = st.open_shards.saturating_sub(1);
        if st.providers.len() >= limit || st.open_shards == 0 {
            self.providers_answered(now, search);
        }
    }

    pub(super) fn lookup_deadline(&mut self, now: u64, search: u32) {
        if self.searches[search as usize].phase == Phase::Lookup {
            self.providers_answered(now, search);
        }
    }

    /// The providers call answered: stop the shard queries, fan out.
    fn providers_answered(&mut self, now: u64, search: u32) {
        let lookups = self.searches[search as usize].shard_lookups.clone();
        for id in lookups {
            let l = &mut self.lookups[id as usize];
            l.iter.finish();
            l.done = true;
        }
        let (from, cap) = {
            let st = &self.searches[search as usize];
            (st.from, st.cap)
        };
        let providers = self.searches[search as usize].providers.clone();
        let asked_providers = !providers.is_empty();
        // The connected peers that speak the protocol: live table entries.
        let connected = |sim: &Self| -> Vec<u32> {
            sim.tables[from as usize]
                .iter()
                .copied()
                .filter(|&p| sim.online[p as usize] && sim.reachable(from, p))
                .collect()
        };
        let peers = match self.np.search_choice {
            SearchChoice::Mixed => {
                let speakers = connected(self);
                // The node's own choice (no trusted peers, the node's default),
                // over node indices.
                choose(
                    &providers,
                    &speakers,
                    |_| false,
                    self.np.fanout,
                    &mut self.rng,
                )
            }
            SearchChoice::ProvidersFirst => {
                let mut peers = providers;
                if peers.is_empty() {
                    peers = connected(self);
                    peers.shuffle(&mut self.rng);
                }
                peers.truncate(self.np.fanout);
                peers
            }
        };
        let mut known = HashSet::new();
        self.held(from, cap, now, |a| {
            known.insert(a);
            known.len() < self.np.max_known
        });
        let request_bytes = SEARCH_REQUEST_BYTES + KNOWN_ENTRY_BYTES * known.len() as u64;
        let mut pending = 0;
        let mut all = true;
        for &p in &peers {
            self.out.counters.search_requests += 1;
            self.out.counters.bytes += request_bytes;
            let answers = self.online[p as usize]
                && !matches!(self.role[p as usize], Role::Drop | Role::Sybil(_))
                && self.reachable(from, p)
                && !self.lost(2);
            if answers {
                pending += 1;
                let rtt = self.round_trip(from, p, 0.0);
                // The request reaches the peer after half the round trip.
                self.queue
                    .push(now + rtt / 2, Ev::SearchArrive { search, to: p });
            } else if let Some(after) = self.refused_after(from, p) {
                // A refused request ends at once, as an answer would: the
                // search does not wait for it.
                pending += 1;
                self.queue.push(now + after, Ev::SearchRefused(search));
            } else {
                all = false;
            }
        }
        let deadline = self.budget_at(&self.searches[search as usize], 70);
        let st = &mut self.searches[search as usize];
        st.phase = Phase::Fanout;
        st.known = known;
        st.asked = peers.len() as u32;
        st.asked_providers = asked_providers;
        st.pending = pending;
        st.all_answer = all;
        st.search_messages += peers.len() as u32;
        st.bytes += request_bytes * peers.len() as u64;
        if peers.is_empty() {
            self.finish_search(now, search);
        } else {
            self.queue.push(deadline, Ev::FanoutDeadline(search));
        }
    }

    pub(super) fn search_arrive(&mut self, now: u64, search: u32, to: u32) {
        // The handler semaphore (`max_inflight_handlers`): over it, ignored.
        if usize::from(self.inflight[to as usize]) >= self.np.max_inflight_handlers {
            self.out.counters.overloaded += 1;
            self.searches[search as usize].all_answer = false;
            self.searches[search as usize].pending -= 1;
            return;
        }
        self.inflight[to as usize] += 1;
        let from = self.searches[search as usize].from;
        let back = self.rtt(from, to) / 2 + (self.sc.latency.answer_ms * 1000.0) as u64;
        self.queue
            .push(now + back, Ev::SearchAnswer { search, from: to });
    }

    pub(super) fn search_answer(&mut self, now: u64, search: u32, from: u32) {
        self.inflight[from as usize] = self.inflight[from as usize].saturating_sub(1);
        self.out.counters.search_answers += 1;
        if self.searches[search as usize].phase != Phase::Fanout {
            self.out.counters.late_answers += 1;
            return;
        }
        let (cap, limit) = (self.searches[search as usize].cap, self.sc.limit);
        let asker = self.searches[search as usize].from;
        let mut records: Vec<(u32, bool)> = Vec::new();
        let forged = self.role[from as usize] == Role::Forge;
        if self.role[from as usize] == Role::Takeover {
            records = self.takeover_answer(cap, limit, now);
        } else if !forged {
            let known = &self.searches[search as usize].known;
            self.held(from, cap, now, |a| {
                // `known` leaves out what the asker holds at the same or a
                // higher seq: a forger's version (its seq above the
                // owner's) still goes to an asker holding the owner's.
                let theirs = self.is_forged(from, a);
                if !known.contains(&a) || (theirs && !self.is_forged(asker, a)) {
                    records.push((a, theirs));
                }
                records.len() < limit
            });
        }
        let n = if forged { limit } else { records.len() };
        let bytes = 100 + RECORD_BYTES * n as u64;
        self.out.counters.bytes += bytes;
        let st = &mut self.searches[search as usize];
        st.bytes += bytes;
        st.search_messages += 1;
        st.answered += 1;
        st.distinct.extend(records.iter().copied());
        st.received.extend(records);
        if self.np.search_ends_when_full
            && st.distinct.len() >= limit
            && 2 * st.answered >= st.asked
        {
            // The answer is full (`SearchEnd::WhenFull`): the peers still
            // out are not waited for.
            self.finish_search(now, search);
            return;
        }
        self.fanout_settled(now, search);
    }

    /// A down node refused a search request (`churn.refused_rtts`).
    pub(super) fn search_refused(&mut self, now: u64, search: u32) {
        self.out.counters.search_refused += 1;
        if self.searches[search as usize].phase == Phase::Fanout {
            self.fanout_settled(now, search);
        }
    }

    /// One asked peer answered or refused: the search ends when every asked
    /// peer has and none stayed silent.
    fn fanout_settled(&mut self, now: u64, search: u32) {
        let st = &mut self.searches[search as usize];
        st.pending -= 1;
        if st.pending == 0 && st.all_answer {
            self.finish_search(now, search);
        }
    }

    /// Providers a call asks for: the fan-out, within the node's bounds.
    fn provider_limit(&self) -> usize {
        self.np.fanout.clamp(1, self.np.max_providers_result)
    }

    pub(super) fn fanout_deadline(&mut self, now: u64, search: u32) {
        if self.searches[search as usize].phase == Phase::Fanout {
            self.finish_search(now, search);
        }
    }

    /// Judges what came back, stores it, ranks locally: the result.
    fn finish_search(&mut self, now: u64, search: u32) {
        let (from, cap) = {
            let st = &mut self.searches[search as usize];
            st.phase = Phase::Done;
            (st.from, st.cap)
        };
        let received = std::mem::take(&mut self.searches[search as usize].received);
        for (a, forged) in received {
            if self.tombstoned_at(from, a, now) {
                continue;
            }
            self.judge_record(from, a, forged, now);
        }
        let mut found = 0;
        let mut stale = 0;
        let mut taken_over = 0;
        let mut taken = 0;
        let limit = self.sc.limit;
        self.held(from, cap, now, |a| {
            taken += 1;
            if self.is_forged(from, a) {
                taken_over += 1;
            } else if self.revoked_by(a, now) {
                stale += 1;
            } else {
                found += 1;
            }
            taken < limit
        });
        let shard_lookups = self.searches[search as usize].shard_lookups.clone();
        let (lookup_requests, lookup_failed) =
            shard_lookups.iter().fold((0u32, 0u32), |(r, f), &id| {
                let l = &self.lookups[id as usize];
                (r + l.requests, f + l.failed)
            });
        self.out.stale_results += stale;
        let st = &self.searches[search as usize];
        let latency_ms = (now - st.t0) as f64 / 1000.0 + self.sc.latency.rank_ms;
        let record = SearchRecord {
            at_s: st.t0 as f64 / 1e6,
            kind: st.kind,
            sample: SearchSample {
                found,
                expected: st.expected,
                latency_ms,
                lookup_requests,
                lookup_failed,
                lookup_hops: st.lookup_hops,
                messages: lookup_requests + st.search_messages,
                bytes: st.bytes
                    + u64::from(lookup_requests)
                        * (2 * super::KAD_REQUEST_BYTES + super::KAD_PEER_BYTES * self.np.k as u64),
            },
            stale,
            taken_over,
            asked: st.asked,
            answered: st.answered,
            asked_providers: st.asked_providers,
        };
        self.out.searches.push(record);
    }

    /// The asker's judge on one record a search brought back (not a
    /// tombstoned agent's): an id it does not hold is stored, from whoever
    /// signed it (a claim: the judge cannot tell the owner of an id it
    /// meets first); for an id it holds, a forger's version (its seq above
    /// the owner's) replaces the owner's only under `judge =
    /// "highest_seq"` (the node before the hostile-peer checks), local registrations
    /// included; under `"owner"` (`federation.rs`: only the held record's
    /// signer, never over a local registration) it is refused. The owner's
    /// version never replaces a forger's held one: its seq is lower, and
    /// under `"owner"` its signer is not the holder's.
    fn judge_record(&mut self, node: u32, agent: u32, forged: bool, now: u64) {
        if !self.holds(node, agent, now) {
            self.stored.entry(node).or_default().push(agent);
            if forged {
                self.forged.entry(node).or_default().insert(agent);
                self.out.counters.takeover_stored += 1;
            }
            return;
        }
        match (forged, self.is_forged(node, agent)) {
            (true, false) => match self.judge {
                JudgeRule::HighestSeq => {
                    self.forged.entry(node).or_default().insert(agent);
                    self.out.counters.takeover_stored += 1;
                }
                JudgeRule::Owner => self.out.counters.takeover_refused += 1,
            },
            (false, true) => self.out.counters.owner_refused += 1,
            // The same version again (or another forger's): a duplicate.
            _ => {}
        }
    }

    /// Whether `node` holds `agent` in a forger's version.
    pub(super) fn is_forged(&self, node: u32, agent: u32) -> bool {
        self.forged.get(&node).is_some_and(|s| s.contains(&agent))
    }

    /// A takeover adversary's answer: up to `limit` agents with `cap`,
    /// chosen at random, each in its own version (the adversary's key and
    /// endpoint, a seq above the owner's). `known` does not apply: its
    /// seq is above any the asker lists.
    fn takeover_answer(&mut self, cap: u32, limit: usize, now: u64) -> Vec<(u32, bool)> {
        let all = self.cap_agents.get(cap as usize);
        let n = all.len();
        let picks = rand::seq::index::sample(&mut self.rng, n, limit.min(n));
        let all = self.cap_agents.get(cap as usize);
        picks
            .into_iter()
            .map(|i| all[i])
            .filter(|&a| !self.revoked_by(a, now))
            .map(|a| (a, true))
            .collect()
    }

    // --- what a node holds ----------------------------------------------

    fn has_cap(&self, agent: u32, cap: u32) -> bool {
        let n = self.pop.home.len() as u32;
        if agent < n {
            self.pop.agent_caps.get(agent as usize).contains(&cap)
        } else {
            self.pop.publish[(agent - n) as usize]
                .capabilities
                .contains(&cap)
        }
    }

    /// Whether `agent` is revoked at `now` (anywhere).
    pub(super) fn revoked_by(&self, agent: u32, now: u64) -> bool {
        self.revoked.contains_key(&agent) && now >= self.pop.revoke_at_us
    }

    /// Whether `node` has the tombstone of `agent` at `now`.
    pub(super) fn tombstoned_at(&self, node: u32, agent: u32, now: u64) -> bool {
        self.revoked
            .get(&agent)
            .is_some_and(|&item| self.gossip[item as usize].arrival[node as usize] <= now)
    }

    /// Whether `node` holds a live descriptor of `agent` at `now`.
    fn holds(&self, node: u32, agent: u32, now: u64) -> bool {
        if self.tombstoned_at(node, agent, now) {
            return false;
        }
        let n = self.pop.home.len() as u32;
        let by_rule = if agent < n {
            match self.replication() {
                Replication::All => true,
                _ => self.pop.home[agent as usize] == node,
            }
        } else {
            let i = (agent - n) as usize;
            match self.replication() {
                Replication::All => self.publish_arrival(i, node) <= now,
                _ => self.pop.publish[i].home == node && self.publish_arrival(i, node) <= now,
            }
        };
        by_rule || self.stored.get(&node).is_some_and(|s| s.contains(&agent))
    }

    /// Calls `f` on the live descriptors with `cap` that `node` holds at
    /// `now`, in its index order (first arrival), until `f` answers false.
    pub(super) fn held(&self, node: u32, cap: u32, now: u64, mut f: impl FnMut(u32) -> bool) {
        let n = self.pop.home.len() as u32;
        match self.replication() {
            Replication::All => {
                for &a in self.cap_agents.get(cap as usize) {
                    if !self.tombstoned_at(node, a, now) && !f(a) {
                        return;
                    }
                }
            }
            _ => {
                for &a in self.node_agents.get(node as usize) {
                    if self.has_cap(a, cap) && !self.tombstoned_at(node, a, now) && !f(a) {
                        return;
                    }
                }
            }
        }
        for (i, p) in self.pop.publish.iter().enumerate() {
            let mine = match self.replication() {
                Replication::All => true,
                _ => p.home == node,
            };
            if mine
                && p.capabilities.contains(&cap)
                && self.publish_arrival(i, node) <= now
                && !f(n + i as u32)
            {
                return;
            }
        }
        if let Some(stored) = self.stored.get(&node) {
            for &a in stored {
                let by_rule = if a < n {
                    self.replication() == Replication::All
                } else {
                    let i = (a - n) as usize;
                    (self.replication() == Replication::All || self.pop.publish[i].home == node)
                        && self.publish_arrival(i, node) <= now
                };
                if !by_rule && self.has_cap(a, cap) && !self.tombstoned_at(node, a, now) && !f(a) {
                    return;
                }
            }
        }
    }

    /// Live agents with `cap` at `now` (the ground truth).
    fn live_with(&self, cap: u32, now: u64) -> usize {
        let revoked = self
            .revoked
            .keys()
            .filter(|&&a| self.has_cap(a, cap) && self.revoked_by(a, now))
            .count();
        let published = self
            .pop
            .publish
            .iter()
            .filter(|p| p.at_us <= now && p.capabilities.contains(&cap))
            .count();
        self.cap_agents.get(cap as usize).len() - revoked + published
    }
}

#[cfg(test)]
mod tests;
