//! The CSV series of a run ([`Series`], drawn from either engine's
//! outcome): `searches.csv`, `convergence.csv` and `lookups.csv`. The
//! plots are drawn from the same series.

use std::io::Write;
use std::path::Path;

use super::summary::{percentile, recall_of};
use crate::des::{DesOutcome, LookupRecord};
use crate::model::SearchRecord;
use crate::swarm::SwarmOutcome;

/// What the CSV series and the plots are drawn from, either engine's.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// The searches, in order.
    pub searches: &'a [SearchRecord],
    /// The plain Kademlia lookups; `None`: the engine does not run them
    /// (the swarm), so `lookups.csv` is not written.
    pub lookups: Option<&'a [LookupRecord]>,
    /// Per (probe, node reached): ms until it held the record.
    pub propagation_ms: &'a [f64],
    /// Per (revoked agent, node reached): ms until it held the tombstone.
    pub revocation_ms: &'a [f64],
    /// What a search's `at_s` counts, as a plot's axis says it.
    pub clock: &'static str,
}

impl<'a> From<&'a DesOutcome> for Series<'a> {
    fn from(o: &'a DesOutcome) -> Self {
        Self {
            searches: &o.searches,
            lookups: Some(&o.lookups),
            propagation_ms: &o.propagation_ms,
            revocation_ms: &o.revocation_ms,
            clock: "virtual time (s)",
        }
    }
}

impl<'a> From<&'a SwarmOutcome> for Series<'a> {
    fn from(o: &'a SwarmOutcome) -> Self {
        Self {
            searches: &o.searches,
            lookups: None,
            propagation_ms: &o.propagation_ms,
            revocation_ms: &o.revocation_ms,
            clock: "wall-clock time since the run started (s)",
        }
    }
}

/// Writes the CSV series of a run into `dir`: `searches.csv`,
/// `convergence.csv` and, when the engine ran plain lookups,
/// `lookups.csv`.
///
/// # Errors
/// An I/O error writing a file.
pub fn write_csv(dir: &Path, o: &Series<'_>) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("searches.csv"))?);
    writeln!(
        f,
        "at_s,kind,found,expected,recall,latency_ms,lookup_requests,lookup_failed,lookup_hops,messages,bytes,stale,asked,answered,asked_providers,taken_over"
    )?;
    for r in o.searches {
        let s = &r.sample;
        writeln!(
            f,
            "{:.6},{:?},{},{},{:.4},{:.3},{},{},{},{},{},{},{},{},{},{}",
            r.at_s,
            r.kind,
            s.found,
            s.expected,
            recall_of(s),
            s.latency_ms,
            s.lookup_requests,
            s.lookup_failed,
            s.lookup_hops.map_or(String::new(), |h| h.to_string()),
            s.messages,
            s.bytes,
            r.stale,
            r.asked,
            r.answered,
            r.asked_providers,
            r.taken_over
        )?;
    }
    f.flush()?;
    if let Some(lookups) = o.lookups {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("lookups.csv"))?);
        writeln!(f, "requests,hops,closest_ms,finished_ms")?;
        for l in lookups {
            writeln!(
                f,
                "{},{},{},{:.3}",
                l.requests,
                l.hops.map_or(String::new(), |h| h.to_string()),
                l.closest_ms.map_or(String::new(), |m| format!("{m:.3}")),
                l.latency_ms
            )?;
        }
        f.flush()?;
    }
    // Convergence as quantiles (every 0.5 %, then 99.9 % and the last):
    // a 100,000-node run has a value per (probe, node).
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("convergence.csv"))?);
    writeln!(f, "kind,share,ms")?;
    for (kind, values) in [("publish", o.propagation_ms), ("revoke", o.revocation_ms)] {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            continue;
        }
        let shares = (1..=200).map(|i| f64::from(i) * 0.5).chain([99.9]);
        let mut shares: Vec<f64> = shares.collect();
        shares.sort_by(f64::total_cmp);
        for p in shares {
            writeln!(f, "{kind},{:.4},{:.3}", p / 100.0, percentile(&v, p))?;
        }
    }
    f.flush()
}
