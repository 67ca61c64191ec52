//! The testbed's authoritative DNS server: hickory-server on UDP and TCP
//! (one port), answering from an in-memory [`Zone`].
//!
//! The zone is a `HashMap` keyed by (lowercase name, record type), so that
//! thousands of agents cost a few records each and no zone files. Answers
//! are authoritative: the records with TTL 300; NOERROR and no records
//! for a name that exists without that type (including empty
//! non-terminals such as `_tcp.{domain}`); NXDOMAIN for a name under
//! `test.` that does not exist; both negative answers carry the `test.`
//! SOA (negative TTL 60). Names outside `test.` are REFUSED. Over UDP an
//! answer larger than the client's EDNS payload size (512 bytes without
//! EDNS) is truncated with TC set, so clients retry over TCP.
//!
//! Used by [`super::Testbed`], which builds the zone with
//! [`super::Population::zone`]. A zone signed by a
//! [`super::dnssec::ZoneKey`] holds an RRSIG per RRset, answered beside
//! the records to queries with the DO bit (EDNS) set.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA, SRV, TXT};
use hickory_proto::rr::{DNSClass, LowerName, Name, RData, Record, RecordType};
use hickory_server::net::runtime::Time;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;
use hickory_server::Server;
use tokio::net::{TcpListener, UdpSocket};
use tracing::{debug, warn};

use super::TestbedError;

/// TTL of every record.
pub const TTL: u32 = 300;
/// TTL (and SOA minimum) of negative answers.
pub const NEGATIVE_TTL: u32 = 60;
/// Idle timeout of a DNS-over-TCP connection.
const TCP_TIMEOUT: Duration = Duration::from_secs(10);
/// Responses buffered per TCP connection.
const TCP_BUFFER: usize = 64;

fn name(text: &str) -> Result<Name, TestbedError> {
    let fqdn = if text.ends_with('.') {
        text.to_owned()
    } else {
        format!("{text}.")
    };
    Name::from_ascii(&fqdn).map_err(|e| TestbedError::Dns {
        name: text.to_owned(),
        reason: e.to_string(),
    })
}

/// The records the server answers from.
#[derive(Debug, Clone)]
pub struct Zone {
    apex: LowerName,
    records: HashMap<(LowerName, RecordType), Vec<Record>>,
    names: HashSet<LowerName>,
    soa: Record,
    /// RRSIG records by owner and the type they cover.
    signatures: HashMap<(LowerName, RecordType), Vec<Record>>,
}

impl Default for Zone {
    fn default() -> Self {
        Self::new()
    }
}

/// What the zone holds for one question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer<'a> {
    /// The RRset.
    Records(&'a [Record]),
    /// The name exists, without records of that type.
    NoData,
    /// The name does not exist.
    NxDomain,
    /// The name is not under the zone's apex.
    Refused,
}

impl Zone {
    /// An empty zone for `test.` (RFC 6761).
    pub fn new() -> Self {
        let apex = Name::from_ascii("test.").expect("`test.` is a valid name");
        let soa = SOA::new(
            Name::from_ascii("ns.test.").expect("`ns.test.` is a valid name"),
            Name::from_ascii("hostmaster.test.").expect("`hostmaster.test.` is a valid name"),
            1,
            3600,
            600,
            86_400,
            NEGATIVE_TTL,
        );
        let soa = Record::from_rdata(apex.clone(), NEGATIVE_TTL, RData::SOA(soa));
        let apex = LowerName::from(apex);
        let mut zone = Self {
            apex: apex.clone(),
            records: HashMap::new(),
            names: HashSet::new(),
            soa: soa.clone(),
            signatures: HashMap::new(),
        };
        zone.records.insert((apex, RecordType::SOA), vec![soa]);
        zone
    }

    /// Adds a record (and its name and ancestors as existing names).
    pub fn insert(&mut self, record: Record) {
        let mut owner = record.name.clone();
        let key = (LowerName::new(&owner), record.record_type());
        self.records.entry(key).or_default().push(record);
        loop {
            if !self.names.insert(LowerName::new(&owner)) || owner.num_labels() == 0 {
                break;
            }
            owner = owner.base_name();
        }
    }

    /// Adds a TXT record made of these character-strings.
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for an invalid owner name.
    pub fn add_txt(&mut self, owner: &str, strings: Vec<String>) -> Result<(), TestbedError> {
        let rdata = RData::TXT(TXT::new(strings));
        self.insert(Record::from_rdata(name(owner)?, TTL, rdata));
        Ok(())
    }

