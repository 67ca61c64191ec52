//! Churn: the outages of `population::plan_outages` (sessions and
//! downtimes drawn from the scenario's distributions), the same plan the
//! swarm engine plays for the seed; a node that comes back has lost its (in-memory) provider store,
//! bootstraps with a lookup of its own key and, once that lookup ends,
//! announces its own keys again (approximating the node, which starts
//! announcing them at its first routing update, `mesh/events.rs`); every
//! `reprovide` interval the k closest live nodes take over each shard
//! key's provider records.

use super::{Owner, Role, Sim};

impl Sim<'_> {
    pub(super) fn node_down(&mut self, n: u32) {
        self.online[n as usize] = false;
    }

    pub(super) fn node_up(&mut self, now: u64, n: u32) {
        self.online[n as usize] = true;
        self.up_since[n as usize] = now;
        // A restarted node bootstraps: a lookup of its own key, through
        // which the peers it meets put it back in their tables.
        let id = self.start_lookup(now, n, self.ids[n as usize], Owner::Bootstrap);
        self.drive(now, id);
    }

    /// The bootstrap lookup of `n`, started at `started`, has ended: unless
    /// `n` went down since, it announces its keys again, and the k closest
    /// live nodes to each that `n` can reach now hold it among their
    /// providers (a holder whose list is full ignores it, as libp2p's
    /// `MemoryStore` does). Placed directly, as [`Sim::reprovide`] places
    /// them; the messages are estimated.
    pub(super) fn bootstrapped(&mut self, now: u64, n: u32, started: u64) {
        if !self.online[n as usize] || self.up_since[n as usize] != started {
            return;
        }
        let max = self.np.max_providers_per_key;
        for k in self.provided_keys(n) {
            let target = self.keys[k as usize].target;
            let closest = self.closest_online(target, self.np.k);
            self.out.counters.reprovide_messages_estimated += closest.len() as u64;
            for h in closest {
                if !self.reachable(n, h) || matches!(self.role[h as usize], Role::Sybil(_)) {
                    continue;
                }
                let fresh_since = self.up_since[h as usize];
                let key = &mut self.keys[k as usize];
                match key
                    .holders
                    .iter_mut()
                    .find(|(o, at, _)| *o == h && fresh_since <= *at)
                {
                    Some((_, _, list)) => {
                        if list.len() < max && !list.contains(&n) {
                            list.push(n);
                        }
                    }
                    // Not a holder, or one that lost its records in a restart.
                    None => {
                        key.holders.retain(|(o, _, _)| *o != h);
                        key.holders.push((h, now, vec![n]));
                    }
                }
            }
        }
    }

    /// The shard keys `n` provides: its agents' capabilities under its
    /// shard, those of the probes published at it so far included.
    fn provided_keys(&self, n: u32) -> Vec<u32> {
        if n as usize >= self.pop.peers.len() {
            return Vec::new();
        }
        let mut caps: Vec<u32> = self
            .node_agents
            .get(n as usize)
            .iter()
            .flat_map(|&a| self.pop.agent_caps.get(a as usize).iter().copied())
            .collect();
        for (p, item) in self.pop.publish.iter().zip(&self.publish_item) {
            if p.home == n && *item != u32::MAX {
                caps.extend(p.capabilities.iter().copied());
            }
        }
        caps.sort_unstable();
        caps.dedup();
        let shard = self.pop.shard[n as usize];
        caps.into_iter()
            .filter_map(|c| self.key_index.get(&(c, shard)).copied())
            .collect()
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
                        return (h, now, self.sybil_providers(h));
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{Ev, Owner, Sim};
    use crate::population::Population;
    use crate::scenario::Scenario;

    fn churning() -> Scenario {
        let text = r#"
name = "t"
engine = "des"
seed = 5
nodes = 60
agents = 300
searches = 10
duration_s = 60
probe_lookups = 0
replication = "lookups"
[capabilities]
vocabulary = 20
[churn.session]
distribution = "weibull"
shape = 0.5
scale_s = 600
[churn.downtime]
distribution = "lognormal"
median_s = 300
sigma = 1.0
"#;
        Scenario::parse(text, Path::new("test.toml")).unwrap()
    }

    /// A node with a key, and that key: every node of the placed state
    /// that provides something does.
    fn provider(sim: &Sim<'_>) -> (u32, u32) {
        (0..sim.pop.peers.len() as u32)
            .find_map(|n| sim.provided_keys(n).first().map(|&k| (n, k)))
            .expect("a node that provides a key")
    }

    /// Every holder of `k` restarts at `at`, losing its records.
    fn holders_restart(sim: &mut Sim<'_>, k: u32, at: u64) {
        let holders: Vec<u32> = sim.keys[k as usize].holders.iter().map(|h| h.0).collect();
        for h in holders {
            sim.up_since[h as usize] = at;
        }
    }

    /// Runs the queue until `n`'s bootstrap lookup has ended.
    fn until_bootstrapped(sim: &mut Sim<'_>, n: u32) {
        let id = (0..sim.lookups.len())
            .rev()
            .find(|&i| {
                let l = &sim.lookups[i];
                l.from == n && matches!(l.owner, Owner::Bootstrap)
            })
            .expect("a bootstrap lookup");
        while !sim.lookups[id].done {
            let (now, ev) = sim.queue.pop().expect("the lookup ends");
            sim.handle(now, ev);
        }
    }

    fn holding(sim: &Sim<'_>, k: u32, n: u32) -> usize {
        (0..sim.ids.len() as u32)
            .filter(|&h| sim.providers_at(h, k).contains(&n))
            .count()
    }

    #[test]
    fn the_model_stops_and_starts_the_nodes_of_the_swarms_outage_plan() {
        let sc = churning();
        let pop = Population::generate(&sc, 5);
        let plan = crate::population::plan_outages(&sc, 5);
        let mut sim = Sim::place(&sc, &pop, 5);
        sim.schedule_all();
        // Replay the plan by hand, and the queue's churn events beside it.
        let mut expected: Vec<(u64, bool, u32)> = Vec::new();
        for o in &plan {
            if !o.down_at.is_zero() {
                expected.push((o.down_at.as_micros() as u64, false, o.node as u32));
            }
            expected.push((o.up_at.as_micros() as u64, true, o.node as u32));
        }
        expected.sort_unstable();
        let mut got: Vec<(u64, bool, u32)> = Vec::new();
        while let Some((at, ev)) = sim.queue.pop() {
            match ev {
                Ev::NodeDown(n) => got.push((at, false, n)),
                Ev::NodeUp(n) => got.push((at, true, n)),
                _ => {}
            }
        }
        got.sort_unstable();
        assert!(!expected.is_empty(), "the plan has outages");
        assert_eq!(got, expected);
        // A node down at the start is one whose first outage starts at 0.
        let placed = Sim::place(&sc, &pop, 5);
        for n in 0..sc.nodes {
            let down = plan.iter().any(|o| o.node == n && o.down_at.is_zero());
            assert_eq!(placed.online[n], !down, "node {n}");
        }
    }

    #[test]
    fn a_restarted_node_announces_its_keys_again_once_bootstrapped() {
        let sc = churning();
        let pop = Population::generate(&sc, 5);
        let mut sim = Sim::place(&sc, &pop, 5);
        let (n, k) = provider(&sim);
        assert!(holding(&sim, k, n) > 0, "the placed state holds it");

        // Every holder restarts and loses the record; then the provider
        // itself restarts.
        holders_restart(&mut sim, k, 1_000);
        assert_eq!(holding(&sim, k, n), 0);
        sim.handle(2_000, Ev::NodeDown(n));
        sim.handle(3_000, Ev::NodeUp(n));
        assert_eq!(holding(&sim, k, n), 0, "not before its bootstrap ends");
        until_bootstrapped(&mut sim, n);
        assert!(
            holding(&sim, k, n) >= sim.np.k / 2,
            "held at {} nodes after the bootstrap",
            holding(&sim, k, n)
        );
    }

    #[test]
    fn only_a_node_up_in_the_session_its_bootstrap_began_announces() {
        let sc = churning();
        let pop = Population::generate(&sc, 5);
        let mut sim = Sim::place(&sc, &pop, 5);
        let (n, k) = provider(&sim);
        holders_restart(&mut sim, k, 1_000);
        sim.handle(2_000, Ev::NodeDown(n));
        sim.handle(3_000, Ev::NodeUp(n));
        // A lookup begun in an earlier session ends: nothing.
        sim.bootstrapped(4_000, n, 2_500);
        assert_eq!(holding(&sim, k, n), 0, "a lookup of an earlier session");
        // The node is down when its lookup ends: nothing.
        sim.handle(4_000, Ev::NodeDown(n));
        sim.bootstrapped(5_000, n, 3_000);
        assert_eq!(holding(&sim, k, n), 0, "a node that is down");
        // Up again: the lookup of this session announces.
        sim.handle(6_000, Ev::NodeUp(n));
        until_bootstrapped(&mut sim, n);
        assert!(holding(&sim, k, n) > 0);
    }
}
