//! DNS-AID (draft-mozleywilliams-dnsop-dnsaid, revisions -01 and -02):
//! the SVCB records that publish an organisation's agents, the names they
//! live at, and the agent index, read into a [`DnsAidAgent`] and a
//! [`Descriptor`].
//!
//! Names (what the crawler queries, see [`agent_names`], [`index_name`],
//! [`protocol_names`]):
//! - -02: an agent's SVCB record is at the flat name `{name}.{domain}`,
//!   optionally reached by an AliasMode record at `{name}._agents.{domain}`;
//! - -01: `_{name}._{proto}._agents.{domain}`;
//! - both: the index at `_index._agents.{domain}`, a TXT record
//!   `agents=name:proto,...` (-01, kept by -02 as a fallback) or an SVCB
//!   record naming the HTTPS host that serves the index (-02);
//! - deployed -02 zones and scanners also use `_mcp._agents.{domain}` and
//!   `_a2a._agents.{domain}`: one agent per protocol, no agent name.
//!
//! The record: TargetName and `port` give the endpoint (`https://`, no
//! path); `alpn` the transport, or in -01 style the agent protocol; the
//! draft's own keys use interim private-use numbers (65400-65409, see
//! [`KEY_CAP`] and the constants after it), and in hickory those are
//! [`SvcParamKey::Key`] with a [`SvcParamValue::Unknown`] value, read here
//! as bounded UTF-8 text. The HTTPS record type (65) has the same data:
//! pass its inner [`SVCB`].
//!
//! The draft text could not be read (only its abstract); names and keys
//! follow the reference implementation, dns-aid-core (-01 and -02 tags),
//! as recorded in `notes/formats/dns-aid.md`.
//!
//! What the record's target serves (the `cap` document, the A2A or MCP
//! server card) is read by [`documents`]; the crawler fetches it.
//!
//! Pure code: nothing here resolves a name or fetches the index.

use base64::Engine as _;
use hickory_proto::rr::rdata::svcb::{SvcParamKey, SvcParamValue, SVCB};

use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{bounded, terms, FormatError, MAX_NAME_CHARS};
use crate::trust::Reason;

mod documents;

pub use documents::{
    check_cap_digest, parse_cap, parse_metadata, parse_server_card, CapDocument, Metadata,
    ServerCard, MAX_DOCUMENT_TERMS, MAX_TERM_CHARS, MCP_SERVER_CARD_PATH,
};

/// The label under which DNS-AID names live.
pub const AGENTS_LABEL: &str = "_agents";
/// The agent protocols that have a protocol-scoped name
/// (`_{proto}._agents.{domain}`) in [`protocol_names`].
pub const PROTOCOL_LABELS: [&str; 2] = ["mcp", "a2a"];
/// The paths dns-aid-core tries on the host an SVCB index names; the draft
/// leaves the index format open (`/.well-known/ai-catalog.json` is ARD's).
pub const HTTP_INDEX_PATHS: [&str; 3] = [
    "/.well-known/agents-index.json",
    "/.well-known/agents.json",
    "/.well-known/ai-catalog.json",
];

/// SvcParamKey `cap`: a URI (or URN) of the capability descriptor.
pub const KEY_CAP: u16 = 65400;
/// SvcParamKey `cap-sha256`: unpadded base64url SHA-256 of the descriptor.
pub const KEY_CAP_SHA256: u16 = 65401;
/// SvcParamKey `bap`: the agent protocol, `mcp` or `mcp=1.0`.
pub const KEY_BAP: u16 = 65402;
/// SvcParamKey `policy`: a URI of the agent's policy bundle.
pub const KEY_POLICY: u16 = 65403;
/// SvcParamKey `realm`: a tenant or environment label.
pub const KEY_REALM: u16 = 65404;
/// SvcParamKey `well-known` (-02): the metadata document, an RFC 8615
/// suffix (`agent-card.json`) or an absolute path.
pub const KEY_WELL_KNOWN: u16 = 65409;

/// Most agents read from the index.
pub const MAX_INDEX_AGENTS: usize = 256;
/// Largest index TXT record read, bytes (joined strings).
pub const MAX_INDEX_BYTES: usize = 32 * 1024;
/// Longest agent name or protocol in the index, characters (a DNS label).
pub const MAX_LABEL_CHARS: usize = 63;
/// Most SvcParams read from one record.
pub const MAX_PARAMS: usize = 32;
/// Most `alpn` ids read from one record.
pub const MAX_ALPN_IDS: usize = 16;
/// Longest `cap` or `policy` value, bytes.
pub const MAX_URI_BYTES: usize = 2048;
/// Longest `well-known` value, bytes.
pub const MAX_WELL_KNOWN_BYTES: usize = 255;

