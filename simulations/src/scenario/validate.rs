//! The ranges a scenario must keep ([`Scenario::validate`], one flat
//! list of checks) and the bounds they name.

use agentmesh::config::Replication;

use super::file::{Engine, Scenario};
use super::tables::{Behaviour, Lengths};

/// Fewest connections a swarm scenario may allow a node: the bootstrap
/// waits for [`READY_ROUTING_PEERS`](crate::swarm::READY_ROUTING_PEERS)
/// routing-table peers, and a search asks up to `search_fanout` peers.
pub const MIN_SWARM_CONNECTIONS: u32 = 16;

/// Upper bounds (what this machine can hold).
pub const MAX_NODES: usize = 200_000;
/// Largest starting population.
pub const MAX_AGENTS: usize = 2_000_000;
/// Most searches in one run.
pub const MAX_SEARCHES: usize = 1_000_000;
/// Largest capability vocabulary.
pub const MAX_VOCABULARY: usize = 100_000;
/// Most probes (publish or revoke) in one run.
pub const MAX_PROBES: usize = 100;

impl Scenario {
    /// Checks every range; answers the key at fault and why.
    ///
    /// # Errors
    /// `(key, reason)` for the first value out of range.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        fn range<T: PartialOrd + std::fmt::Display>(
            key: &'static str,
            v: T,
            lo: T,
            hi: T,
        ) -> Result<(), (&'static str, String)> {
            if v >= lo && v <= hi {
                Ok(())
            } else {
                Err((key, format!("{v} is outside {lo}..={hi}")))
            }
        }
        fn finite(key: &'static str, v: f64) -> Result<(), (&'static str, String)> {
            if v.is_finite() {
                Ok(())
            } else {
                Err((key, "must be a finite number".into()))
            }
        }
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err((
                "name",
                "1 to 64 characters of [A-Za-z0-9_-] (it names the output directory)".into(),
            ));
        }
        range("nodes", self.nodes, 2, MAX_NODES)?;
        range("agents", self.agents, 1, MAX_AGENTS)?;
        range("searches", self.searches, 0, MAX_SEARCHES)?;
        finite("duration_s", self.duration_s)?;
        range("duration_s", self.duration_s, 1.0, 7.0 * 86400.0)?;
        range("limit", self.limit, 1, 100)?;
        range("probe_lookups", self.probe_lookups, 0, 100_000)?;
        let c = &self.capabilities;
        range("capabilities.vocabulary", c.vocabulary, 1, MAX_VOCABULARY)?;
        finite("capabilities.zipf_exponent", c.zipf_exponent)?;
        range("capabilities.zipf_exponent", c.zipf_exponent, 0.0, 5.0)?;
        finite("capabilities.search_zipf_exponent", c.search_zipf_exponent)?;
        range(
            "capabilities.search_zipf_exponent",
            c.search_zipf_exponent,
            0.0,
            5.0,
        )?;
        range("capabilities.per_agent_min", c.per_agent_min, 1, 32)?;
        range(
            "capabilities.per_agent_max",
            c.per_agent_max,
            c.per_agent_min,
            32.min(c.vocabulary.max(c.per_agent_min)),
        )?;
        let l = &self.latency;
        for (key, v, hi) in [
            ("latency.rtt_median_ms", l.rtt_median_ms, 5000.0),
            ("latency.rtt_sigma", l.rtt_sigma, 3.0),
            ("latency.connect_rtts", l.connect_rtts, 10.0),
            ("latency.service_ms", l.service_ms, 10_000.0),
            ("latency.answer_ms", l.answer_ms, 10_000.0),
            ("latency.validate_ms", l.validate_ms, 10_000.0),
            ("latency.rank_ms", l.rank_ms, 10_000.0),
        ] {
            finite(key, v)?;
            range(key, v, 0.0, hi)?;
        }
        if l.rtt_median_ms <= 0.0 {
            return Err(("latency.rtt_median_ms", "must be above 0".into()));
        }
        finite("loss", self.loss)?;
        range("loss", self.loss, 0.0, 0.9)?;
        finite("lost_announcements", self.lost_announcements)?;
        range("lost_announcements", self.lost_announcements, 0.0, 1.0)?;
        if let Some(churn) = &self.churn {
            check_lengths("churn.session", &churn.session)?;
            check_lengths("churn.downtime", &churn.downtime)?;
            if let Some(r) = churn.refused_rtts {
                finite("churn.refused_rtts", r)?;
                range("churn.refused_rtts", r, 0.0, 10.0)?;
                if self.engine == Engine::Swarm {
                    return Err((
                        "churn.refused_rtts",
                        "the swarm engine's memory transport refuses a stopped node's \
                         connections at once: remove it, or use engine = \"des\""
                            .into(),
                    ));
                }
            }
        }
        for p in &self.partitions {
            finite("partitions.start_s", p.start_s)?;
            finite("partitions.heal_s", p.heal_s)?;
            range("partitions.start_s", p.start_s, 0.0, self.duration_s)?;
            range("partitions.heal_s", p.heal_s, p.start_s, self.duration_s)?;
            range("partitions.fraction", p.fraction, 0.0, 0.5)?;
        }
        if self.partitions.len() > 16 {
            return Err(("partitions", "at most 16".into()));
        }
        if let Some(f) = &self.flash_crowd {
            range("flash_crowd.start_s", f.start_s, 0.0, self.duration_s)?;
            range(
                "flash_crowd.duration_s",
                f.duration_s,
                0.0,
                self.duration_s - f.start_s,
            )?;
            range(
                "flash_crowd.capability_rank",
                f.capability_rank,
                0,
                c.vocabulary - 1,
            )?;
            range("flash_crowd.share", f.share, 0.0, 1.0)?;
            range(
                "flash_crowd.rate_multiplier",
                f.rate_multiplier,
                1.0,
                1000.0,
            )?;
        }
        if let Some(p) = &self.publish {
            range("publish.probes", p.probes, 0, MAX_PROBES)?;
            range("publish.at_s", p.at_s, 0.0, self.duration_s)?;
            range("publish.interval_s", p.interval_s, 0.0, 86400.0)?;
            // The DES ends a minute after `duration_s`, and a probe past
            // the run would be left out of the figures without a word.
            let last = p.at_s + p.interval_s * p.probes.saturating_sub(1) as f64;
            if last > self.duration_s {
                return Err((
                    "publish.interval_s",
                    format!(
                        "the last of {} probes would be published at {last} s, after duration_s ({} s)",
                        p.probes, self.duration_s
                    ),
                ));
            }
        }
        if let Some(r) = &self.revoke {
            range("revoke.probes", r.probes, 0, MAX_PROBES.min(self.agents))?;
            range("revoke.at_s", r.at_s, 0.0, self.duration_s)?;
            range("revoke.searches", r.searches, 0, MAX_SEARCHES)?;
            range("revoke.window_s", r.window_s, 0.001, 86400.0)?;
        }
        if let Some(a) = &self.adversarial {
            range("adversarial.share", a.share, 0.0, 0.5)?;
            if let Some(e) = &a.eclipse {
                range(
                    "adversarial.eclipse.capability_rank",
                    e.capability_rank,
                    0,
                    c.vocabulary - 1,
                )?;
                range(
                    "adversarial.eclipse.sybils_per_shard",
                    e.sybils_per_shard,
                    1,
                    100,
                )?;
                range("adversarial.eclipse.search_share", e.search_share, 0.0, 1.0)?;
            }
            if a.judge.is_some() && a.behaviour != Behaviour::Takeover {
                return Err((
                    "adversarial.judge",
                    "only behaviour = \"takeover\" writes records for ids the askers hold: \
                     remove it, or set behaviour = \"takeover\""
                        .into(),
                ));
            }
        }
        if let Some(s) = self.node.shards {
            range("node.shards", s, 1, 1024)?;
        }
        if let Some(f) = self.node.search_fanout {
            range("node.search_fanout", f, 1, 256)?;
        }
        if let Some(t) = self.node.search_timeout_ms {
            range("node.search_timeout_ms", t, 1, 60_000)?;
        }
        if self.engine == Engine::Swarm {
            // What the swarm engine does not model is refused, not
            // silently run without: a researcher would read churn (or
            // loss, or adversaries) into figures that have none.
            let unmodelled: [(&'static str, bool); 7] = [
                ("partitions", !self.partitions.is_empty()),
                ("loss", self.loss > 0.0),
                ("lost_announcements", self.lost_announcements > 0.0),
                ("adversarial", self.adversarial.is_some()),
                ("node.shards", self.node.shards.is_some()),
                ("node.search_fanout", self.node.search_fanout.is_some()),
                ("node.search_choice", self.node.search_choice.is_some()),
            ];
            if let Some((key, _)) = unmodelled.iter().find(|(_, set)| *set) {
                return Err((
                    key,
                    "the swarm engine does not model this yet (the real nodes run with their \
                     defaults over a lossless in-memory transport): remove it, or use \
                     engine = \"des\""
                        .into(),
                ));
            }
        }
        if self.engine == Engine::Swarm && self.replication == Some(Replication::Lookups) {
            // Only the home node stores a record: the swarm times a
            // probe's arrival in the other nodes' stores.
            for (key, set) in [
                ("publish", self.publish.is_some()),
                ("revoke", self.revoke.is_some()),
            ] {
                if set {
                    return Err((
                        key,
                        "under replication = \"lookups\" only an agent's home node stores \
                         its record, so the swarm engine has no arrival elsewhere to time: \
                         remove it, or use replication = \"all\" or engine = \"des\""
                            .into(),
                    ));
                }
            }
        }
        if self.engine == Engine::Swarm
            && self.churn.is_none()
            && self.revoke.as_ref().is_some_and(|r| r.searches > 0)
        {
            // Without churn the swarm runs its searches back to back,
            // before any probe: these would all run before the
            // revocation they are meant to watch.
            return Err((
                "revoke.searches",
                "without churn the swarm engine runs the searches back to back before the \
                 probes, so these would not fall inside the revocation's window (it counts \
                 stale results with searches of its own while a tombstone spreads): remove \
                 it, add [churn], or use engine = \"des\""
                    .into(),
            ));
        }
        if let Some(c) = self.swarm.max_connections {
            if self.engine == Engine::Des {
                return Err((
                    "swarm.max_connections",
                    "the DES does not model connections or their limit: remove it, or use \
                     engine = \"swarm\""
                        .into(),
                ));
            }
            range("swarm.max_connections", c, MIN_SWARM_CONNECTIONS, 4096)?;
        }
        for (key, set) in [
            (
                "swarm.trim_connections",
                self.swarm.trim_connections.is_some(),
            ),
            ("swarm.security", self.swarm.security.is_some()),
        ] {
            if set && self.engine == Engine::Des {
                return Err((
                    key,
                    "the DES does not model connections: remove it, or use engine = \"swarm\""
                        .into(),
                ));
            }
        }
        if self.engine == Engine::Swarm && self.nodes > 2000 {
            return Err((
                "nodes",
                "the swarm engine runs at most 2000 nodes (use engine = \"des\")".into(),
            ));
        }
        Ok(())
    }
}

fn check_lengths(key: &'static str, l: &Lengths) -> Result<(), (&'static str, String)> {
    let ok = match *l {
        Lengths::Weibull { shape, scale_s } => {
            shape.is_finite()
                && scale_s.is_finite()
                && (0.05..=20.0).contains(&shape)
                && (1.0..=1e8).contains(&scale_s)
        }
        Lengths::Lognormal { median_s, sigma } => {
            median_s.is_finite()
                && sigma.is_finite()
                && (1.0..=1e8).contains(&median_s)
                && (0.0..=5.0).contains(&sigma)
        }
    };
    if ok {
        Ok(())
    } else {
        Err((
            key,
            "weibull needs shape in 0.05..=20 and scale_s in 1..=1e8; lognormal needs \
             median_s in 1..=1e8 and sigma in 0..=5"
                .into(),
        ))
    }
}
