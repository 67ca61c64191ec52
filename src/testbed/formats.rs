//! The formats organisation, `formats.test`: publishers of every discovery
//! format beside ADP, healthy and broken, so a crawl can be checked
//! against what each one should give (`TestbedOptions::formats`).
//!
//! | domain | publishes | a correct crawler reports |
//! | --- | --- | --- |
//! | `a2a.formats.test` | an A2A 1.0 card, signed (EdDSA, key set on the same host) | `a2a:` agent, unverified, signature checked |
//! | `a2a-legacy.formats.test` | a 0.2 card at `/.well-known/agent.json` | `a2a:` agent, unverified |
//! | `a2a-forged.formats.test` | a signed card changed after signing | `card_signature_bad`, nothing stored |
//! | `a2a-broken.formats.test` | a card without skills | `card_invalid` |
//! | `a2a-anchored.formats.test` | a signed card, and an AID record whose `k` is the card's key | `a2a:` agent with the `fingerprint` flag (and `dnssec` in a signed zone); an `aid:` agent |
//! | `a2a-other-key.formats.test` | a signed card, and an AID record publishing another key | `a2a:` agent, no flag; an `aid:` agent |
//! | `catalog.formats.test` | an ARD catalog: two entries of its own, one claiming another publisher | two `urn:air:` agents, one `catalog_entry_invalid` |
//! | `catalog-broken.formats.test` | a catalog of `specVersion` 2.0 | `catalog_invalid` |
//! | `ard-sources.formats.test` | no `ard.json`: a manifest named by `robots.txt` (`Agentmap:`) with trust manifests signed through a key set on the host and through its `did:web`, and a registry (`application/ai-registry+json`); one named by the home page (`rel="ard"`) with a forged signature and a squatting identity; a skill embedded in the page as JSON-LD; a legacy `ai-catalog.json` | four `urn:air:` agents, unverified, signatures checked; `trust_manifest_signature_bad`; `catalog_entry_invalid`; the legacy catalog not fetched |
//! | `aid.formats.test` | an AID TXT record | `aid:` agent, unverified |
//! | `aid-broken.formats.test` | an AID TXT record without `u` | `aid_malformed` |
//! | `dnsaid.formats.test` | a DNS-AID SVCB record (`_mcp._agents`) | `dns-aid:` agent, unverified |
//! | `dnsaid-broken.formats.test` | a DNS-AID AliasMode record to nowhere | `dns_aid_malformed` |
//! | `dnsaid-card.formats.test` | `_a2a._agents` to a host serving an A2A card, and a `cap` document with its `cap-sha256` | `dns-aid:` agent with the card's name, description and skills, unverified |
//! | `dnsaid-mcp.formats.test` | `_mcp._agents` with a `well-known` path to an MCP server card | `dns-aid:` agent with the server card's name and tools |
//! | `dnsaid-privcap.formats.test` | a record whose `cap` is on a loopback host (its target public, nothing fetched there) | read with private addresses allowed, `address_not_allowed` without |
//! | `dnsaid-http.formats.test` | a plain-http `cap` | `insecure_url` |
//! | `dnsaid-zero.formats.test` | a target at 0.0.0.0 | `address_not_allowed` |
//! | `dnsaid-digest.formats.test` | a `cap` document that is not the one `cap-sha256` names | `cap_digest_mismatch` |
//! | `dnsaid-index.formats.test` | a -02 SVCB index naming a host that serves dns-aid-core's index and an ARD catalog | the catalog's `urn:air:` agent, unverified |
//! | `dnsaid-index-broken.formats.test` | a -02 SVCB index naming a host whose `ai-catalog.json` is of `specVersion` 2.0 | `catalog_invalid` |
//! | `dnsaid-crowd.formats.test` | 33 DNS-AID agents (16 records at each protocol name, one the index lists) | 32 followed, the last `dns_aid_malformed` |
//! | `dnsaid-big`, `dnsaid-truncated`, `dnsaid-slow.formats.test` | an implied A2A card over 64 KiB, cut in half, drip-fed | `document_too_large`, `invalid_json`, `timeout` |
//! | an ADP agent of the population | also an AID TXT record at its `_agent` name | the ADP agent as before and an `aid:` agent |

use std::net::Ipv4Addr;

