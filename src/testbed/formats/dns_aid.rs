//! The DNS-AID publishers whose records a crawler follows to their
//! targets: a card and a capability document behind an `_a2a` record, an
//! MCP server card behind a `well-known` key, and each way a target or
//! its documents can be refused (module table in [`super`]).

use std::net::Ipv4Addr;
use std::time::Duration;

use base64::Engine as _;
use hickory_proto::rr::rdata::svcb::{Alpn, SvcParamKey, SvcParamValue, Unknown};
use hickory_proto::rr::RData;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{card, expect, host, json_doc, svcb, Builder};
use crate::descriptor::DocumentFormat::DnsAid;
use crate::formats::a2a;
use crate::formats::dns_aid::{KEY_BAP, KEY_CAP, KEY_CAP_SHA256, KEY_WELL_KNOWN};
use crate::testbed::publish::origin;
use crate::testbed::Drip;
use crate::trust::TrustLevel::Unverified;

/// The domain whose `_a2a._agents` record leads to an A2A card and a
/// capability document (the happy path).
pub const DNS_AID_CARD_DOMAIN: &str = "dnsaid-card.formats.test";
/// The name of the card behind it.
pub const DNS_AID_CARD_NAME: &str = "Tide Forecaster";
/// The domain whose record's `cap` is on a host at a loopback address,
/// its target at a public one (nothing is fetched from the target): read
/// by a crawler that allows private addresses, refused by one that does
/// not.
pub const DNS_AID_PRIVATE_CAP_DOMAIN: &str = "dnsaid-privcap.formats.test";
/// The domain publishing one agent more than a crawler follows: 16 SVCB
/// records at each protocol name, and one at the name its index lists.
pub const DNS_AID_CROWD_DOMAIN: &str = "dnsaid-crowd.formats.test";
/// The public address of that target; nothing connects to it.
const PUBLIC_TARGET: Ipv4Addr = Ipv4Addr::new(192, 88, 99, 1);
/// Where the capability documents are served.
const CAP_PATH: &str = "/.well-known/agent-cap.json";

/// How a broken publisher serves a card.
type Breaks = fn(Value) -> super::Served;

fn text_key(key: u16, value: &str) -> (SvcParamKey, SvcParamValue) {
    (
        SvcParamKey::Key(key),
        SvcParamValue::Unknown(Unknown(value.as_bytes().to_vec())),
    )
}

fn digest(body: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(body))
}

impl Builder {
    /// The record `_{proto}._agents.{domain}` pointing at `target` on
    /// the testbed's HTTPS port, with `extra` params.
    fn dns_aid_record(
        &mut self,
        domain: &str,
        proto: &str,
        target: &str,
        extra: Vec<(SvcParamKey, SvcParamValue)>,
    ) -> String {
        let owner = format!("_{proto}._agents.{domain}");
        let mut params = vec![
            (
                SvcParamKey::Alpn,
                SvcParamValue::Alpn(Alpn(vec!["h2".into()])),
            ),
            (SvcParamKey::Port, SvcParamValue::Port(self.ports.https)),
        ];
        params.extend(extra);
        // RFC 9460 section 2.2: keys in increasing order (a resolver
        // drops an answer that breaks it).
        params.sort_by_key(|(key, _)| u16::from(*key));
        self.records
            .push((owner.clone(), svcb(1, &format!("{target}."), params)));
        owner
    }

    fn expect_dns_aid(&mut self, domain: &str, owner: &str, outcome: Result<(), &'static str>) {
        let outcome = outcome.map(|()| Unverified);
        self.expected
            .push(expect(domain, &format!("dns-aid:{owner}"), DnsAid, outcome));
    }

    /// Every DNS-AID publisher whose target serves something.
    pub(super) fn dns_aid_followed(&mut self) {
        self.dns_aid_card();
        self.dns_aid_server_card();
        self.dns_aid_private_cap();
        self.dns_aid_refused();
        self.dns_aid_broken_cards();
        self.dns_aid_crowd();
        self.dns_aid_index();
    }

