//! [`MeshStats`]: counters the event loop and its handler tasks bump, and
//! anyone holding a [`MeshClient`](super::MeshClient) reads
//! ([`MeshClient::stats`](super::MeshClient::stats)) without a round trip
//! to the loop. Totals are atomics; per-reason counts sit in small maps
//! keyed by the `&'static str` reason codes, behind a mutex held only for
//! one increment or one copy.
//!
//! Wire cost: the search codec counts the bytes of every request and
//! response it writes and reads ([`super::codec`]); Kademlia requests are
//! counted per query kind when a query of ours ends (its `QueryStats`) and
//! per kind when a peer's request arrives; the transport's byte counters
//! (libp2p's bandwidth metrics, every protocol, after noise and yamux) are
//! read from the swarm's metrics registry.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use libp2p::metrics::Registry;

use serde::Serialize;

use super::Verdict;

#[derive(Default)]
struct Counts {
    accepted: AtomicU64,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    ignored: Mutex<BTreeMap<&'static str, u64>>,
}

fn bump(map: &Mutex<BTreeMap<&'static str, u64>>, reason: &'static str) {
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    *m.entry(reason).or_default() += 1;
}

fn copy(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<String, u64> {
    let m = map.lock().unwrap_or_else(|e| e.into_inner());
    m.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

impl Counts {
    fn count(&self, verdict: &Verdict) {
        match verdict {
            Verdict::Accept => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Verdict::Reject(r) => bump(&self.rejected, r),
            Verdict::Ignore(r) => bump(&self.ignored, r),
        }
    }

    fn snapshot(&self) -> VerdictCounts {
        VerdictCounts {
            accepted: self.accepted.load(Ordering::Relaxed),
            rejected: copy(&self.rejected),
            ignored: copy(&self.ignored),
        }
    }
}

/// Which inbound path a verdict belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Path {
    Gossip,
    DhtPut,
    DhtGet,
}

#[derive(Default)]
struct Inner {
    gossip: Counts,
    dht_put: Counts,
    dht_get: Counts,
    searches_served: AtomicU64,
    searches_refused: Mutex<BTreeMap<&'static str, u64>>,
    providers_refused_by: Mutex<BTreeMap<&'static str, u64>>,
    requests_sent: AtomicU64,
    requests_failed: Mutex<BTreeMap<&'static str, u64>>,
    requests_timed_out: AtomicU64,
    providers_stored: AtomicU64,
    providers_refused: AtomicU64,
    bootstrap_dials: AtomicU64,
    dial_failures: AtomicU64,
    incoming_failures: AtomicU64,
    incoming_refused: Mutex<BTreeMap<&'static str, u64>>,
    connections_trimmed: AtomicU64,
    connections_dead: AtomicU64,
    dials_backed_off: AtomicU64,
    search_wire: WireCounts,
    log_wire: WireCounts,
    checkpoint_wire: WireCounts,
    kad_requests_sent: Mutex<BTreeMap<&'static str, u64>>,
    kad_requests_failed: Mutex<BTreeMap<&'static str, u64>>,
    kad_requests_received: Mutex<BTreeMap<&'static str, u64>>,
    kad_queries: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    bandwidth: OnceLock<Mutex<Registry>>,
}

#[derive(Default)]
struct WireCounts {
    messages_sent: AtomicU64,
    bytes_sent: AtomicU64,
    messages_received: AtomicU64,
    bytes_received: AtomicU64,
}

impl WireCounts {
    fn add(&self, sent: bool, bytes: u64) {
        let (m, b) = if sent {
            (&self.messages_sent, &self.bytes_sent)
        } else {
            (&self.messages_received, &self.bytes_received)
        };
        m.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(bytes, Ordering::Relaxed);
    }

    fn snapshot(&self) -> WireSnapshot {
        WireSnapshot {
            messages_sent: self.messages_sent.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            messages_received: self.messages_received.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
        }
    }
}

/// Live counters of one mesh. Cheap to clone (an `Arc`).
#[derive(Clone, Default)]
pub struct MeshStats {
    inner: Arc<Inner>,
}

/// Verdict counts of one inbound path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerdictCounts {
    /// Accepted items.
    pub accepted: u64,
    /// Rejected items by reason.
    pub rejected: BTreeMap<String, u64>,
    /// Ignored items by reason (`overloaded`, `handler_timeout`, the
    /// handler's own reasons, ...).
    pub ignored: BTreeMap<String, u64>,
}

