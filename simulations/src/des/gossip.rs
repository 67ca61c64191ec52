//! Gossip of the records whose propagation is timed (published agents and
//! tombstones), message by message as gossipsub moves them: the publisher
//! floods its connected peers (`flood_publish`), each node judges a new
//! record (`validate_ms`) and forwards it to D mesh peers, and at its next
//! heartbeat sends IHAVE to D_lazy others, which IWANT what they lack.
//! Duplicates are counted and dropped. The mesh peers are drawn from the
//! node's live connections each time (the heartbeat keeps the mesh at D).

use rand::Rng;

use super::{Ev, Role, Sim, CONTROL_BYTES, RECORD_BYTES};

/// What a gossip item carries.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Publish,
    Tombstone,
}

pub(super) struct Item {
    kind: Kind,
    at: u64,
    /// When each node first received it (`u64::MAX`: never).
    pub(super) arrival: Vec<u64>,
    /// Nodes live when it was sent (the ones it should reach).
    live: Vec<bool>,
}

impl Sim<'_> {
    fn live_origin(&self, home: u32) -> u32 {
        let honest = self.pop.peers.len() as u32;
        let mut n = home;
        for _ in 0..honest {
            if self.online[n as usize] {
                return n;
            }
            n = (n + 1) % honest;
        }
        home
    }

    fn new_item(&mut self, now: u64, kind: Kind, origin: u32) -> u32 {
        let mut arrival = vec![u64::MAX; self.ids.len()];
        arrival[origin as usize] = now;
        let idx = self.gossip.len() as u32;
        self.gossip.push(Item {
            kind,
            at: now,
            arrival,
            live: self.online.clone(),
        });
        idx
    }

    pub(super) fn publish_arrival(&self, probe: usize, node: u32) -> u64 {
        match self.publish_item[probe] {
            u32::MAX => u64::MAX,
            item => self.gossip[item as usize].arrival[node as usize],
        }
    }

    pub(super) fn publish(&mut self, now: u64, i: u32) {
        let p = &self.pop.publish[i as usize];
        let home = p.home;
        let caps = p.capabilities.clone();
        let origin = self.live_origin(home);
        let item = self.new_item(now, Kind::Publish, origin);
        self.publish_item[i as usize] = item;
        // The home provides the new agent's capabilities under its shard; a
        // holder whose list is full ignores it (libp2p's MemoryStore).
        let shard = self.pop.shard[home as usize];
        let max = self.np.max_providers_per_key;
        for c in caps {
            match self.key_index.get(&(c, shard)).copied() {
                Some(k) => {
                    if !self.keys[k as usize].providers.contains(&home) {
                        self.keys[k as usize].providers.push(home);
                    }
                    let holders = self.keys[k as usize].holders.len();
                    for h in 0..holders {
                        let node = self.keys[k as usize].holders[h].0;
                        let ok = self.online[node as usize]
                            && self.reachable(origin, node)
                            && !matches!(self.role[node as usize], Role::Sybil(_));
                        let list = &mut self.keys[k as usize].holders[h].2;
                        if ok && list.len() < max && !list.contains(&home) {
                            list.push(home);
                        }
                    }
                }
                None => {
                    self.add_key(c, shard, vec![home], now);
                }
            }
        }
        self.flood(now, item, origin);
    }

    pub(super) fn revoke(&mut self, now: u64) {
        for &agent in &self.pop.revoke {
            let origin = self.live_origin(self.pop.home[agent as usize]);
            let item = self.new_item(now, Kind::Tombstone, origin);
            self.revoked.insert(agent, item);
            self.flood(now, item, origin);
        }
    }

    fn send(&mut self, now: u64, item: u32, from: u32, to: u32) {
        self.out.counters.gossip_messages += 1;
        self.out.counters.bytes += RECORD_BYTES + 200;
        if self.online[to as usize] && self.reachable(from, to) && !self.lost(1) {
            let at = now + self.rtt(from, to) / 2;
            self.queue.push(at, Ev::Gossip { item, to });
        }
    }

    /// The publisher sends to every live connection.
    fn flood(&mut self, now: u64, item: u32, origin: u32) {
        let peers: Vec<u32> = self.tables[origin as usize]
            .iter()
            .copied()
            .filter(|&p| self.online[p as usize])
            .collect();
        for p in peers {
            self.send(now, item, origin, p);
        }
        self.schedule_ihave(now, item, origin);
    }

    pub(super) fn gossip_deliver(&mut self, now: u64, item: u32, to: u32) {
        if !self.online[to as usize] {
            return;
        }
        let a = &mut self.gossip[item as usize].arrival[to as usize];
        if *a != u64::MAX {
            self.out.counters.gossip_duplicates += 1;
            return;
        }
        *a = now;
        let at = now + (self.sc.latency.validate_ms * 1000.0) as u64;
        self.queue.push(at, Ev::Forward { item, node: to });
    }

    /// `count` random live connections of `node`.
    fn random_live(&mut self, node: u32, count: usize) -> Vec<u32> {
        let table = &self.tables[node as usize];
        let mut out = Vec::with_capacity(count);
        if table.is_empty() {
            return out;
        }
        for _ in 0..count * 4 {
            if out.len() == count {
                break;
            }
            let p = table[self.rng.gen_range(0..table.len())];
            if self.online[p as usize] && !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }

    pub(super) fn gossip_forward(&mut self, now: u64, item: u32, node: u32) {
        if !self.online[node as usize] {
            return;
        }
        for p in self.random_live(node, self.np.gossip_d) {
            self.send(now, item, node, p);
        }
        self.schedule_ihave(now, item, node);
    }

    fn schedule_ihave(&mut self, now: u64, item: u32, node: u32) {
        let beat = self.np.heartbeat_ms * 1000;
        let phase = super::mix(u64::from(node) ^ self.seed) % beat;
        let next = (now.saturating_sub(phase) / beat + 1) * beat + phase;
        self.queue.push(next, Ev::IHave { item, node });
    }

    pub(super) fn gossip_ihave(&mut self, now: u64, item: u32, node: u32) {
        if !self.online[node as usize] {
            return;
        }
        for q in self.random_live(node, self.np.gossip_d_lazy) {
            self.out.counters.gossip_control += 1;
            self.out.counters.bytes += CONTROL_BYTES;
            if self.reachable(node, q) && !self.lost(1) {
                let at = now + self.rtt(node, q) / 2;
                self.queue.push(
                    at,
                    Ev::IHaveArrive {
                        item,
                        to: q,
                        from: node,
                    },
                );
            }
        }
    }

    pub(super) fn gossip_ihave_arrive(&mut self, now: u64, item: u32, to: u32, from: u32) {
        if !self.online[to as usize] || self.gossip[item as usize].arrival[to as usize] != u64::MAX
        {
            return;
        }
        // IWANT, and the record back.
        self.out.counters.gossip_control += 1;
        self.out.counters.gossip_messages += 1;
        self.out.counters.bytes += CONTROL_BYTES + RECORD_BYTES + 200;
        if self.reachable(to, from) && !self.lost(2) {
            let at = now + self.rtt(to, from);
            self.queue.push(at, Ev::Gossip { item, to });
        }
    }

    /// Propagation and revocation times over the honest nodes live at each send.
    pub(super) fn collect_gossip(&mut self) {
        let honest = self.pop.peers.len();
        for item in &self.gossip {
            let (values, unreached) = match item.kind {
                Kind::Publish => (
                    &mut self.out.propagation_ms,
                    &mut self.out.propagation_unreached,
                ),
                Kind::Tombstone => (
                    &mut self.out.revocation_ms,
                    &mut self.out.revocation_unreached,
                ),
            };
            for n in 0..honest {
                if !item.live[n] {
                    continue;
                }
                match item.arrival[n] {
                    u64::MAX => *unreached += 1,
                    t => values.push((t - item.at) as f64 / 1000.0),
                }
            }
        }
    }
}
