//! The mesh's counters as metrics: [`MeshCollector`] reads the mesh's
//! [`MeshStats`] at each scrape.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

use crate::mesh::MeshStats;

/// The mesh's counters ([`MeshStats`]), read at each scrape.
#[derive(Debug)]
pub(super) struct MeshCollector(pub(super) Arc<OnceLock<MeshStats>>);

impl Collector for MeshCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = self.0.get() else {
            return Ok(());
        };
        let snap = stats.snapshot();
        {
            let mut family = encoder.encode_descriptor(
                "mesh_records",
                "Records from peers by path (gossip, dht_put, dht_get), verdict (accepted, rejected, ignored) and reason.",
                None,
                MetricType::Counter,
            )?;
            for (path, counts) in [
                ("gossip", &snap.gossip),
                ("dht_put", &snap.dht_put),
                ("dht_get", &snap.dht_get),
            ] {
                let labels = [("path", path), ("verdict", "accepted"), ("reason", "")];
                ConstCounter::new(counts.accepted).encode(family.encode_family(&labels)?)?;
                for (verdict, by_reason) in
                    [("rejected", &counts.rejected), ("ignored", &counts.ignored)]
                {
                    for (reason, n) in by_reason {
                        let labels = [
                            ("path", path),
                            ("verdict", verdict),
                            ("reason", reason.as_str()),
                        ];
                        ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                    }
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "dht_queries",
                "Kademlia queries of this node that ended, by kind and outcome (ok, error, timeout).",
                None,
                MetricType::Counter,
            )?;
            for (kind, by_outcome) in &snap.kad_queries {
                for (outcome, n) in by_outcome {
                    let labels = [("kind", kind.as_str()), ("outcome", outcome.as_str())];
                    ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        // Counters with one label each, read from the snapshot's maps.
        for (name, help, label, counts) in [
            (
                "dht_requests_sent",
                "Kademlia requests this node's ended queries sent, by query kind.",
                "kind",
                &snap.kad_requests_sent,
            ),
            (
                "dht_requests_failed",
                "Of those, the requests that failed (peer not dialled, no answer in time, connection closed), by query kind.",
                "kind",
                &snap.kad_requests_failed,
            ),
            (
                "mesh_incoming_refused",
                "Incoming connections this node refused, by reason (per_ip: the address holds p2p.max_connections_per_ip; connection_limit: the connection count, the slots kept for this node's own dials among them).",
                "reason",
                &snap.incoming_refused_by,
            ),
            (
                "mesh_search_requests_failed",
                "Search requests to peers that failed, by reason (dial_failure, connection_closed, timeout, unsupported_protocols, io).",
                "reason",
                &snap.requests_failed_by,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (value, n) in counts {
                let labels = [(label, value.as_str())];
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        {
            let counter = encoder.encode_descriptor(
                "mesh_searches_served",
                "Searches from peers answered.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(snap.searches_served).encode(counter)?;
        }
        {
            let counter = encoder.encode_descriptor(
                "mesh_dials_backed_off",
                "Dials not made because the peer's last dial failed and its back-off had not passed.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(snap.dials_backed_off).encode(counter)?;
        }
        {
            let counter = encoder.encode_descriptor(
                "mesh_connections_trimmed",
                "Peers disconnected because more than the high-water mark were connected.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(snap.connections_trimmed).encode(counter)?;
        }
        {
            let counter = encoder.encode_descriptor(
                "mesh_connections_dead",
                "Connections closed because their pings failed twice in a row.",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(snap.connections_dead).encode(counter)?;
        }
        Ok(())
    }
}