impl VerdictCounts {
    /// All rejected items.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    /// All ignored items.
    pub fn ignored_total(&self) -> u64 {
        self.ignored.values().sum()
    }
}

/// A copy of the counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    /// Gossip messages on the records topic.
    pub gossip: VerdictCounts,
    /// Inbound Kademlia `PutRecord`s.
    pub dht_put: VerdictCounts,
    /// Records found by our own `get_record` lookups.
    pub dht_get: VerdictCounts,
    /// Inbound searches answered.
    pub searches_served: u64,
    /// Inbound searches not answered, by reason (`overloaded`,
    /// `too_many_terms`, `handler_timeout`, ...).
    pub searches_refused: BTreeMap<String, u64>,
    /// Outbound search requests sent.
    pub requests_sent: u64,
    /// Outbound search requests that failed, whatever the cause (the
    /// causes below).
    pub requests_failed: u64,
    /// The same by cause: `dial_failure` (the peer could not be reached,
    /// a connection limit's refusal among them), `connection_closed`
    /// (closed before the answer came, a trimmed connection among them),
    /// `timeout` (libp2p's own request timeout), `unsupported_protocols`,
    /// `io`.
    pub requests_failed_by: BTreeMap<String, u64>,
    /// Outbound search requests still unanswered at their deadline.
    pub requests_timed_out: u64,
    /// Inbound provider records stored.
    pub providers_stored: u64,
    /// Inbound provider records refused (malformed key, store full, a
    /// quota).
    pub providers_refused: u64,
    /// The ones refused by a quota, by reason (`peer_quota`: the peer
    /// provides its share of the keys; `no_room`: peers' announcements
    /// fill their share of the store, the rest kept for this node's own
    /// keys).
    pub providers_refused_by: BTreeMap<String, u64>,
    /// Dials of bootstrap peers.
    pub bootstrap_dials: u64,
    /// Outgoing connections that failed.
    pub dial_failures: u64,
    /// Incoming connections that failed: a handshake that did not
    /// complete, or one refused at a connection limit.
    pub incoming_failures: u64,
    /// Of those, the ones this node refused, by reason: `per_ip` (the
    /// address holds `max_connections_per_ip` already), `connection_limit`
    /// (a limit of the connection count, the slots kept for this node's
    /// own dials among them).
    pub incoming_refused_by: BTreeMap<String, u64>,
    /// Peers disconnected over the high-water mark (`mesh/trim.rs`).
    pub connections_trimmed: u64,
    /// Connections closed because their pings failed twice in a row (a
    /// peer cut off, or stalled).
    pub connections_dead: u64,
    /// Dials not made because the peer's last dial failed and its
    /// back-off had not passed (`mesh/backoff.rs`); not in `dial_failures`.
    pub dials_backed_off: u64,
    /// Search requests and responses on the wire (`/agentmesh/search/1.0.0`,
    /// CBOR payload bytes as the codec wrote and read them).
    pub search_wire: WireSnapshot,
    /// Log requests and responses on the wire (`/agentmesh/log/1.0.0`:
    /// consistency proofs, cosignatures, repair), CBOR payload bytes.
    pub log_wire: WireSnapshot,
    /// Messages of the checkpoints topic this node published (sent) and
    /// received (each once, whoever relayed it), their data bytes.
    pub checkpoint_wire: WireSnapshot,
    /// Kademlia requests our finished queries sent, by query kind
    /// (`get_providers`, `start_providing`, `put_record`, ...).
    pub kad_requests_sent: BTreeMap<String, u64>,
    /// Of those, the requests that failed (the peer could not be dialled,
    /// did not answer in time, or closed the connection), by query kind.
    pub kad_requests_failed: BTreeMap<String, u64>,
    /// Kademlia requests peers sent us, by kind (`find_node`,
    /// `get_providers`, `add_provider`, `get_record`, `put_record`).
    pub kad_requests_received: BTreeMap<String, u64>,
    /// Our Kademlia queries that ended, by kind and outcome (`ok`,
    /// `error`, `timeout`).
    pub kad_queries: BTreeMap<String, BTreeMap<String, u64>>,
    /// Bytes on every connection, all protocols (substream payloads after
    /// noise and yamux), as libp2p's bandwidth metrics count them.
    pub transport: TransportBytes,
}

