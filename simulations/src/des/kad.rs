//! Kademlia as the engine models it: 256-bit keys under the XOR metric,
//! routing tables built by the bucket rules, and the closest-peers
//! iterator of rust-libp2p (`ClosestPeersIter`: α requests in flight, a
//! stall after α responses without progress widens to k, done when the k
//! closest known peers have answered, unresponsive after the per-peer
//! timeout), re-stated over node indices and virtual time.

use std::ops::Range;

use rand::seq::index::sample;
use rand::Rng;

/// A 256-bit Kademlia key (or an XOR distance), big-endian halves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Id(pub u128, pub u128);

impl Id {
    /// From 32 big-endian bytes.
    pub fn from_bytes(b: &[u8; 32]) -> Self {
        let hi = u128::from_be_bytes(b[..16].try_into().expect("16 bytes"));
        let lo = u128::from_be_bytes(b[16..].try_into().expect("16 bytes"));
        Id(hi, lo)
    }

    /// The XOR distance.
    pub fn xor(self, o: Id) -> Id {
        Id(self.0 ^ o.0, self.1 ^ o.1)
    }

    /// Leading zero bits (256 for zero): the common prefix length of two
    /// keys when called on their distance.
    pub fn leading_zeros(self) -> u32 {
        if self.0 != 0 {
            self.0.leading_zeros()
        } else {
            128 + self.1.leading_zeros()
        }
    }

    /// Only bit `i` (0 = most significant) set.
    fn bit(i: u32) -> Id {
        if i < 128 {
            Id(1u128 << (127 - i), 0)
        } else {
            Id(0, 1u128 << (255 - i))
        }
    }

    /// The first `len` bits kept, the rest zero.
    fn prefix(self, len: u32) -> Id {
        let keep = |v: u128, n: u32| -> u128 {
            match n {
                0 => 0,
                n if n >= 128 => v,
                n => v & !(u128::MAX >> n),
            }
        };
        Id(keep(self.0, len), keep(self.1, len.saturating_sub(128)))
    }

    /// The first `len` bits kept, the rest one.
    fn prefix_max(self, len: u32) -> Id {
        let fill = |v: u128, n: u32| -> u128 {
            match n {
                0 => u128::MAX,
                n if n >= 128 => v,
                n => v | (u128::MAX >> n),
            }
        };
        Id(fill(self.0, len), fill(self.1, len.saturating_sub(128)))
    }
}

/// All node keys, sorted, for range queries over prefixes.
#[derive(Debug)]
pub struct Sorted {
    keys: Vec<Id>,
    nodes: Vec<u32>,
}

impl Sorted {
    /// Sorts `ids` (indexed by node).
    pub fn new(ids: &[Id]) -> Self {
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        order.sort_by_key(|&n| ids[n as usize]);
        Self {
            keys: order.iter().map(|&n| ids[n as usize]).collect(),
            nodes: order,
        }
    }

    /// Positions of the nodes whose key shares the first `len` bits of `id`.
    pub fn range(&self, id: Id, len: u32) -> Range<usize> {
        let lo = id.prefix(len);
        let hi = id.prefix_max(len);
        self.keys.partition_point(|k| *k < lo)..self.keys.partition_point(|k| *k <= hi)
    }

    /// The node at a position.
    pub fn node(&self, pos: usize) -> u32 {
        self.nodes[pos]
    }

    /// The `k` nodes closest to `target` among those `eligible`, closest first
    /// (exact: the smallest prefix subtree around the target holding k of them).
    pub fn closest(
        &self,
        ids: &[Id],
        target: Id,
        k: usize,
        eligible: impl Fn(u32) -> bool,
    ) -> Vec<u32> {
        let mut len = 256u32;
        loop {
            let r = self.range(target, len);
            let n = r.clone().filter(|&p| eligible(self.nodes[p])).count();
            if n >= k || len == 0 {
                let mut v: Vec<u32> = r.map(|p| self.nodes[p]).filter(|&x| eligible(x)).collect();
                v.sort_by_key(|&x| ids[x as usize].xor(target));
                v.truncate(k);
                return v;
            }
            len = len.saturating_sub(if len > 40 { 8 } else { 1 });
        }
    }
}