    /// Adds a record of any type.
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for an invalid owner name.
    pub fn add(&mut self, owner: &str, rdata: RData) -> Result<(), TestbedError> {
        self.insert(Record::from_rdata(name(owner)?, TTL, rdata));
        Ok(())
    }

    /// Adds an SRV record.
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for an invalid owner or target name.
    pub fn add_srv(
        &mut self,
        owner: &str,
        priority: u16,
        weight: u16,
        port: u16,
        target: &str,
    ) -> Result<(), TestbedError> {
        let rdata = RData::SRV(SRV::new(priority, weight, port, name(target)?));
        self.insert(Record::from_rdata(name(owner)?, TTL, rdata));
        Ok(())
    }

    /// Adds an A record.
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for an invalid owner name.
    pub fn add_a(&mut self, owner: &str, address: Ipv4Addr) -> Result<(), TestbedError> {
        let rdata = RData::A(A(address));
        self.insert(Record::from_rdata(name(owner)?, TTL, rdata));
        Ok(())
    }

    /// Removes the RRset `owner`/`rtype` and answers it; its name stays,
    /// and so do its signatures (a record changed after signing: remove
    /// it, then add the new data).
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for an invalid owner name.
    pub fn remove(&mut self, owner: &str, rtype: RecordType) -> Result<Vec<Record>, TestbedError> {
        let key = (LowerName::new(&name(owner)?), rtype);
        Ok(self.records.remove(&key).unwrap_or_default())
    }

    /// Every RRset, by owner and type.
    pub(super) fn rrsets(&self) -> impl Iterator<Item = (&(LowerName, RecordType), &Vec<Record>)> {
        self.records.iter()
    }

    /// Replaces the zone's RRSIG records.
    pub(super) fn set_signatures(&mut self, signatures: Vec<Record>) {
        self.signatures.clear();
        for rrsig in signatures {
            let covered = match &rrsig.data {
                RData::DNSSEC(DNSSECRData::RRSIG(sig)) => sig.input().type_covered,
                _ => continue,
            };
            self.signatures
                .entry((LowerName::new(&rrsig.name), covered))
                .or_default()
                .push(rrsig);
        }
    }

    /// Replaces the signatures over `owner`/`rtype` with `rrsigs`, as a
    /// forger would serve them.
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for an invalid owner name.
    pub fn replace_signatures(
        &mut self,
        owner: &str,
        rtype: RecordType,
        rrsigs: Vec<Record>,
    ) -> Result<(), TestbedError> {
        self.signatures
            .insert((LowerName::new(&name(owner)?), rtype), rrsigs);
        Ok(())
    }

    /// The signatures over `name`/`rtype` (none in an unsigned zone).
    pub fn signatures(&self, name: &LowerName, rtype: RecordType) -> &[Record] {
        self.signatures
            .get(&(name.clone(), rtype))
            .map_or(&[], Vec::as_slice)
    }

    /// The answer to `name`/`rtype`.
    pub fn lookup(&self, name: &LowerName, rtype: RecordType) -> Answer<'_> {
        if !self.apex.zone_of(name) {
            return Answer::Refused;
        }
        match self.records.get(&(name.clone(), rtype)) {
            Some(records) => Answer::Records(records),
            None if self.names.contains(name) => Answer::NoData,
            None => Answer::NxDomain,
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.values().map(Vec::len).sum()
    }

    /// Whether the zone holds only its SOA.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }
}

/// The hickory request handler over a [`Zone`].
#[derive(Debug)]
pub struct ZoneHandler {
    zone: Zone,
    queries: Arc<AtomicU64>,
}

