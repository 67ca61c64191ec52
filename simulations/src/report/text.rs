//! A summary as a short human-readable report (what the CLI prints after
//! a run), section by section, with the published figures beside.

use super::summary::{Percentiles, Summary};

/// Three percentiles on one line.
fn percentiles(x: &Percentiles) -> String {
    format!("p50 {:.0} / p95 {:.0} / p99 {:.0}", x.p50, x.p95, x.p99)
}

/// A probe's figures, or "no probes" when none ran.
fn probes(x: &Percentiles, coverage: Option<f64>) -> String {
    if coverage.is_none() && x.p99 == 0.0 {
        "no probes".to_owned()
    } else {
        format!(
            "{} (coverage {})",
            percentiles(x),
            coverage.map_or("-".into(), |c| format!("{c:.4}"))
        )
    }
}

impl Summary {
    /// A short human-readable report, with the published figures beside.
    pub fn text(&self) -> String {
        let mut t = String::new();
        self.searches_text(&mut t);
        self.probes_text(&mut t);
        self.costs_text(&mut t);
        self.swarm_text(&mut t);
        self.references_text(&mut t);
        t
    }

    /// The run's size, recall, latency and what a search cost.
    fn searches_text(&self, t: &mut String) {
        let p = percentiles;
        *t += &format!(
            "{} [{}] {} nodes, {} agents, {} searches (limit {})\n",
            self.scenario, self.engine, self.nodes, self.agents, self.searches, self.limit
        );
        *t += &format!("  recall               {:.4}\n", self.recall);
        for (k, v) in &self.recall_by_kind {
            if let Some(x) = v.as_f64() {
                *t += &format!("    {k:<18} {x:.4}\n");
            }
        }
        *t += &format!("  search latency ms    {}\n", p(&self.latency_ms));
        *t += &format!(
            "  provider lookup      {:.1} requests ({:.1} failed; all {} shards), hops to first providers {}\n",
            self.requests_per_lookup,
            self.failed_requests_per_lookup,
            self.node.shards,
            self.lookup_hops.as_ref().map_or("not measured".into(), p)
        );
        *t += &format!(
            "  per search           {:.1} messages, {:.0} bytes\n",
            self.messages_per_search, self.bytes_per_search
        );
    }

    /// Propagation, revocation and the forgers' takeovers.
    fn probes_text(&self, t: &mut String) {
        *t += &format!(
            "  propagation ms       {}\n",
            probes(&self.propagation_ms, self.propagation_coverage)
        );
        *t += &format!(
            "  revocation ms        {}, stale results {}\n",
            probes(&self.revocation_ms, self.revocation_coverage),
            self.stale_results
        );
        if let (Some(share), Some(n)) = (self.taken_over, self.searches_taken_over) {
            *t += &format!(
                "  taken over           {share:.4} of the results a forger's version ({n:.4} of the searches had one)\n"
            );
            for (k, v) in self.taken_over_by_kind.iter().flatten() {
                if let Some(x) = v.as_f64() {
                    *t += &format!("    {k:<18} {x:.4}\n");
                }
            }
        }
    }

    /// The plain lookups, the load per node and the simulator's own cost.
    fn costs_text(&self, t: &mut String) {
        let p = percentiles;
        if let Some(l) = &self.lookups {
            *t += &format!(
                "  Kademlia lookups     {}: hops to closest {}, {:.1} requests, closest answered in {} ms ({:.0} % within 500 ms)\n",
                l.count,
                p(&l.hops),
                l.requests_mean,
                p(&l.closest_ms),
                l.closest_under_500ms * 100.0
            );
        }
        if let (Some(m), Some(b)) = (
            self.messages_per_node_per_hour,
            self.bytes_per_node_per_hour,
        ) {
            *t += &format!(
                "  per node per hour    {m:.0} messages, {:.1} KiB\n",
                b / 1024.0
            );
        }
        *t += &format!(
            "  simulator            {:.1} s wall, {:.0} MiB peak RSS\n",
            self.wall_s, self.peak_rss_mb
        );
    }

    /// What only a swarm run reports: its phases' times, memory and churn.
    fn swarm_text(&self, t: &mut String) {
        if let (Some(b), Some(p), Some(m)) =
            (self.bootstrap_s, self.populate_s, self.rss_per_node_mb)
        {
            *t += &format!(
                "  swarm                bootstrap {b:.1} s, population held after {p:.1} s more, {m:.2} MiB per node\n"
            );
        }
        if let (Some(r), Some(m)) = (self.restarts, self.searches_moved) {
            if r > 0 {
                *t += &format!(
                    "  churn                {r} restarts, {m} searches asked of the next live node\n"
                );
            }
        }
        let recovered = (self.propagation_recovered, self.revocation_recovered);
        if let (Some(p), Some(r)) = recovered {
            if p + r > 0 {
                *t += &format!(
                    "  after a restart      {p} probe and {r} tombstone arrivals (not in the times; not reached in the coverage)\n"
                );
            }
        }
        if let Some(d) = self.revocations_deferred.filter(|&d| d > 0) {
            *t += &format!(
                "  deferred             {d} revocations waited for their home to start again\n"
            );
        }
    }

    /// The published figures, each beside this run's value.
    fn references_text(&self, t: &mut String) {
        *t += "  published figures:\n";
        for r in &self.reference {
            *t += &format!(
                "    {:<44} published {:<22} simulated {:<10} ({})\n",
                r.metric,
                r.published,
                r.simulated.map_or("-".into(), |v| format!("{v:.2}")),
                r.source
            );
        }
    }
}