/// Builds every node's routing table by the bucket rules: bucket `i` of
/// node `n` holds up to `k` of the nodes whose key shares exactly `i`
/// leading bits with `n`'s (all of them when there are at most `k`; else
/// `k` at random, the ones a long-running node happened to meet first).
pub fn build_tables(ids: &[Id], sorted: &Sorted, k: usize, rng: &mut impl Rng) -> Vec<Vec<u32>> {
    let mut tables = Vec::with_capacity(ids.len());
    for &id in ids {
        let mut entries = Vec::new();
        for i in 0..256u32 {
            let sibling = id.xor(Id::bit(i));
            let r = sorted.range(sibling, i + 1);
            if r.len() <= k {
                entries.extend(r.clone().map(|p| sorted.node(p)));
            } else {
                for j in sample(rng, r.len(), k) {
                    entries.push(sorted.node(r.start + j));
                }
            }
            // Deeper buckets are empty once only this node shares the prefix.
            if sorted.range(id, i + 1).len() <= 1 {
                break;
            }
        }
        entries.shrink_to_fit();
        tables.push(entries);
    }
    tables
}

/// The bucket index (common prefix length) of `other` in `own`'s table.
pub fn bucket(own: Id, other: Id) -> u32 {
    own.xor(other).leading_zeros()
}

/// The `k` entries of `table` closest to `target`, leaving out `except`.
pub fn closest_in(table: &[u32], ids: &[Id], target: Id, k: usize, except: u32) -> Vec<(Id, u32)> {
    let mut v: Vec<(Id, u32)> = table
        .iter()
        .filter(|&&n| n != except)
        .map(|&n| (ids[n as usize].xor(target), n))
        .collect();
    if v.len() > k {
        v.select_nth_unstable(k - 1);
        v.truncate(k);
    }
    v.sort_unstable();
    v
}

/// A peer's state in a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Known, not asked yet.
    NotContacted,
    /// Asked; unresponsive from the given time (µs).
    Waiting(u64),
    /// Past its timeout (a late answer still counts).
    Unresponsive,
    /// Its request failed.
    Failed,
    /// It answered.
    Succeeded,
}

#[derive(Debug, Clone, Copy)]
struct Cand {
    dist: Id,
    node: u32,
    state: PeerState,
    depth: u8,
}

/// What the iterator wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send a request to this node; its hop depth.
    Contact(u32, u8),
    /// At capacity, or waiting with nobody new to ask.
    Wait,
    /// Done.
    Finished,
}

/// rust-libp2p's `ClosestPeersIter`, over node indices.
#[derive(Debug)]
pub struct Iter {
    target: Id,
    cands: Vec<Cand>,
    num_waiting: usize,
    no_progress: usize,
    stalled: bool,
    finished: bool,
    k: usize,
    alpha: usize,
    timeout_us: u64,
}

impl Iter {
    /// A lookup of `target` seeded with `seeds` (distance, node), at depth 1.
    pub fn new(target: Id, seeds: Vec<(Id, u32)>, k: usize, alpha: usize, timeout_us: u64) -> Self {
        let mut cands: Vec<Cand> = seeds
            .into_iter()
            .map(|(dist, node)| Cand {
                dist,
                node,
                state: PeerState::NotContacted,
                depth: 1,
            })
            .collect();
        cands.sort_by_key(|c| c.dist);
        cands.dedup_by_key(|c| c.node);
        Self {
            target,
            cands,
            num_waiting: 0,
            no_progress: 0,
            stalled: false,
            finished: false,
            k,
            alpha,
            timeout_us,
        }
    }

    /// The key looked up.
    pub fn target(&self) -> Id {
        self.target
    }

