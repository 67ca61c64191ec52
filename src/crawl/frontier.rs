//! The domains a crawl of many has yet to visit: those asked for, each
//! once, then (when the crawl follows peers) the domains of the verified
//! peers the crawled agents list, up to a bound on the domains in all.

use std::collections::HashSet;

use crate::identity::normalise_domain;

/// The frontier of a crawl of many domains.
pub(super) struct Frontier {
    /// Every domain taken in, visited or waiting.
    seen: HashSet<String>,
    /// Domains waiting for the next round.
    waiting: Vec<String>,
    /// Most domains taken in through peers.
    max_domains: usize,
}

impl Frontier {
    /// A frontier of `domains` (normalised, each once), which peers may
    /// grow up to `max_domains` in all.
    pub(super) fn new(domains: Vec<String>, max_domains: usize) -> Self {
        let mut frontier = Self {
            seen: HashSet::new(),
            waiting: Vec::new(),
            max_domains,
        };
        for d in domains {
            let d = normalise_domain(&d).unwrap_or(d);
            if frontier.seen.insert(d.clone()) {
                frontier.waiting.push(d);
            }
        }
        frontier
    }

    /// The domains of the next round; `None` when none is waiting.
    pub(super) fn next_round(&mut self) -> Option<Vec<String>> {
        if self.waiting.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.waiting))
        }
    }

    /// Takes in the domains of `peers` (agent ids) not seen before, while
    /// the bound allows.
    pub(super) fn add_peers(&mut self, peers: &[String]) {
        for peer in peers {
            let Some(d) = peer.strip_prefix("agent:") else {
                continue;
            };
            if self.seen.len() < self.max_domains && self.seen.insert(d.to_owned()) {
                self.waiting.push(d.to_owned());
            }
        }
    }
}