impl ZoneHandler {
    async fn respond<R: ResponseHandler>(&self, request: &Request, mut handle: R) -> ResponseInfo {
        self.queries.fetch_add(1, Ordering::Relaxed);
        let edns = request.edns.as_ref().map(|req| {
            let mut edns = Edns::new();
            edns.set_max_payload(req.max_payload().max(512));
            edns.set_version(0);
            edns.set_dnssec_ok(req.flags().dnssec_ok);
            edns
        });
        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        let mut answers: &[Record] = &[];
        let mut signatures: &[Record] = &[];
        let dnssec_ok = request
            .edns
            .as_ref()
            .is_some_and(|req| req.flags().dnssec_ok);
        let mut soa = None;
        if request.metadata.message_type != MessageType::Query
            || request.metadata.op_code != OpCode::Query
        {
            metadata.authoritative = false;
            metadata.response_code = ResponseCode::NotImp;
        } else {
            match request.request_info() {
                Err(_) => {
                    metadata.authoritative = false;
                    metadata.response_code = ResponseCode::FormErr;
                }
                Ok(info) if info.query.query_class() != DNSClass::IN => {
                    metadata.authoritative = false;
                    metadata.response_code = ResponseCode::Refused;
                }
                Ok(info) => {
                    let (name, rtype) = (info.query.name(), info.query.query_type());
                    debug!(%name, %rtype, protocol = %info.protocol, "dns query");
                    match self.zone.lookup(name, rtype) {
                        Answer::Records(records) => {
                            answers = records;
                            if dnssec_ok {
                                signatures = self.zone.signatures(name, rtype);
                            }
                        }
                        Answer::NoData => soa = Some(&self.zone.soa),
                        Answer::NxDomain => {
                            metadata.response_code = ResponseCode::NXDomain;
                            soa = Some(&self.zone.soa);
                        }
                        Answer::Refused => {
                            metadata.authoritative = false;
                            metadata.response_code = ResponseCode::Refused;
                        }
                    }
                }
            }
        }
        let response = MessageResponseBuilder::new(&request.queries, edns.as_ref()).build(
            metadata,
            answers.iter().chain(signatures),
            std::iter::empty(),
            soa,
            std::iter::empty(),
        );
        match handle.send_response(response).await {
            Ok(info) => info,
            Err(error) => {
                warn!(%error, "cannot send a DNS response");
                let mut failed = Metadata::response_from_request(&request.metadata);
                failed.response_code = ResponseCode::ServFail;
                ResponseInfo::from(Header {
                    metadata: failed,
                    counts: HeaderCounts::default(),
                })
            }
        }
    }
}

// `RequestHandler` is an `async_trait`; this is its expansion, written out
// because this crate does not depend on `async-trait`.
impl RequestHandler for ZoneHandler {
    fn handle_request<'life0, 'life1, 'async_trait, R, T>(
        &'life0 self,
        request: &'life1 Request,
        response_handle: R,
    ) -> Pin<Box<dyn Future<Output = ResponseInfo> + Send + 'async_trait>>
    where
        R: 'async_trait + ResponseHandler,
        T: 'async_trait + Time,
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.respond(request, response_handle))
    }
}

/// A running DNS server; dropping it aborts its tasks.
pub struct DnsServer {
    server: Server<ZoneHandler>,
    addr: SocketAddr,
    queries: Arc<AtomicU64>,
}

impl DnsServer {
    /// Binds UDP and TCP on the same port of `addr` (port 0: an ephemeral
    /// port free for both) and serves `zone`.
    ///
    /// # Errors
    /// [`TestbedError::Bind`] when no port could be bound for both.
    pub async fn start(addr: SocketAddr, zone: Zone) -> Result<Self, TestbedError> {
        let bind_error = |source| TestbedError::Bind {
            what: "dns",
            addr,
            source,
        };
        let mut attempt = 0;
        let (udp, tcp) = loop {
            attempt += 1;
            let udp = UdpSocket::bind(addr).await.map_err(bind_error)?;
            let bound = udp.local_addr().map_err(bind_error)?;
            match TcpListener::bind(bound).await {
                Ok(tcp) => break (udp, tcp),
                // The ephemeral UDP port is taken on TCP: try another one.
                Err(_) if addr.port() == 0 && attempt < 16 => continue,
                Err(e) => return Err(bind_error(e)),
            }
        };
        let addr = udp.local_addr().map_err(bind_error)?;
        let queries = Arc::new(AtomicU64::new(0));
        let mut server = Server::new(ZoneHandler {
            zone,
            queries: queries.clone(),
        });
        server.register_socket(udp);
        server.register_listener(tcp, TCP_TIMEOUT, TCP_BUFFER);
        Ok(Self {
            server,
            addr,
            queries,
        })
    }

    /// Where it listens (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queries answered so far.
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// Stops the server and waits for its tasks.
    pub async fn shutdown(&mut self) {
        if let Err(error) = self.server.shutdown_gracefully().await {
            debug!(%error, "DNS server stopped with an error");
        }
    }
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}