/// One entry of the TXT index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedAgent {
    /// The agent name (lower-case LDH).
    pub name: String,
    /// Its protocol (`mcp`, `a2a`, ...; lower-case).
    pub proto: String,
}

/// What an SVCB record says: a service, or (AliasMode, priority 0) that
/// the service is described at another name, which the caller queries
/// next (-02's `{name}._agents.{domain}` points at `{name}.{domain}`; one
/// hop is enough for the records the draft describes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding<T> {
    /// ServiceMode: the service itself.
    Service(T),
    /// AliasMode: query SVCB at `target` instead.
    Alias {
        /// The name to query, lower-case, no trailing dot.
        target: String,
    },
}

/// An agent read from a ServiceMode SVCB record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAidAgent {
    /// The owner name of the record (lower-case, no trailing dot).
    pub owner: String,
    /// The agent protocol: the `bap` key, else the `_{proto}` label of the
    /// owner, else an agent protocol among the `alpn` ids (`mcp`, `a2a`,
    /// `x-...`, as dns-aid-core publishes).
    pub protocol: Option<String>,
    /// The host to connect to (the owner when TargetName is `.`).
    pub target: String,
    /// The `port` key.
    pub port: Option<u16>,
    /// The `alpn` ids, in record order.
    pub alpn: Vec<String>,
    /// The `well-known` key.
    pub well_known: Option<String>,
    /// The `cap` key.
    pub cap: Option<String>,
    /// The `cap-sha256` key (43 characters of base64url).
    pub cap_sha256: Option<String>,
    /// The `policy` key.
    pub policy: Option<String>,
    /// The `realm` key.
    pub realm: Option<String>,
}

/// The host an SVCB index record (-02, at [`index_name`]) names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexHost {
    /// The host serving the index.
    pub target: String,
    /// The `port` key.
    pub port: Option<u16>,
}

fn malformed(message: impl Into<String>) -> FormatError {
    FormatError::new(Reason::DnsAidMalformed, message)
}