use axum::body::Bytes;
use axum::http::StatusCode;
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use hickory_proto::rr::rdata::svcb::{Alpn, SvcParamKey, SvcParamValue, Unknown, SVCB};
use hickory_proto::rr::{Name, RData};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::publish::{origin, Ports};
use super::web::Served;
use crate::descriptor::DocumentFormat::{self, A2a, Aid, Ard, DnsAid};
use crate::formats::a2a;
use crate::trust::TrustLevel::{self, Unverified};

mod ard;
mod dns_aid;

pub use ard::{
    manifest_key, AGENTMAP_PATH, ARD_SOURCES_DOMAIN, LINKED_PATH, MANIFEST_JWKS_PATH, MANIFEST_KID,
};
pub use dns_aid::{
    DNS_AID_CARD_DOMAIN, DNS_AID_CARD_NAME, DNS_AID_CROWD_DOMAIN, DNS_AID_PRIVATE_CAP_DOMAIN,
};

/// The zone of the formats organisation.
pub const ZONE: &str = "formats.test";
/// Where the signed card's key set is served.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";
/// The key id of the signed card's key.
pub const KID: &str = "card-key-1";
/// The domain whose AID record anchors its signed card's key.
pub const A2A_ANCHORED_DOMAIN: &str = "a2a-anchored.formats.test";
/// The domain whose AID record publishes a key other than its card's.
pub const A2A_OTHER_KEY_DOMAIN: &str = "a2a-other-key.formats.test";

/// What a correct crawler of `domain` reports for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The domain to crawl.
    pub domain: String,
    /// The agent id reported.
    pub agent_id: String,
    /// Its format.
    pub format: DocumentFormat,
    /// The level reached and stored, or the reason code of the failure
    /// (nothing stored).
    pub outcome: Result<TrustLevel, &'static str>,
}

/// What the formats organisation publishes.
#[derive(Debug, Clone)]
pub struct FormatsOrg {
    /// DNS records: owner and data.
    pub records: Vec<(String, RData)>,
    /// HTTPS documents: host, path and what is served.
    pub documents: Vec<((String, String), Served)>,
    /// What a crawl of each domain reports.
    pub expected: Vec<Expected>,
}

fn host(label: &str) -> String {
    format!("{label}.{ZONE}")
}

fn json_doc(body: &Value) -> Served {
    Served {
        content_type: "application/json",
        body: Bytes::from(serde_json::to_vec_pretty(body).expect("JSON values serialise")),
        status: StatusCode::OK,
        drip: None,
    }
}

/// The signing key of the signed card (derived, so tests can rebuild it).
pub fn card_key() -> SigningKey {
    SigningKey::from_bytes(&Sha256::digest(b"agentmesh testbed: a2a card key").into())
}