    /// A -02 SVCB index at `_index._agents` naming a host that serves
    /// dns-aid-core's own index (not read) and an ARD catalog of one entry
    /// of the domain.
    fn dns_aid_index(&mut self) {
        let domain = host("dnsaid-index");
        let target = host("dnsaid-index-host");
        self.add_host(&target);
        let params = vec![(SvcParamKey::Port, SvcParamValue::Port(self.ports.https))];
        self.records.push((
            format!("_index._agents.{domain}"),
            svcb(1, &format!("{target}."), params),
        ));
        self.serve(
            &target,
            "/.well-known/agents-index.json",
            json_doc(&json!({"agents": [{"name": "pilot", "protocol": "a2a"}]})),
        );
        let id = format!("urn:air:{domain}:harbour-pilot");
        let base = origin("https", &target, self.ports.https);
        let catalog = json!({
            "specVersion": "1.0",
            "host": {"displayName": "Harbour Index"},
            "entries": [{
                "identifier": id, "displayName": "Harbour Pilot",
                "type": "application/a2a-agent-card+json",
                "url": format!("{base}/pilot/agent-card.json"),
                "description": "Guides ships into the harbour.",
                "capabilities": ["harbour_pilotage"],
            }],
        });
        self.serve(
            &target,
            crate::formats::ard::WELL_KNOWN_PATH,
            json_doc(&catalog),
        );
        self.expected.push(expect(
            &domain,
            &id,
            crate::descriptor::DocumentFormat::Ard,
            Ok(Unverified),
        ));

        // An index host whose document at ARD's path is not a catalog.
        let domain = host("dnsaid-index-broken");
        let target = host("dnsaid-index-broken-host");
        self.add_host(&target);
        let params = vec![(SvcParamKey::Port, SvcParamValue::Port(self.ports.https))];
        self.records.push((
            format!("_index._agents.{domain}"),
            svcb(1, &format!("{target}."), params),
        ));
        let path = crate::formats::ard::WELL_KNOWN_PATH;
        self.serve(
            &target,
            path,
            json_doc(&json!({"specVersion": "2.0", "entries": []})),
        );
        self.expected.push(expect(
            &domain,
            &format!("{target}{path}"),
            crate::descriptor::DocumentFormat::Ard,
            Err("catalog_invalid"),
        ));
    }

    /// [`DNS_AID_CROWD_DOMAIN`]: 33 agents, each record of an RRset told
    /// apart by its priority; their targets serve no card.
    fn dns_aid_crowd(&mut self) {
        let target = host("dnsaid-crowd-host");
        self.add_host(&target);
        let https = self.ports.https;
        let record = |priority: u16| {
            let params = vec![(SvcParamKey::Port, SvcParamValue::Port(https))];
            svcb(priority, &format!("{target}."), params)
        };
        for proto in ["a2a", "mcp"] {
            for priority in 1..=16 {
                self.records.push((
                    format!("_{proto}._agents.{DNS_AID_CROWD_DOMAIN}"),
                    record(priority),
                ));
            }
        }
        self.records.push((
            format!("_index._agents.{DNS_AID_CROWD_DOMAIN}"),
            RData::TXT(hickory_proto::rr::rdata::TXT::new(vec![
                "agents=extra:a2a".into()
            ])),
        ));
        self.records
            .push((format!("extra.{DNS_AID_CROWD_DOMAIN}"), record(1)));
    }

    /// `_a2a._agents` to a host serving an A2A card, and a capability
    /// document whose `cap-sha256` is in the record.
    fn dns_aid_card(&mut self) {
        let target = host("dnsaid-card-host");
        self.add_host(&target);
        let body = card(
            &target,
            self.ports,
            DNS_AID_CARD_NAME,
            ("tide_prediction", "Tide prediction", &["ocean", "tides"]),
        );
        self.serve(&target, a2a::WELL_KNOWN_PATH, json_doc(&body));
        let cap = json_doc(&json!({
            "capabilities": ["harbour_schedules"],
            "version": "1.0.0",
            "description": "Tide tables and harbour schedules.",
            "use_cases": ["sailing"],
        }));
        let cap_url = format!("{}{CAP_PATH}", origin("https", &target, self.ports.https));
        let params = vec![
            text_key(KEY_BAP, "a2a"),
            text_key(KEY_CAP, &cap_url),
            text_key(KEY_CAP_SHA256, &digest(&cap.body)),
        ];
        self.serve(&target, CAP_PATH, cap);
        let owner = self.dns_aid_record(DNS_AID_CARD_DOMAIN, "a2a", &target, params);
        self.expect_dns_aid(DNS_AID_CARD_DOMAIN, &owner, Ok(()));
    }

    /// `_mcp._agents` with a `well-known` absolute path to an MCP server
    /// card.
    fn dns_aid_server_card(&mut self) {
        let domain = host("dnsaid-mcp");
        let target = host("dnsaid-mcp-host");
        self.add_host(&target);
        let path = "/mcp/server-card.json";
        let body = json!({
            "serverInfo": {"name": "ledger-mcp", "title": "Ledger Tools", "version": "2.1.0"},
            "description": "Reconciles ledgers and exports journals over MCP.",
            "tools": [{"name": "reconcile_ledger"}, {"name": "export_journal"}],
        });
        self.serve(&target, path, json_doc(&body));
        let params = vec![text_key(KEY_BAP, "mcp"), text_key(KEY_WELL_KNOWN, path)];
        let owner = self.dns_aid_record(&domain, "mcp", &target, params);
        self.expect_dns_aid(&domain, &owner, Ok(()));
    }