fn normalise_domain(domain: &str) -> String {
    domain.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The organisation's index, `_index._agents.{domain}`: TXT in -01 (read
/// with [`parse_index`]), SVCB in -02 ([`index_from_svcb`]) with the TXT
/// form kept as a fallback.
pub fn index_name(domain: &str) -> String {
    format!("_index.{AGENTS_LABEL}.{}", normalise_domain(domain))
}

/// The protocol-scoped names, `_mcp._agents.{domain}` and
/// `_a2a._agents.{domain}`. They are not in the draft text as far as the
/// notes go: third-party -02 deployments publish them (one runbook calls
/// `_mcp._agents` "the DNS-SD label") and scanners such as
/// isitagentready.com query them, so the crawler probes them too.
pub fn protocol_names(domain: &str) -> Vec<String> {
    let domain = normalise_domain(domain);
    PROTOCOL_LABELS
        .iter()
        .map(|p| format!("_{p}.{AGENTS_LABEL}.{domain}"))
        .collect()
}

/// The domain an agent's owner name is published under: the one whose
/// crawl reads that record again, and which a peer re-verifies a record's
/// `dnssec` claim on. The labels after `_agents` (`_{proto}._agents.{domain}`,
/// -01's `_{name}._{proto}._agents.{domain}`, -02's `{name}._agents.{domain}`);
/// for an owner without that label, -02's flat `{name}.{domain}` (an index
/// entry's name is one label), the labels after the first. `None` when
/// what is left is not a domain of two labels or more
/// ([`crate::identity::Domain`]).
pub fn published_domain(owner: &str) -> Option<String> {
    let owner = normalise_domain(owner);
    let labels: Vec<&str> = owner.split('.').collect();
    let rest = match labels.iter().position(|l| *l == AGENTS_LABEL) {
        Some(at) => &labels[at + 1..],
        None => &labels[1..],
    };
    crate::identity::Domain::parse(&rest.join("."))
        .ok()
        .map(String::from)
}

/// The names to query, in order, for an agent the index lists: -02's flat
/// `{name}.{domain}` (consumers must try it first), -02's optional
/// walkable AliasMode name `{name}._agents.{domain}`, and -01's
/// `_{name}._{proto}._agents.{domain}`.
pub fn agent_names(name: &str, proto: &str, domain: &str) -> Vec<String> {
    let domain = normalise_domain(domain);
    let name = name.trim().to_ascii_lowercase();
    let proto = proto.trim().to_ascii_lowercase();
    vec![
        format!("{name}.{domain}"),
        format!("{name}.{AGENTS_LABEL}.{domain}"),
        format!("_{name}._{proto}.{AGENTS_LABEL}.{domain}"),
    ]
}

/// Reads the TXT index at [`index_name`]: the records (strings joined)
/// that start `agents=`, each `name:proto` entries separated by `,`,
/// trimmed and lower-cased. Other TXT records are skipped, and so is an
/// entry whose name or protocol is not a label (1-63 letters, digits,
/// `-`; a protocol starts with a letter), as dns-aid-core does. Entries of
/// several `agents=` records are merged; duplicates are dropped; order is
/// kept. No `agents=` record, or `agents=` alone, is an empty index.
///
/// # Errors
/// [`Reason::DnsAidMalformed`] for an index record over
/// [`MAX_INDEX_BYTES`] or more than [`MAX_INDEX_AGENTS`] entries.
pub fn parse_index(records: &[String]) -> Result<Vec<IndexedAgent>, FormatError> {
    let mut out: Vec<IndexedAgent> = Vec::new();
    let mut entries = 0;
    for record in records {
        let Some(list) = record
            .trim_start()
            .split_once('=')
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case("agents"))
            .map(|(_, v)| v)
        else {
            continue;
        };
        if record.len() > MAX_INDEX_BYTES {
            return Err(malformed(format!(
                "index record of {} bytes, over the {MAX_INDEX_BYTES}-byte limit",
                record.len()
            )));
        }
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            entries += 1;
            if entries > MAX_INDEX_AGENTS {
                return Err(malformed(format!(
                    "more than {MAX_INDEX_AGENTS} agents in the index"
                )));
            }
            let Some((name, proto)) = entry.split_once(':') else {
                continue;
            };
            let (name, proto) = (
                name.trim().to_ascii_lowercase(),
                proto.trim().to_ascii_lowercase(),
            );
            let proto_ok = proto.starts_with(|c: char| c.is_ascii_lowercase());
            if !is_label(&name) || !is_label(&proto) || !proto_ok {
                continue;
            }
            let agent = IndexedAgent { name, proto };
            if !out.contains(&agent) {
                out.push(agent);
            }
        }
    }
    Ok(out)
}