/// A 1.0 card served by `domain`.
fn card(domain: &str, ports: Ports, name: &str, skill: (&str, &str, &[&str])) -> Value {
    let base = origin("https", domain, ports.https);
    json!({
        "name": name,
        "description": format!("{name}, published as an A2A Agent Card."),
        "version": "1.0.0",
        "provider": {"organization": "Formats Test Org", "url": format!("{base}/")},
        "supportedInterfaces": [
            {"url": format!("{base}/a2a/v1"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": true},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [{
            "id": skill.0,
            "name": skill.1,
            "description": format!("{} for the formats testbed.", skill.1),
            "tags": skill.2,
        }],
    })
}

fn expect(
    domain: &str,
    agent_id: &str,
    format: DocumentFormat,
    outcome: Result<TrustLevel, &'static str>,
) -> Expected {
    Expected {
        domain: domain.to_owned(),
        agent_id: agent_id.to_owned(),
        format,
        outcome,
    }
}

fn svcb(priority: u16, target: &str, params: Vec<(SvcParamKey, SvcParamValue)>) -> RData {
    let target = Name::from_ascii(target).expect("testbed SVCB targets are valid names");
    RData::SVCB(SVCB::new(priority, target, params))
}

/// Everything the formats organisation publishes, its hosts resolving to
/// `advertise`; `adp_domain` (an ADP agent of the population) also gets
/// an AID record.
pub fn formats_org(ports: Ports, advertise: Ipv4Addr, adp_domain: Option<&str>) -> FormatsOrg {
    let mut org = Builder {
        ports,
        advertise,
        records: Vec::new(),
        documents: Vec::new(),
        expected: Vec::new(),
    };
    // A2A: signed, legacy, forged, broken.
    org.a2a_signed();
    org.a2a_legacy();
    org.a2a_forged();
    org.a2a_broken();
    // A2A beside AID: the card's key anchored by `k`, and another key.
    org.a2a_anchored(A2A_ANCHORED_DOMAIN, &card_key().verifying_key());
    let other = SigningKey::from_bytes(&Sha256::digest(b"agentmesh testbed: another key").into());
    org.a2a_anchored(A2A_OTHER_KEY_DOMAIN, &other.verifying_key());
    // ARD: a catalog with a bad entry, and a catalog of another version.
    org.ard_catalogs();
    org.ard_sources();
    // AID: a record, a broken one, and one beside an ADP record.
    org.aid_records(adp_domain);
    // DNS-AID: a service record, and an alias to nowhere; records whose
    // targets serve cards and capability documents, healthy and broken.
    org.dns_aid_records();
    org.dns_aid_followed();
    FormatsOrg {
        records: org.records,
        documents: org.documents,
        expected: org.expected,
    }
}

/// The formats organisation while [`formats_org`] builds it, one format
/// at a time, in the order its records, documents and expectations are
/// listed.
struct Builder {
    ports: Ports,
    advertise: Ipv4Addr,
    records: Vec<(String, RData)>,
    documents: Vec<((String, String), Served)>,
    expected: Vec<Expected>,
}

impl Builder {
    /// An A record for `h`, at the advertised address.
    fn add_host(&mut self, h: &str) {
        self.records
            .push((h.to_owned(), RData::A(self.advertise.into())));
    }

    /// A document `host` serves at `path`.
    fn serve(&mut self, host: &str, path: &str, served: Served) {
        self.documents
            .push(((host.to_owned(), path.to_owned()), served));
    }

    /// A 1.0 card signed with [`card_key`], its key set beside it.
    fn a2a_signed(&mut self) {
        let signed = host("a2a");
        self.add_host(&signed);
        let jku = format!("{}{JWKS_PATH}", origin("https", &signed, self.ports.https));
        let body = card(
            &signed,
            self.ports,
            "Route Planner",
            ("route_planning", "Route planning", &["maps", "routing"]),
        );
        let key = card_key();
        self.documents.push((
            (signed.clone(), a2a::WELL_KNOWN_PATH.to_owned()),
            json_doc(&a2a::sign_card(&body, &key, KID, Some(&jku))),
        ));
        self.documents.push((
            (signed.clone(), JWKS_PATH.to_owned()),
            json_doc(&a2a::jwks_of(&key.verifying_key(), KID)),
        ));
        self.expected.push(expect(
            &signed,
            &format!("a2a:{signed}"),
            A2a,
            Ok(Unverified),
        ));
    }

    /// A 0.2 card at the legacy well-known path.
    fn a2a_legacy(&mut self) {
        let legacy = host("a2a-legacy");
        self.add_host(&legacy);
        let base = origin("https", &legacy, self.ports.https);
        let old = json!({
            "name": "Legacy Summariser",
            "description": "Summarises documents; an A2A 0.2 card.",
            "url": format!("{base}/a2a"),
            "protocolVersion": "0.2.5",
            "preferredTransport": "JSONRPC",
            "version": "0.9.0",
            "capabilities": {"streaming": false},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "summarization", "name": "Summarise", "description": "Summarises text.", "tags": ["text"]}],
        });
        self.documents.push((
            (legacy.clone(), a2a::LEGACY_WELL_KNOWN_PATH.to_owned()),
            json_doc(&old),
        ));
        self.expected.push(expect(
            &legacy,
            &format!("a2a:{legacy}"),
            A2a,
            Ok(Unverified),
        ));
    }

    /// A signed card changed after signing.
    fn a2a_forged(&mut self) {
        let forged = host("a2a-forged");
        self.add_host(&forged);
        let jku = format!("{}{JWKS_PATH}", origin("https", &forged, self.ports.https));
        let body = card(
            &forged,
            self.ports,
            "Payments Agent",
            ("payments", "Payments", &["finance"]),
        );
        let key = card_key();
        let mut tampered = a2a::sign_card(&body, &key, KID, Some(&jku));
        tampered["name"] = json!("Payments Agent (changed after signing)");
        self.documents.push((
            (forged.clone(), a2a::WELL_KNOWN_PATH.to_owned()),
            json_doc(&tampered),
        ));
        self.documents.push((
            (forged.clone(), JWKS_PATH.to_owned()),
            json_doc(&a2a::jwks_of(&key.verifying_key(), KID)),
        ));
        self.expected.push(expect(
            &forged,
            &format!("a2a:{forged}"),
            A2a,
            Err("card_signature_bad"),
        ));
    }

    /// A card without skills.
    fn a2a_broken(&mut self) {
        let broken = host("a2a-broken");
        self.add_host(&broken);
        let mut no_skills = card(&broken, self.ports, "Broken Card", ("x", "X", &[]));
        no_skills
            .as_object_mut()
            .expect("a card is an object")
            .remove("skills");
        self.documents.push((
            (broken.clone(), a2a::WELL_KNOWN_PATH.to_owned()),
            json_doc(&no_skills),
        ));
        self.expected.push(expect(
            &broken,
            &format!("a2a:{broken}"),
            A2a,
            Err("card_invalid"),
        ));
    }

    /// At `domain`, a card signed with [`card_key`] (its key set beside
    /// it) and an aid2 record whose `k` is `aid_key`.
    fn a2a_anchored(&mut self, domain: &str, aid_key: &ed25519_dalek::VerifyingKey) {
        self.add_host(domain);
        let base = origin("https", domain, self.ports.https);
        let jku = format!("{base}{JWKS_PATH}");
        let body = card(
            domain,
            self.ports,
            "Invoice Reader",
            (
                "invoice_reading",
                "Invoice reading",
                &["finance", "documents"],
            ),
        );
        let key = card_key();
        self.documents.push((
            (domain.to_owned(), a2a::WELL_KNOWN_PATH.to_owned()),
            json_doc(&a2a::sign_card(&body, &key, KID, Some(&jku))),
        ));
        self.documents.push((
            (domain.to_owned(), JWKS_PATH.to_owned()),
            json_doc(&a2a::jwks_of(&key.verifying_key(), KID)),
        ));
        let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(aid_key.as_bytes());
        self.records.push((
            format!("_agent.{domain}"),
            txt(&format!(
                "v=aid2;u={base}/a2a/v1;p=a2a;k={k};s=Invoices over A2A"
            )),
        ));
        self.expected.push(expect(
            domain,
            &format!("a2a:{domain}"),
            A2a,
            Ok(Unverified),
        ));
        self.expected.push(expect(
            domain,
            &format!("aid:{domain}"),
            Aid,
            Ok(Unverified),
        ));
    }

    /// An ARD catalog with a bad entry, and a catalog of another version.
    fn ard_catalogs(&mut self) {
        let catalog = host("catalog");
        self.add_host(&catalog);
        let base = origin("https", &catalog, self.ports.https);
        let weather = format!("urn:air:{catalog}:weather");
        let files = format!("urn:air:{catalog}:tools:files");
        let doc = json!({
            "specVersion": "1.0",
            "host": {"displayName": "Formats Test Catalog"},
            "entries": [
                {"identifier": weather, "displayName": "Weather Agent", "type": "application/a2a-agent-card+json",
                 "url": format!("{base}/weather/agent-card.json"), "description": "Forecasts the weather.",
                 "capabilities": ["weather_forecast"], "tags": ["weather"]},
                {"identifier": files, "displayName": "File Tools", "type": "application/mcp-server-card+json",
                 "url": format!("{base}/mcp/files.json"), "description": "Reads and writes files over MCP.",
                 "capabilities": ["file_access"]},
                {"identifier": "urn:air:elsewhere.test:spoof", "displayName": "Not Ours",
                 "type": "application/a2a-agent-card+json", "url": "https://elsewhere.test/card.json"}
            ],
        });
        self.documents.push((
            (
                catalog.clone(),
                crate::formats::ard::WELL_KNOWN_PATH.to_owned(),
            ),
            json_doc(&doc),
        ));
        self.expected
            .push(expect(&catalog, &weather, Ard, Ok(Unverified)));
        self.expected
            .push(expect(&catalog, &files, Ard, Ok(Unverified)));
        self.expected.push(expect(
            &catalog,
            "urn:air:elsewhere.test:spoof",
            Ard,
            Err("catalog_entry_invalid"),
        ));

        // ARD v0.91: `ard.json` is read first; the legacy catalog beside
        // it is not; an entry without `type` is refused.
        let current = host("catalog-v091");
        self.add_host(&current);
        let base = origin("https", &current, self.ports.https);
        let found = format!("urn:air:{current}:translator");
        let untyped = format!("urn:air:{current}:untyped");
        let legacy = format!("urn:air:{current}:legacy");
        let doc = json!({
            "specVersion": "1.0",
            "entries": [
                {"identifier": found, "displayName": "Translator", "type": "application/a2a-agent-card+json",
                 "url": format!("{base}/translator/agent-card.json"), "description": "Translates text.",
                 "representativeQueries": ["translate this into French", "what does this German text say"]},
                {"identifier": untyped, "displayName": "Untyped", "url": format!("{base}/untyped.json")}
            ],
        });
        self.documents.push((
            (
                current.clone(),
                crate::formats::ard::ARD_JSON_PATH.to_owned(),
            ),
            json_doc(&doc),
        ));
        let old = json!({"specVersion": "1.0", "entries": [
            {"identifier": legacy, "displayName": "Legacy", "type": "application/a2a-agent-card+json",
             "url": format!("{base}/legacy.json")}]});
        self.documents.push((
            (
                current.clone(),
                crate::formats::ard::WELL_KNOWN_PATH.to_owned(),
            ),
            json_doc(&old),
        ));
        self.expected
            .push(expect(&current, &found, Ard, Ok(Unverified)));
        self.expected.push(expect(
            &current,
            &untyped,
            Ard,
            Err("catalog_entry_invalid"),
        ));

        let bad_catalog = host("catalog-broken");
        self.add_host(&bad_catalog);
        let doc = json!({"specVersion": "2.0", "entries": []});
        self.documents.push((
            (
                bad_catalog.clone(),
                crate::formats::ard::WELL_KNOWN_PATH.to_owned(),
            ),
            json_doc(&doc),
        ));
        self.expected.push(expect(
            &bad_catalog,
            &format!("{bad_catalog}/.well-known/ai-catalog.json"),
            Ard,
            Err("catalog_invalid"),
        ));
    }

    /// An AID record, a broken one, and one beside `adp_domain`'s ADP record.
    fn aid_records(&mut self, adp_domain: Option<&str>) {
        let aid = host("aid");
        self.records.push((
            format!("_agent.{aid}"),
            txt(&format!(
                "v=aid1;u=https://{aid}/mcp;p=mcp;a=pat;s=Files over MCP"
            )),
        ));
        self.expected
            .push(expect(&aid, &format!("aid:{aid}"), Aid, Ok(Unverified)));
        let aid_broken = host("aid-broken");
        self.records
            .push((format!("_agent.{aid_broken}"), txt("v=aid1;p=mcp;s=No URI")));
        self.expected.push(expect(
            &aid_broken,
            &format!("aid:{aid_broken}"),
            Aid,
            Err("aid_malformed"),
        ));
        if let Some(d) = adp_domain {
            self.records.push((
                format!("_agent.{d}"),
                txt(&format!("v=aid1;u=https://{d}/a2a;p=a2a;s=Also over A2A")),
            ));
            self.expected
                .push(expect(d, &format!("aid:{d}"), Aid, Ok(Unverified)));
        }
    }

    /// A DNS-AID service record, and an alias to nowhere.
    fn dns_aid_records(&mut self) {
        let dnsaid = host("dnsaid");
        self.add_host(&dnsaid);
        let owner = format!("_mcp._agents.{dnsaid}");
        let params = vec![
            (
                SvcParamKey::Alpn,
                SvcParamValue::Alpn(Alpn(vec!["h2".into()])),
            ),
            (SvcParamKey::Port, SvcParamValue::Port(self.ports.https)),
            (
                SvcParamKey::Key(65402),
                SvcParamValue::Unknown(Unknown(b"mcp".to_vec())),
            ),
        ];
        self.records
            .push((owner.clone(), svcb(1, &format!("{dnsaid}."), params)));
        self.expected.push(expect(
            &dnsaid,
            &format!("dns-aid:{owner}"),
            DnsAid,
            Ok(Unverified),
        ));
        let dnsaid_broken = host("dnsaid-broken");
        let owner = format!("_a2a._agents.{dnsaid_broken}");
        self.records.push((owner.clone(), svcb(0, ".", Vec::new())));
        self.expected.push(expect(
            &dnsaid_broken,
            &format!("dns-aid:{owner}"),
            DnsAid,
            Err("dns_aid_malformed"),
        ));
    }
}

fn txt(text: &str) -> RData {
    RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![text.to_owned()]))
}
