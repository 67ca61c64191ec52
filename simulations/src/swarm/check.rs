//! The bounds a run's parameters must keep, checked before any node
//! starts: each refusal names the parameter and says why.

use std::time::Duration;

use agentmesh::config::Replication;
use anyhow::{bail, Result};

use crate::model::{Outage, SwarmParams};

/// Most nodes one run starts (threads and memory maps per node bound it
/// well before this; see the crate's notes).
pub const MAX_NODES: usize = 4096;
/// Most results a search asks for (the API's own page bound).
pub const MAX_LIMIT: usize = 1000;

pub(super) fn check(p: &SwarmParams) -> Result<()> {
    if p.nodes == 0 || p.nodes > MAX_NODES {
        bail!("nodes: {} is not in 1..={MAX_NODES}", p.nodes);
    }
    if p.limit == 0 || p.limit > MAX_LIMIT {
        bail!("limit: {} is not in 1..={MAX_LIMIT}", p.limit);
    }
    if p.search_timeout.is_zero() || p.search_timeout > Duration::from_secs(60) {
        bail!("search_timeout: must be above zero and at most 60 s (the node's bound)");
    }
    if p.max_connections == Some(0) {
        bail!("max_connections: 0 would leave every node alone");
    }
    if p.revoke_probes > p.agents.len() {
        bail!(
            "revoke_probes: {} is more than the {} agents",
            p.revoke_probes,
            p.agents.len()
        );
    }
    for (what, list) in [("agents", &p.agents), ("publish_probes", &p.publish_probes)] {
        for (i, a) in list.iter().enumerate() {
            if a.home >= p.nodes {
                bail!(
                    "{what}[{i}].home: {} is not a node (0..{})",
                    a.home,
                    p.nodes
                );
            }
            if a.capabilities.is_empty() {
                bail!("{what}[{i}].capabilities: an agent needs at least one");
            }
        }
    }
    check_outages(p)?;
    if !p.outages.is_empty() && p.publish_at.len() != p.publish_probes.len() {
        bail!(
            "publish_at: {} times for {} publish probes (under churn each probe needs its time)",
            p.publish_at.len(),
            p.publish_probes.len()
        );
    }
    if p.replication == Replication::Lookups
        && (!p.publish_probes.is_empty() || p.revoke_probes > 0)
    {
        bail!(
            "publish_probes, revoke_probes: under replication \"lookups\" only an agent's home \
             node stores its record, so there is no arrival at the other nodes to time"
        );
    }
    for (i, s) in p.searches.iter().enumerate() {
        if s.from >= p.nodes {
            bail!(
                "searches[{i}].from: {} is not a node (0..{})",
                s.from,
                p.nodes
            );
        }
        if s.capability.trim().is_empty() {
            bail!("searches[{i}].capability: empty");
        }
    }
    Ok(())
}

/// Each outage names a node, ends after it starts, and does not overlap
/// the node's other outages.
fn check_outages(p: &SwarmParams) -> Result<()> {
    let mut by_node: Vec<&Outage> = p.outages.iter().collect();
    by_node.sort_by_key(|o| (o.node, o.down_at));
    for (i, o) in by_node.iter().enumerate() {
        if o.node >= p.nodes {
            bail!("outages: node {} is not a node (0..{})", o.node, p.nodes);
        }
        if o.up_at <= o.down_at {
            bail!(
                "outages: node {} comes back at {:?}, not after it stops ({:?})",
                o.node,
                o.up_at,
                o.down_at
            );
        }
        if let Some(next) = by_node.get(i + 1).filter(|n| n.node == o.node) {
            if next.down_at < o.up_at {
                bail!(
                    "outages: node {} stops at {:?}, before its outage from {:?} ends",
                    o.node,
                    next.down_at,
                    o.down_at
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SearchKind, SwarmAgent, SwarmSearch};
    use crate::scenario::Security;

    #[test]
    fn parameters_out_of_range_are_refused_with_their_name() {
        let ok = SwarmParams {
            nodes: 2,
            agents: vec![SwarmAgent {
                home: 1,
                capabilities: vec!["cap-1".into()],
            }],
            searches: vec![SwarmSearch {
                from: 0,
                capability: "cap-1".into(),
                at: Duration::ZERO,
                kind: SearchKind::Normal,
            }],
            publish_probes: Vec::new(),
            publish_at: Vec::new(),
            revoke_probes: 1,
            revoke_at: Duration::ZERO,
            limit: 10,
            search_timeout: Duration::from_secs(2),
            search_ends_when_full: true,
            max_connections: None,
            trim_connections: true,
            security: Security::Noise,
            replication: Replication::All,
            outages: vec![Outage {
                node: 1,
                down_at: Duration::from_secs(1),
                up_at: Duration::from_secs(2),
            }],
            seed: 1,
        };
        check(&ok).unwrap();
        let bad = |f: fn(&mut SwarmParams), key: &str| {
            let mut p = ok.clone();
            f(&mut p);
            let e = check(&p).unwrap_err().to_string();
            assert!(e.starts_with(key), "{e}");
        };
        bad(|p| p.nodes = 0, "nodes");
        bad(|p| p.agents[0].home = 2, "agents[0].home");
        bad(|p| p.searches[0].from = 5, "searches[0].from");
        bad(|p| p.revoke_probes = 2, "revoke_probes");
        bad(|p| p.limit = 0, "limit");
        bad(|p| p.max_connections = Some(0), "max_connections");
        bad(
            |p| p.agents[0].capabilities.clear(),
            "agents[0].capabilities",
        );
        bad(|p| p.outages[0].node = 2, "outages: node 2 is not a node");
        bad(
            |p| p.outages[0].up_at = Duration::from_secs(1),
            "outages: node 1 comes back",
        );
        bad(
            |p| {
                p.outages.push(Outage {
                    node: 1,
                    down_at: Duration::from_millis(1500),
                    up_at: Duration::from_secs(3),
                });
            },
            "outages: node 1 stops at 1.5s, before",
        );
        bad(
            |p| p.replication = Replication::Lookups,
            "publish_probes, revoke_probes",
        );
        // Under churn each publish probe needs its time.
        bad(
            |p| {
                p.publish_probes = p.agents.clone();
            },
            "publish_at: 0 times for 1 publish probes",
        );
    }
}