    /// A record whose protocol implies no card, its target public and its
    /// `cap` on a loopback host ([`DNS_AID_PRIVATE_CAP_DOMAIN`]).
    fn dns_aid_private_cap(&mut self) {
        let target = host("dnsaid-privcap-host");
        self.records
            .push((target.clone(), RData::A(PUBLIC_TARGET.into())));
        let cap_host = host("dnsaid-privcap-cap");
        self.add_host(&cap_host);
        let cap_url = format!("{}{CAP_PATH}", origin("https", &cap_host, self.ports.https));
        self.serve(
            &cap_host,
            CAP_PATH,
            json_doc(&json!({"capabilities": ["internal_search"]})),
        );
        let params = vec![text_key(KEY_BAP, "openapi"), text_key(KEY_CAP, &cap_url)];
        let owner = self.dns_aid_record(DNS_AID_PRIVATE_CAP_DOMAIN, "mcp", &target, params);
        self.expect_dns_aid(DNS_AID_PRIVATE_CAP_DOMAIN, &owner, Ok(()));
    }

    /// A plain-http `cap`, a target at 0.0.0.0, and a capability document
    /// that is not the one `cap-sha256` names.
    fn dns_aid_refused(&mut self) {
        let domain = host("dnsaid-http");
        let target = host("dnsaid-http-host");
        self.add_host(&target);
        let cap = format!("http://{target}/cap.json");
        let owner = self.dns_aid_record(&domain, "a2a", &target, vec![text_key(KEY_CAP, &cap)]);
        self.expect_dns_aid(&domain, &owner, Err("insecure_url"));

        let domain = host("dnsaid-zero");
        let target = host("dnsaid-zero-host");
        self.records
            .push((target.clone(), RData::A(Ipv4Addr::UNSPECIFIED.into())));
        let owner = self.dns_aid_record(&domain, "a2a", &target, Vec::new());
        self.expect_dns_aid(&domain, &owner, Err("address_not_allowed"));

        let domain = host("dnsaid-digest");
        let target = host("dnsaid-digest-host");
        self.add_host(&target);
        let served = json_doc(&json!({"capabilities": ["payments"]}));
        let claimed = digest(b"{\"capabilities\": [\"payments\"]}");
        self.serve(&target, CAP_PATH, served);
        let cap_url = format!("{}{CAP_PATH}", origin("https", &target, self.ports.https));
        let params = vec![
            text_key(KEY_BAP, "mcp"),
            text_key(KEY_CAP, &cap_url),
            text_key(KEY_CAP_SHA256, &claimed),
        ];
        let owner = self.dns_aid_record(&domain, "mcp", &target, params);
        self.expect_dns_aid(&domain, &owner, Err("cap_digest_mismatch"));
    }

    /// Targets serving the implied A2A card too large, truncated, and
    /// drip-fed slower than any fetch waits.
    fn dns_aid_broken_cards(&mut self) {
        let broken: [(&str, Breaks, &'static str); 3] = [
            (
                "dnsaid-big",
                |mut body| {
                    body["description"] = json!("tides ".repeat(12_000));
                    json_doc(&body)
                },
                "document_too_large",
            ),
            (
                "dnsaid-truncated",
                |body| {
                    let mut served = json_doc(&body);
                    let half = served.body.len() / 2;
                    served.body = served.body.slice(..half);
                    served
                },
                "invalid_json",
            ),
            (
                "dnsaid-slow",
                |body| super::Served {
                    drip: Some(Drip {
                        bytes: 1,
                        every: Duration::from_millis(200),
                    }),
                    ..json_doc(&body)
                },
                "timeout",
            ),
        ];
        for (label, serve, reason) in broken {
            let domain = host(label);
            let target = host(&format!("{label}-host"));
            self.add_host(&target);
            let body = card(
                &target,
                self.ports,
                "Broken Card",
                ("broken", "Broken", &[]),
            );
            self.serve(&target, a2a::WELL_KNOWN_PATH, serve(body));
            let owner = self.dns_aid_record(&domain, "a2a", &target, Vec::new());
            self.expect_dns_aid(&domain, &owner, Err(reason));
        }
    }
}