/// Messages and bytes of one protocol, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WireSnapshot {
    /// Messages written.
    pub messages_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Messages read.
    pub messages_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
}

/// Transport bytes, both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TransportBytes {
    /// Bytes read from peers.
    pub inbound: u64,
    /// Bytes written to peers.
    pub outbound: u64,
}

impl MeshStats {
    pub(crate) fn verdict(&self, path: Path, verdict: &Verdict) {
        match path {
            Path::Gossip => self.inner.gossip.count(verdict),
            Path::DhtPut => self.inner.dht_put.count(verdict),
            Path::DhtGet => self.inner.dht_get.count(verdict),
        }
    }

    pub(crate) fn search_served(&self) {
        self.inner.searches_served.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn search_refused(&self, reason: &'static str) {
        bump(&self.inner.searches_refused, reason);
    }

    pub(crate) fn requests_sent(&self, n: u64) {
        self.inner.requests_sent.fetch_add(n, Ordering::Relaxed);
    }

    /// An outbound search request failed, for `reason` (see
    /// [`StatsSnapshot::requests_failed_by`]).
    pub(crate) fn request_failed(&self, reason: &'static str) {
        bump(&self.inner.requests_failed, reason);
    }

    pub(crate) fn requests_timed_out(&self, n: u64) {
        self.inner
            .requests_timed_out
            .fetch_add(n, Ordering::Relaxed);
    }

    /// A provider announcement refused by the quotas (`peer_quota`,
    /// `no_room`): counted as refused, and by reason.
    pub(crate) fn provider_refused(&self, reason: &'static str) {
        self.inner.providers_refused.fetch_add(1, Ordering::Relaxed);
        bump(&self.inner.providers_refused_by, reason);
    }

    pub(crate) fn provider(&self, stored: bool) {
        let c = if stored {
            &self.inner.providers_stored
        } else {
            &self.inner.providers_refused
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn bootstrap_dial(&self) {
        self.inner.bootstrap_dials.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dial_failure(&self) {
        self.inner.dial_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// An incoming connection failed; `refused` names why this node
    /// refused it, if it did.
    pub(crate) fn incoming_failure(&self, refused: Option<&'static str>) {
        self.inner.incoming_failures.fetch_add(1, Ordering::Relaxed);
        if let Some(reason) = refused {
            bump(&self.inner.incoming_refused, reason);
        }
    }

    pub(crate) fn connection_trimmed(&self) {
        self.inner
            .connections_trimmed
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_dead(&self) {
        self.inner.connections_dead.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dial_backed_off(&self) {
        self.inner.dials_backed_off.fetch_add(1, Ordering::Relaxed);
    }

    /// One search message written (`sent`) or read, of `bytes` bytes.
    pub(crate) fn search_wire(&self, sent: bool, bytes: u64) {
        self.inner.search_wire.add(sent, bytes);
    }

    /// One log-protocol message written (`sent`) or read, of `bytes`.
    pub(crate) fn log_wire(&self, sent: bool, bytes: u64) {
        self.inner.log_wire.add(sent, bytes);
    }

    /// One checkpoints-topic message published (`sent`) or received.
    pub(crate) fn checkpoint_wire(&self, sent: bool, bytes: u64) {
        self.inner.checkpoint_wire.add(sent, bytes);
    }

    /// A query of ours of `kind` ended with `outcome` (`ok`, `error`,
    /// `timeout`) after sending `requests` requests, `failed` of which
    /// failed.
    pub(crate) fn kad_query_done(
        &self,
        kind: &'static str,
        outcome: &'static str,
        requests: u32,
        failed: u32,
    ) {
        for (map, n) in [
            (&self.inner.kad_requests_sent, requests),
            (&self.inner.kad_requests_failed, failed),
        ] {
            let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
            *m.entry(kind).or_default() += u64::from(n);
        }
        let mut q = self
            .inner
            .kad_queries
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *q.entry((kind, outcome)).or_default() += 1;
    }

    /// A peer's Kademlia request of `kind` arrived.
    pub(crate) fn kad_request_received(&self, kind: &'static str) {
        bump(&self.inner.kad_requests_received, kind);
    }

    /// The swarm's metrics registry, holding the bandwidth counters (set
    /// once, when the swarm is built).
    pub(crate) fn set_bandwidth(&self, registry: Registry) {
        let _ = self.inner.bandwidth.set(Mutex::new(registry));
    }

    /// Appends libp2p's own metrics (the transport's bandwidth counters),
    /// as libp2p names them, in the OpenMetrics text format without the
    /// closing `# EOF`; nothing before the swarm is built.
    ///
    /// # Errors
    /// Only `out`'s: writing to a `String` does not fail.
    pub fn encode_libp2p(&self, out: &mut String) -> std::fmt::Result {
        let Some(registry) = self.inner.bandwidth.get() else {
            return Ok(());
        };
        let r = registry.lock().unwrap_or_else(|e| e.into_inner());
        prometheus_client::encoding::text::encode_registry(out, &r)
    }

    fn transport_bytes(&self) -> TransportBytes {
        let Some(registry) = self.inner.bandwidth.get() else {
            return TransportBytes::default();
        };
        let mut text = String::new();
        {
            let r = registry.lock().unwrap_or_else(|e| e.into_inner());
            if prometheus_client::encoding::text::encode(&mut text, &r).is_err() {
                return TransportBytes::default();
            }
        }
        parse_bandwidth(&text)
    }

    /// A copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let i = &self.inner;
        StatsSnapshot {
            gossip: i.gossip.snapshot(),
            dht_put: i.dht_put.snapshot(),
            dht_get: i.dht_get.snapshot(),
            searches_served: i.searches_served.load(Ordering::Relaxed),
            searches_refused: copy(&i.searches_refused),
            providers_refused_by: copy(&i.providers_refused_by),
            requests_sent: i.requests_sent.load(Ordering::Relaxed),
            requests_failed: {
                let m = i.requests_failed.lock().unwrap_or_else(|e| e.into_inner());
                m.values().sum()
            },
            requests_failed_by: copy(&i.requests_failed),
            requests_timed_out: i.requests_timed_out.load(Ordering::Relaxed),
            providers_stored: i.providers_stored.load(Ordering::Relaxed),
            providers_refused: i.providers_refused.load(Ordering::Relaxed),
            bootstrap_dials: i.bootstrap_dials.load(Ordering::Relaxed),
            dial_failures: i.dial_failures.load(Ordering::Relaxed),
            incoming_failures: i.incoming_failures.load(Ordering::Relaxed),
            incoming_refused_by: copy(&i.incoming_refused),
            connections_trimmed: i.connections_trimmed.load(Ordering::Relaxed),
            connections_dead: i.connections_dead.load(Ordering::Relaxed),
            dials_backed_off: i.dials_backed_off.load(Ordering::Relaxed),
            search_wire: i.search_wire.snapshot(),
            log_wire: i.log_wire.snapshot(),
            checkpoint_wire: i.checkpoint_wire.snapshot(),
            kad_requests_sent: copy(&i.kad_requests_sent),
            kad_requests_failed: copy(&i.kad_requests_failed),
            kad_requests_received: copy(&i.kad_requests_received),
            kad_queries: {
                let q = i.kad_queries.lock().unwrap_or_else(|e| e.into_inner());
                let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
                for ((kind, outcome), n) in q.iter() {
                    out.entry((*kind).to_owned())
                        .or_default()
                        .insert((*outcome).to_owned(), *n);
                }
                out
            },
            transport: self.transport_bytes(),
        }
    }
}

/// Sums the `libp2p_bandwidth_bytes_total` lines of the text exposition by
/// direction (one line per transport protocol stack, e.g. `/ip4/tcp`).
fn parse_bandwidth(text: &str) -> TransportBytes {
    let mut t = TransportBytes::default();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("libp2p_bandwidth_bytes_total{") else {
            continue;
        };
        let value = rest
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        if rest.contains("direction=\"Inbound\"") {
            t.inbound += value;
        } else if rest.contains("direction=\"Outbound\"") {
            t.outbound += value;
        }
    }
    t
}

impl std::fmt::Debug for MeshStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_path_and_reason() {
        let s = MeshStats::default();
        s.verdict(Path::Gossip, &Verdict::Accept);
        s.verdict(Path::Gossip, &Verdict::Reject("bad_signature"));
        s.verdict(Path::Gossip, &Verdict::Reject("bad_signature"));
        s.verdict(Path::DhtPut, &Verdict::Ignore("overloaded"));
        let snap = s.clone().snapshot();
        assert_eq!(snap.gossip.accepted, 1);
        assert_eq!(snap.gossip.rejected["bad_signature"], 2);
        assert_eq!(snap.gossip.rejected_total(), 2);
        assert_eq!(snap.dht_put.ignored_total(), 1);
        assert_eq!(snap.dht_get, VerdictCounts::default());
    }

    #[test]
    fn wire_and_kad_counts() {
        let s = MeshStats::default();
        s.search_wire(true, 40);
        s.search_wire(false, 1000);
        s.search_wire(false, 24);
        s.kad_query_done("get_providers", "ok", 7, 0);
        s.kad_query_done("get_providers", "timeout", 3, 2);
        s.kad_request_received("find_node");
        s.request_failed("dial_failure");
        s.request_failed("dial_failure");
        s.request_failed("connection_closed");
        let snap = s.snapshot();
        assert_eq!(
            snap.search_wire,
            WireSnapshot {
                messages_sent: 1,
                bytes_sent: 40,
                messages_received: 2,
                bytes_received: 1024
            }
        );
        assert_eq!(snap.kad_requests_sent["get_providers"], 10);
        assert_eq!(snap.kad_requests_failed["get_providers"], 2);
        assert_eq!(snap.requests_failed, 3);
        assert_eq!(snap.requests_failed_by["dial_failure"], 2);
        assert_eq!(snap.requests_failed_by["connection_closed"], 1);
        assert_eq!(snap.kad_requests_received["find_node"], 1);
        assert_eq!(snap.kad_queries["get_providers"]["ok"], 1);
        assert_eq!(snap.kad_queries["get_providers"]["timeout"], 1);
        assert_eq!(snap.transport, TransportBytes::default());
    }

    #[test]
    fn bandwidth_text_is_summed_by_direction() {
        let text = "# HELP libp2p_bandwidth_bytes Bandwidth usage.\n\
            # TYPE libp2p_bandwidth_bytes counter\n\
            libp2p_bandwidth_bytes_total{protocols=\"/ip4/tcp/p2p\",direction=\"Inbound\"} 100\n\
            libp2p_bandwidth_bytes_total{protocols=\"/ip4/tcp/p2p\",direction=\"Outbound\"} 7\n\
            libp2p_bandwidth_bytes_total{protocols=\"/ip4/udp/quic-v1\",direction=\"Inbound\"} 5\n\
            # EOF\n";
        assert_eq!(
            parse_bandwidth(text),
            TransportBytes {
                inbound: 105,
                outbound: 7
            }
        );
    }
}