    /// Whether it finished.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Ends it now.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// `node` answered with `closer` peers; false when it was not waited for.
    pub fn on_success(&mut self, node: u32, closer: &[(Id, u32)]) -> bool {
        if self.finished {
            return false;
        }
        let Some(i) = self.cands.iter().position(|c| c.node == node) else {
            return false;
        };
        let depth = match self.cands[i].state {
            PeerState::Waiting(_) => {
                self.num_waiting -= 1;
                self.cands[i].depth
            }
            PeerState::Unresponsive => self.cands[i].depth,
            _ => return false,
        };
        self.cands[i].state = PeerState::Succeeded;
        let cur_range = self
            .cands
            .get(self.k - 1)
            .or(self.cands.last())
            .map_or(Id(u128::MAX, u128::MAX), |c| c.dist);
        let mut progress = self.cands.len() < self.k;
        for &(dist, n) in closer {
            match self.cands.binary_search_by_key(&dist, |c| c.dist) {
                Ok(_) => {}
                Err(pos) => {
                    self.cands.insert(
                        pos,
                        Cand {
                            dist,
                            node: n,
                            state: PeerState::NotContacted,
                            depth: depth.saturating_add(1),
                        },
                    );
                    progress |= dist < cur_range;
                }
            }
        }
        if self.stalled {
            if progress {
                self.stalled = false;
                self.no_progress = 0;
            }
        } else {
            self.no_progress = if progress { 0 } else { self.no_progress + 1 };
            if self.no_progress >= self.alpha {
                self.stalled = true;
            }
        }
        true
    }

    /// `node`'s request failed.
    pub fn on_failure(&mut self, node: u32) {
        if self.finished {
            return;
        }
        if let Some(c) = self.cands.iter_mut().find(|c| c.node == node) {
            match c.state {
                PeerState::Waiting(_) => {
                    self.num_waiting -= 1;
                    c.state = PeerState::Failed;
                }
                PeerState::Unresponsive => c.state = PeerState::Failed,
                _ => {}
            }
        }
    }

    fn at_capacity(&self) -> bool {
        if self.finished {
            return true;
        }
        if self.stalled {
            self.num_waiting >= self.k.max(self.alpha)
        } else {
            self.num_waiting >= self.alpha
        }
    }

    /// The iterator's next step at `now` (µs), as `ClosestPeersIter::next`.
    pub fn next(&mut self, now: u64) -> Next {
        if self.finished {
            return Next::Finished;
        }
        let mut result_counter = Some(0usize);
        let at_capacity = self.at_capacity();
        for i in 0..self.cands.len() {
            let c = self.cands[i];
            match c.state {
                PeerState::Waiting(timeout) => {
                    if now >= timeout {
                        self.num_waiting -= 1;
                        self.cands[i].state = PeerState::Unresponsive;
                    } else if at_capacity {
                        return Next::Wait;
                    } else {
                        result_counter = None;
                    }
                }
                PeerState::Succeeded => {
                    if let Some(cnt) = result_counter.as_mut() {
                        *cnt += 1;
                        if *cnt >= self.k {
                            self.finished = true;
                            return Next::Finished;
                        }
                    }
                }
                PeerState::NotContacted => {
                    if !at_capacity {
                        self.cands[i].state = PeerState::Waiting(now + self.timeout_us);
                        self.num_waiting += 1;
                        return Next::Contact(c.node, c.depth);
                    }
                    return Next::Wait;
                }
                PeerState::Unresponsive | PeerState::Failed => {}
            }
        }
        if self.num_waiting > 0 {
            Next::Wait
        } else {
            self.finished = true;
            Next::Finished
        }
    }

    /// The depth at which `node` was found (None: unknown to this lookup).
    pub fn depth_of(&self, node: u32) -> Option<u8> {
        self.cands.iter().find(|c| c.node == node).map(|c| c.depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_and_buckets() {
        let ids: Vec<Id> = (0..64u128).map(|i| Id(i << 122, 0)).collect();
        let s = Sorted::new(&ids);
        // 6 leading bits vary: every key shares the first 0 bits.
        assert_eq!(s.range(ids[0], 0).len(), 64);
        assert_eq!(s.range(ids[0], 1).len(), 32);
        assert_eq!(s.range(ids[5], 6).len(), 1);
        let mut rng = rand::thread_rng();
        let t = build_tables(&ids, &s, 20, &mut rng);
        // Node 0: bucket 0 has 32 candidates (20 kept), bucket 1 16, ... bucket 5 one.
        assert_eq!(t[0].len(), 20 + 16 + 8 + 4 + 2 + 1);
        let c = s.closest(&ids, ids[9], 3, |_| true);
        assert_eq!(c[0], 9);
    }
}
