//! Churn: sessions and downtimes drawn from the scenario's distributions;
//! a node that comes back has lost its (in-memory) provider store and
//! bootstraps with a lookup of its own key; every `reprovide` interval the
//! k closest live nodes take over each shard key's provider records.

use super::{Ev, Owner, Role, Sim};
use crate::population::rng_for;

impl Sim<'_> {
    pub(super) fn node_down(&mut self, now: u64, n: u32) {
        self.online[n as usize] = false;
        if let Some(churn) = &self.sc.churn {
            let mut r = rng_for(self.seed ^ u64::from(n), 15 + now);
            let d = churn.downtime.sample(&mut r);
            self.queue.push(now + (d * 1e6) as u64, Ev::NodeUp(n));
        }
    }

    pub(super) fn node_up(&mut self, now: u64, n: u32) {
        self.online[n as usize] = true;
        self.up_since[n as usize] = now;
        if let Some(churn) = &self.sc.churn {
            let mut r = rng_for(self.seed ^ u64::from(n), 16 + now);
            let d = churn.session.sample(&mut r);
            self.queue.push(now + (d * 1e6) as u64, Ev::NodeDown(n));
        }
        // A restarted node bootstraps: a lookup of its own key, through
        // which the peers it meets put it back in their tables.
        let id = self.start_lookup(now, n, self.ids[n as usize], Owner::Bootstrap);
        self.drive(now, id);
    }

    /// Every provider re-announces its keys: the k closest live nodes now
    /// hold them. A holder that kept its records (no restart) keeps its list;
    /// a new one takes the first announcements of live providers.
    pub(super) fn reprovide(&mut self, now: u64) {
        let max = self.np.max_providers_per_key;
        for k in 0..self.keys.len() {
            let target = self.keys[k].target;
            let new = self.closest_online(target, self.np.k);
            let live: Vec<u32> = self.keys[k]
                .providers
                .iter()
                .copied()
                .filter(|&p| self.online[p as usize])
                .collect();
            self.out.counters.reprovide_messages_estimated += (live.len() * self.np.k) as u64;
            let old = std::mem::take(&mut self.keys[k].holders);
            let holders = new
                .into_iter()
                .map(|h| {
                    if matches!(self.role[h as usize], Role::Sybil(_)) {
                        return (h, now, Vec::new());
                    }
                    match old
                        .iter()
                        .find(|(o, at, _)| *o == h && self.up_since[h as usize] <= *at)
                    {
                        Some((_, at, list)) => (h, *at, list.clone()),
                        None => (h, now, live.iter().copied().take(max).collect()),
                    }
                })
                .collect();
            self.keys[k].holders = holders;
        }
    }
}