/// 1-63 of ASCII letters, digits and `-` (the -01 ABNF's agent-name).
fn is_label(s: &str) -> bool {
    (1..=MAX_LABEL_CHARS).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Reads an agent's SVCB record found at `owner`.
///
/// An AliasMode record gives [`Binding::Alias`]. For an RRset the caller
/// applies RFC 9460 section 2.4.1: when it holds an AliasMode record, its
/// ServiceMode records are ignored; several ServiceMode records (-02
/// publishes one per protocol) are several agents.
///
/// # Errors
/// [`Reason::DnsAidMalformed`] when the owner is not a domain name; for
/// AliasMode to `.` (RFC 9460: the service does not exist); for a target
/// that is not a host name with letters, digits and `-` only (-02 forbids
/// underscores in TargetName, since the host needs a public certificate;
/// a ServiceMode `.` target at an `_agents` name therefore fails); port 0;
/// more than [`MAX_PARAMS`] params or a key twice; more than
/// [`MAX_ALPN_IDS`] alpn ids; a `mandatory` key that is absent or not read
/// here (RFC 9460 section 8: such a record is not for this client); a
/// DNS-AID key whose value is not UTF-8 text, is too long, holds quotes,
/// backslashes or control characters, or breaks its key's syntax.
pub fn from_svcb(owner: &str, svcb: &SVCB) -> Result<Binding<DnsAidAgent>, FormatError> {
    let owner = owner_name(owner)?;
    let target = match target_of(&owner, svcb)? {
        Binding::Alias { target } => return Ok(Binding::Alias { target }),
        Binding::Service(target) => target,
    };
    let params = Params::read(svcb)?;
    let (_, label_protocol) = owner_labels(&owner);
    let protocol = params
        .bap
        .clone()
        .or(label_protocol)
        .or_else(|| params.alpn.iter().find(|a| is_agent_alpn(a)).cloned());
    Ok(Binding::Service(DnsAidAgent {
        owner,
        protocol,
        target,
        port: params.port,
        alpn: params.alpn,
        well_known: params.well_known,
        cap: params.cap,
        cap_sha256: params.cap_sha256,
        policy: params.policy,
        realm: params.realm,
    }))
}

/// Reads the -02 SVCB index record found at `owner` ([`index_name`]):
/// the host whose HTTPS index the caller fetches ([`IndexHost::urls`]).
///
/// # Errors
/// As [`from_svcb`].
pub fn index_from_svcb(owner: &str, svcb: &SVCB) -> Result<Binding<IndexHost>, FormatError> {
    let owner = owner_name(owner)?;
    let target = match target_of(&owner, svcb)? {
        Binding::Alias { target } => return Ok(Binding::Alias { target }),
        Binding::Service(target) => target,
    };
    let params = Params::read(svcb)?;
    Ok(Binding::Service(IndexHost {
        target,
        port: params.port,
    }))
}

fn base_url(target: &str, port: Option<u16>) -> String {
    match port {
        Some(p) if p != 443 => format!("https://{target}:{p}"),
        _ => format!("https://{target}"),
    }
}

impl IndexHost {
    /// `https://{target}:{port}`: the record's port, else `default_port`
    /// (the crawler's HTTPS port), left out when it is 443.
    pub fn origin(&self, default_port: u16) -> String {
        base_url(&self.target, Some(self.port.unwrap_or(default_port)))
    }

    /// The URLs to try for the index, in order: [`HTTP_INDEX_PATHS`] on
    /// `https://{target}[:port]`.
    pub fn urls(&self) -> Vec<String> {
        let base = base_url(&self.target, self.port);
        HTTP_INDEX_PATHS
            .iter()
            .map(|p| format!("{base}{p}"))
            .collect()
    }
}

impl DnsAidAgent {
    /// `https://{target}[:port]`, the port left out when it is 443 or
    /// absent. SVCB carries no path; the card or index gives one.
    pub fn endpoint(&self) -> String {
        base_url(&self.target, self.port)
    }

    /// The metadata document the `well-known` key names:
    /// `{endpoint}/.well-known/{suffix}`, or `{endpoint}{path}` for an
    /// absolute path.
    pub fn well_known_url(&self) -> Option<String> {
        let wk = self.well_known.as_deref()?;
        Some(if wk.starts_with('/') {
            format!("{}{wk}", self.endpoint())
        } else {
            format!("{}/.well-known/{wk}", self.endpoint())
        })
    }

    /// The agent's name from its owner: `{name}` of `{name}.{domain}`,
    /// `{name}._agents.{domain}` or `_{name}._{proto}._agents.{domain}`;
    /// the domain for a protocol-scoped `_{proto}._agents.{domain}`.
    pub fn name(&self) -> String {
        owner_labels(&self.owner).0
    }

    /// The normalised descriptor from DNS alone: id `dns-aid:{owner}`,
    /// the agent name, the endpoint, the protocol and alpn ids as tags
    /// ([`DnsAidAgent::describe`] adds what the target serves).
    pub fn to_descriptor(&self) -> Descriptor {
        let id = format!("dns-aid:{}", self.owner);
        let name = match bounded(&self.name(), MAX_NAME_CHARS) {
            n if n.is_empty() => id.clone(),
            n => n,
        };
        let tags = terms(
            self.protocol
                .iter()
                .chain(self.alpn.iter())
                .map(String::as_str),
        );
        Descriptor {
            id,
            name,
            description: String::new(),
            version: None,
            publisher: None,
            endpoint: Some(self.endpoint()),
            capabilities: Vec::new(),
            tags,
            languages: Vec::new(),
            status: None,
            auth: None,
            format: DocumentFormat::DnsAid,
        }
    }
}

/// The owner, lower-cased without its trailing dot, checked to be a
/// domain name (labels of 1-63 letters, digits, `-`, `_`).
fn owner_name(owner: &str) -> Result<String, FormatError> {
    let owner = normalise_domain(owner);
    let ok = (1..=253).contains(&owner.len())
        && owner.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !ok {
        return Err(malformed(format!(
            "owner {:?} is not a domain name",
            bounded(&owner, 64)
        )));
    }
    Ok(owner)
}

/// The agent name and the `_{proto}` protocol an owner name carries.
fn owner_labels(owner: &str) -> (String, Option<String>) {
    let labels: Vec<&str> = owner.split('.').collect();
    let Some(at) = labels.iter().position(|l| *l == AGENTS_LABEL) else {
        // -02 flat `{name}.{domain}`.
        return (labels[0].to_owned(), None);
    };
    let under = |l: &str| l.strip_prefix('_').map(str::to_owned);
    match labels[..at] {
        // `_{proto}._agents.{domain}`: the domain's agent for that protocol.
        [p] if p.starts_with('_') => (labels[at + 1..].join("."), under(p)),
        // -01 `_{name}._{proto}._agents.{domain}`.
        [n, p] if n.starts_with('_') && p.starts_with('_') => (n[1..].to_owned(), under(p)),
        [] => (labels[at + 1..].join("."), None),
        // -02 walkable `{name}._agents.{domain}`, and anything else.
        [n, ..] => (n.trim_start_matches('_').to_owned(), None),
    }
}

/// An alpn id that names an agent protocol (-01 ABNF: `mcp`, `a2a`, or an
/// experimental `x-...`) rather than a TLS transport.
fn is_agent_alpn(id: &str) -> bool {
    matches!(id, "mcp" | "a2a") || id.starts_with("x-") && id.len() > 2
}

/// The effective target of a record: `Service(host)` (the owner for `.`)
/// in ServiceMode, `Alias` in AliasMode; the host checked either way.
fn target_of(owner: &str, svcb: &SVCB) -> Result<Binding<String>, FormatError> {
    let alias = svcb.svc_priority == 0;
    let target = if svcb.target_name.is_root() {
        if alias {
            return Err(malformed(
                "AliasMode to '.': the service does not exist (RFC 9460 section 2.5.1)",
            ));
        }
        owner.to_owned()
    } else {
        normalise_domain(&svcb.target_name.to_ascii())
    };
    let host_ok = (1..=253).contains(&target.len())
        && target.split('.').all(|l| {
            (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if !host_ok {
        return Err(malformed(format!(
            "target {:?} is not a host name of letters, digits and '-' (no '_')",
            bounded(&target, 64)
        )));
    }
    Ok(if alias {
        Binding::Alias { target }
    } else {
        Binding::Service(target)
    })
}

/// The SvcParams read from one record.
#[derive(Default)]
struct Params {
    port: Option<u16>,
    alpn: Vec<String>,
    cap: Option<String>,
    cap_sha256: Option<String>,
    bap: Option<String>,
    policy: Option<String>,
    realm: Option<String>,
    well_known: Option<String>,
}

impl Params {
    fn read(svcb: &SVCB) -> Result<Self, FormatError> {
        if svcb.svc_params.len() > MAX_PARAMS {
            return Err(malformed(format!(
                "{} SvcParams, over the limit of {MAX_PARAMS}",
                svcb.svc_params.len()
            )));
        }
        let keys: Vec<u16> = svcb.svc_params.iter().map(|(k, _)| u16::from(*k)).collect();
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].contains(k) {
                return Err(malformed(format!("SvcParam key{k} appears twice")));
            }
        }
        let mut out = Self::default();
        for (key, value) in &svcb.svc_params {
            match (key, value) {
                (SvcParamKey::Mandatory, SvcParamValue::Mandatory(m)) => {
                    for k in &m.0 {
                        let n = u16::from(*k);
                        if !keys.contains(&n) {
                            return Err(malformed(format!(
                                "mandatory names {k}, which the record does not have"
                            )));
                        }
                        if !understood(*k) {
                            return Err(malformed(format!(
                                "mandatory names {k}, which this reader does not support"
                            )));
                        }
                    }
                }
                (SvcParamKey::Alpn, SvcParamValue::Alpn(a)) => {
                    if a.0.len() > MAX_ALPN_IDS {
                        return Err(malformed(format!(
                            "{} alpn ids, over the limit of {MAX_ALPN_IDS}",
                            a.0.len()
                        )));
                    }
                    for id in &a.0 {
                        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_graphic()) {
                            return Err(malformed(format!(
                                "alpn id {:?} is not printable ASCII",
                                bounded(id, 64)
                            )));
                        }
                        out.alpn.push(id.clone());
                    }
                }
                (SvcParamKey::Port, SvcParamValue::Port(0)) => {
                    return Err(malformed("port 0"));
                }
                (SvcParamKey::Port, SvcParamValue::Port(p)) => out.port = Some(*p),
                (SvcParamKey::Key(n), v) if is_dns_aid_key(*n) => {
                    let SvcParamValue::Unknown(raw) = v else {
                        return Err(malformed(format!("key{n} does not carry text")));
                    };
                    out.set(*n, &raw.0)?;
                }
                // no-default-alpn, address hints, ech: the crawler connects
                // by name and does not use them; other keys are ignored.
                _ => {}
            }
        }
        Ok(out)
    }

    fn set(&mut self, key: u16, raw: &[u8]) -> Result<(), FormatError> {
        let (name, max) = match key {
            KEY_CAP => ("cap", MAX_URI_BYTES),
            KEY_CAP_SHA256 => ("cap-sha256", 43),
            KEY_BAP => ("bap", 255),
            KEY_POLICY => ("policy", MAX_URI_BYTES),
            KEY_REALM => ("realm", MAX_LABEL_CHARS),
            _ => ("well-known", MAX_WELL_KNOWN_BYTES),
        };
        if raw.len() > max {
            return Err(malformed(format!(
                "{name} (key{key}) is {} bytes, over {max}",
                raw.len()
            )));
        }
        let text = std::str::from_utf8(raw)
            .map_err(|_| malformed(format!("{name} (key{key}) is not UTF-8")))?
            .trim();
        if text.is_empty()
            || text
                .chars()
                .any(|c| c.is_control() || c == '"' || c == '\\')
        {
            return Err(malformed(format!(
                "{name} (key{key}) is empty or holds a quote, backslash or control character"
            )));
        }
        let bad =
            |why: &str| malformed(format!("{name} (key{key}) {:?}: {why}", bounded(text, 64)));
        match key {
            KEY_CAP => self.cap = Some(text.to_owned()),
            KEY_CAP_SHA256 => {
                let digest = (text.len() == 43)
                    .then(|| {
                        base64::engine::general_purpose::URL_SAFE_NO_PAD
                            .decode(text)
                            .ok()
                    })
                    .flatten();
                if digest.is_none_or(|d| d.len() != 32) {
                    return Err(bad("not 43 characters of unpadded base64url"));
                }
                self.cap_sha256 = Some(text.to_owned());
            }
            KEY_BAP => self.bap = Some(bap(text).ok_or_else(|| bad("not a protocol token"))?),
            KEY_POLICY => self.policy = Some(text.to_owned()),
            KEY_REALM => {
                if !text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(bad("not letters, digits, '-' and '_'"));
                }
                self.realm = Some(text.to_owned());
            }
            _ => {
                let ok = text
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#')
                    && (text.starts_with('/') && !text.starts_with("//") || !text.contains('/'));
                if !ok {
                    return Err(bad("not a .well-known suffix or an absolute path"));
                }
                self.well_known = Some(text.to_owned());
            }
        }
        Ok(())
    }
}

