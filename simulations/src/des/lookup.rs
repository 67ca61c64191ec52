//! Kademlia lookups in the engine: started from a node's own table,
//! driven by the closest-peers iterator (`des/kad.rs`), one request per
//! message with its answer or its timeout as an event; the answers a node
//! gives (its closest table entries, the provider records it holds, an
//! eclipse sybil's fellow sybils and the providers it names); the routing
//! repairs a timeout causes.

use rand::Rng;

use super::kad::{self, Id, Iter, Next};
use super::{Ev, Lookup, LookupRecord, Owner, Role, Sim, KAD_PEER_BYTES, KAD_REQUEST_BYTES};

impl Sim<'_> {
    pub(super) fn start_lookup(&mut self, now: u64, from: u32, target: Id, owner: Owner) -> u32 {
        let seeds = kad::closest_in(
            &self.tables[from as usize],
            &self.ids,
            target,
            self.np.k,
            from,
        );
        let iter = Iter::new(
            target,
            seeds,
            self.np.k,
            self.np.alpha,
            self.np.kad_peer_timeout_ms * 1000,
        );
        let id = self.lookups.len() as u32;
        self.lookups.push(Lookup {
            iter,
            from,
            owner,
            requests: 0,
            failed: 0,
            started: now,
            done: false,
        });
        id
    }

    /// Sends what the iterator wants; handles its end.
    pub(super) fn drive(&mut self, now: u64, id: u32) {
        loop {
            let l = &mut self.lookups[id as usize];
            if l.done {
                return;
            }
            let timed_out = now.saturating_sub(l.started) >= self.np.kad_query_timeout_ms * 1000;
            if timed_out {
                l.iter.finish();
            }
            match l.iter.next(now) {
                Next::Contact(to, _depth) => {
                    let from = l.from;
                    l.requests += 1;
                    self.out.counters.kad_requests += 1;
                    self.out.counters.bytes += KAD_REQUEST_BYTES;
                    if self.kad_answers(from, to) {
                        let at = now + self.round_trip(from, to, self.sc.latency.service_ms);
                        self.queue.push(
                            at,
                            Ev::KadResponse {
                                lookup: id,
                                from: to,
                            },
                        );
                    } else if let Some(after) = self.refused_after(from, to) {
                        // Never later than the timeout a silent node meets.
                        let after = after.min(self.np.kad_peer_timeout_ms * 1000);
                        self.queue.push(
                            now + after,
                            Ev::KadRefused {
                                lookup: id,
                                node: to,
                            },
                        );
                    } else {
                        let at = now + self.np.kad_peer_timeout_ms * 1000;
                        self.queue.push(
                            at,
                            Ev::KadTimeout {
                                lookup: id,
                                node: to,
                            },
                        );
                    }
                }
                Next::Wait => return,
                Next::Finished => {
                    self.lookups[id as usize].done = true;
                    self.lookup_finished(now, id);
                    return;
                }
            }
        }
    }

    pub(super) fn kad_response(&mut self, now: u64, id: u32, from: u32) {
        let (requester, target, shard_key) = {
            let l = &self.lookups[id as usize];
            if l.done {
                return;
            }
            let key = match l.owner {
                Owner::Shard { key, .. } => Some(key),
                _ => None,
            };
            (l.from, l.iter.target(), key)
        };
        self.maybe_insert(from, requester);
        let closer = match self.role[from as usize] {
            // Eclipse: a lookup of the key it surrounds gets only fellow
            // sybils, and the sybil's provider records (none, or fellow
            // sybils: `sybil_providers`); other lookups an honest answer.
            Role::Sybil(s) if self.sybils[&s].0 == target => {
                kad::closest_in(&self.sybils[&s].1, &self.ids, target, self.np.k, requester)
            }
            _ => kad::closest_in(
                &self.tables[from as usize],
                &self.ids,
                target,
                self.np.k,
                requester,
            ),
        };
        let providers = match shard_key {
            Some(k) => self.providers_at(from, k),
            None => Vec::new(),
        };
        self.out.counters.bytes +=
            KAD_PEER_BYTES * (closer.len() + providers.len()) as u64 + KAD_REQUEST_BYTES;
        let l = &mut self.lookups[id as usize];
        let depth = l.iter.depth_of(from).unwrap_or(1);
        l.iter.on_success(from, &closer);
        match l.owner {
            Owner::Probe { idx, closest } if closest == from => {
                let started = l.started;
                let rec = &mut self.out.lookups[idx as usize];
                rec.hops = Some(u32::from(depth));
                rec.closest_ms = Some((now - started) as f64 / 1000.0);
            }
            Owner::Shard { search, .. } => {
                let providers: Vec<u32> =
                    providers.into_iter().filter(|&p| p != requester).collect();
                if !providers.is_empty() {
                    // A shard query a peer answered with providers is done.
                    l.iter.finish();
                    l.done = true;
                    self.shard_found(now, search, &providers, u32::from(depth), true);
                    self.shard_done(now, search);
                    return;
                }
            }
            _ => {}
        }
        self.drive(now, id);
    }

    /// The provider records `node` holds for key `k` (none after a restart:
    /// its store is in memory).
    pub(super) fn providers_at(&self, node: u32, k: u32) -> Vec<u32> {
        self.keys[k as usize]
            .holders
            .iter()
            .find(|(h, at, _)| *h == node && self.up_since[node as usize] <= *at)
            .map(|(_, _, list)| list.clone())
            .unwrap_or_default()
    }

    /// When a request to `to` (a Kademlia or a search request) fails
    /// outright instead of going unanswered: `to` is down and the scenario
    /// says down nodes refuse connections (`churn.refused_rtts`), after that
    /// many round trips. Adversaries, partitions and loss stay silent.
    pub(super) fn refused_after(&self, from: u32, to: u32) -> Option<u64> {
        let rtts = self.sc.churn.as_ref()?.refused_rtts?;
        // Across a partition nothing comes back, not even a refusal.
        (!self.online[to as usize] && self.reachable(from, to))
            .then(|| (self.rtt(from, to) as f64 * rtts) as u64)
    }

    /// A down node refused the request: as libp2p's dial failure
    /// (`on_failure`), the peer is failed, its slot freed and the next
    /// peer asked at once; the request stays counted. The entry stays in
    /// the asker's table (libp2p keeps a peer whose last address failed).
    pub(super) fn kad_refused(&mut self, now: u64, id: u32, node: u32) {
        self.out.counters.kad_refused += 1;
        let l = &mut self.lookups[id as usize];
        if l.done {
            return;
        }
        l.failed += 1;
        l.iter.on_failure(node);
        self.drive(now, id);
    }

    pub(super) fn kad_timeout(&mut self, now: u64, id: u32, node: u32) {
        self.out.counters.kad_timeouts += 1;
        let l = &mut self.lookups[id as usize];
        if !l.done {
            l.failed += 1;
        }
        let from = l.from;
        self.repair(from, node);
        self.drive(now, id);
    }

    /// After a failed request, `owner` drops `dead` from its table and puts
    /// a live node of the same bucket in its place (the next one it meets).
    pub(super) fn repair(&mut self, owner: u32, dead: u32) {
        let table = &mut self.tables[owner as usize];
        let Some(pos) = table.iter().position(|&n| n == dead) else {
            return;
        };
        table.swap_remove(pos);
        let own = self.ids[owner as usize];
        let i = kad::bucket(own, self.ids[dead as usize]);
        let sibling = own.xor(Id(
            if i < 128 { 1u128 << (127 - i) } else { 0 },
            if i >= 128 { 1u128 << (255 - i) } else { 0 },
        ));
        let r = self.sorted.range(sibling, i + 1);
        if r.is_empty() {
            return;
        }
        for _ in 0..4 {
            let cand = self.sorted.node(self.rng.gen_range(r.clone()));
            if self.online[cand as usize] && !self.tables[owner as usize].contains(&cand) {
                self.tables[owner as usize].push(cand);
                self.out.counters.table_repairs += 1;
                return;
            }
        }
    }

    /// `owner` heard from `peer`: added when its bucket has room.
    pub(super) fn maybe_insert(&mut self, owner: u32, peer: u32) {
        if owner == peer || self.tables[owner as usize].contains(&peer) {
            return;
        }
        let own = self.ids[owner as usize];
        let b = kad::bucket(own, self.ids[peer as usize]);
        let in_bucket = self.tables[owner as usize]
            .iter()
            .filter(|&&n| kad::bucket(own, self.ids[n as usize]) == b)
            .count();
        if in_bucket < self.np.k {
            self.tables[owner as usize].push(peer);
        }
    }

    pub(super) fn lookup_finished(&mut self, now: u64, id: u32) {
        let l = &self.lookups[id as usize];
        match l.owner {
            Owner::Shard { search, .. } => self.shard_done(now, search),
            Owner::Probe { idx, .. } => {
                let rec = &mut self.out.lookups[idx as usize];
                rec.requests = l.requests;
                rec.latency_ms = (now - l.started) as f64 / 1000.0;
            }
            Owner::Bootstrap => {
                let (from, started) = (l.from, l.started);
                self.bootstrapped(now, from, started);
            }
        }
    }

    pub(super) fn probe_lookup(&mut self, now: u64, idx: u32) {
        let honest = self.pop.peers.len();
        let mut from = self.rng.gen_range(0..honest) as u32;
        for _ in 0..honest {
            if self.online[from as usize] {
                break;
            }
            from = (from + 1) % honest as u32;
        }
        let target = Id(self.rng.gen(), self.rng.gen());
        let closest = self
            .sorted
            .closest(&self.ids, target, 1, |n| {
                n != from && self.online[n as usize]
            })
            .first()
            .copied()
            .unwrap_or(u32::MAX);
        while self.out.lookups.len() <= idx as usize {
            self.out.lookups.push(LookupRecord {
                requests: 0,
                hops: None,
                closest_ms: None,
                latency_ms: 0.0,
            });
        }
        let id = self.start_lookup(now, from, target, Owner::Probe { idx, closest });
        self.drive(now, id);
    }
}