fn is_dns_aid_key(n: u16) -> bool {
    matches!(
        n,
        KEY_CAP | KEY_CAP_SHA256 | KEY_BAP | KEY_POLICY | KEY_REALM | KEY_WELL_KNOWN
    )
}

/// Whether this reader handles a key named in `mandatory`: connecting by
/// name over TLS makes the address hints and no-default-alpn safe to
/// accept; ECH and keys it does not know are not.
fn understood(key: SvcParamKey) -> bool {
    match key {
        SvcParamKey::Alpn
        | SvcParamKey::NoDefaultAlpn
        | SvcParamKey::Port
        | SvcParamKey::Ipv4Hint
        | SvcParamKey::Ipv6Hint => true,
        SvcParamKey::Key(n) => is_dns_aid_key(n),
        _ => false,
    }
}

/// The protocol of a `bap` value: -02's one token, `mcp` or `mcp=1.0`;
/// a legacy list (-01's `mcp/1,a2a/1`) gives its first token.
fn bap(text: &str) -> Option<String> {
    let token = text.split(',').next()?.trim();
    let (name, version) = match token.split_once(['=', '/']) {
        Some((n, v)) => (n, Some(v)),
        None => (token, None),
    };
    let name_ok = (1..=MAX_LABEL_CHARS).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let version_ok = version.is_none_or(|v| {
        (1..=64).contains(&v.len())
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    });
    (name_ok && version_ok).then(|| name.to_owned())
}

#[cfg(test)]
mod tests;
