//! What each agent of a [`Population`] publishes once the testbed's ports
//! are known: its TXT, SRV and A records, its `agent.json`, and its site.
//! Each [`Behaviour`] that is visible in DNS or in the document is applied
//! here; those visible in HTTP or in the challenge are applied by
//! [`super::web::AgentSite`].
//!
//! Used by [`super::Testbed::start`]; the renderers are public so that
//! tests can compute what an agent is expected to publish.

use std::net::Ipv4Addr;
use std::sync::Arc;

use axum::body::Bytes;

use serde_json::{json, Map, Value};

use super::dns::Zone;
use super::population::{agent_key, impostor_key, Agent, Behaviour, Population, Rotation};
use super::web::{AgentSite, Drip};
use super::TestbedError;
use crate::adp::{
    self, AgentDocument, Availability, Identity, PublicKey, CHAT_PATH, WELL_KNOWN_PATH,
};
use crate::identity;

/// The ports every URL is rendered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ports {
    /// HTTPS and WSS.
    pub https: u16,
    /// Plain HTTP.
    pub http: u16,
}

/// The address every reachable agent resolves to unless the testbed is
/// told to advertise another ([`super::TestbedOptions::advertise`]); also
/// the literal host of [`Behaviour::LoopbackTarget`]'s `wk` URL.
pub const AGENT_ADDRESS: Ipv4Addr = Ipv4Addr::LOCALHOST;
/// The address a [`Behaviour::PrivateTarget`] agent resolves to.
pub const PRIVATE_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// `scheme://host[:port]`, without the port when it is the scheme's default.
pub fn origin(scheme: &str, host: &str, port: u16) -> String {
    let default = match scheme {
        "https" | "wss" => 443,
        "http" | "ws" => 80,
        _ => 0,
    };
    if port == default {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

/// The path under which a site is also served on an IP-literal host
/// (where no Host name can tell the agents apart).
pub fn by_path_prefix(domain: &str) -> String {
    format!("/agents/{domain}")
}

/// Splits `text` into DNS character-strings of at most `max` bytes.
fn strings(text: &str, max: usize) -> Vec<String> {
    text.as_bytes()
        .chunks(max)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect()
}

impl Population {
    /// Another agent (the next one), for misbehaviours that name one.
    fn neighbour(&self, agent: &Agent) -> Option<&Agent> {
        (self.len() > 1).then(|| &self.agents()[(agent.index + 1) % self.len()])
    }

    /// The canonical `https://{domain}:{port}/.well-known/agent.json`.
    pub fn well_known_url(&self, agent: &Agent, ports: Ports) -> String {
        format!(
            "{}{WELL_KNOWN_PATH}",
            origin("https", &agent.domain, ports.https)
        )
    }

    /// The URL the TXT `wk=` names (differs from the canonical one for
    /// `PlainHttp` and `LoopbackTarget`).
    pub fn published_well_known(&self, agent: &Agent, ports: Ports) -> String {
        match agent.behaviour {
            Behaviour::PlainHttp => format!(
                "{}{WELL_KNOWN_PATH}",
                origin("http", &agent.domain, ports.http)
            ),
            Behaviour::LoopbackTarget => format!(
                "{}{}{WELL_KNOWN_PATH}",
                origin("https", &AGENT_ADDRESS.to_string(), ports.https),
                by_path_prefix(&agent.domain)
            ),
            _ => self.well_known_url(agent, ports),
        }
    }

    /// The TXT records at `_agent.{domain}`, each as its character-strings.
    /// Every fourth healthy agent splits its record into two strings, so
    /// that clients must join them (docs/protocol.md#crawl-txt).
    pub fn txt_records(&self, agent: &Agent, ports: Ports) -> Vec<Vec<String>> {
        let fp = agent.fingerprint();
        let wk = self.published_well_known(agent, ports);
        let record = |fp: &str, wk: &str| strings(&adp::txt::render(fp, wk), 255);
        match agent.behaviour {
            Behaviour::TxtMissing => Vec::new(),
            Behaviour::TxtMalformed => vec![strings(&format!("v=ADP1; wk={wk}"), 255)],
            Behaviour::TxtWrongVersion => {
                vec![strings(&format!("v=ADP2; pk={fp}; wk={wk}"), 255)]
            }
            Behaviour::TxtTwoRecords => {
                vec![record(&fp, &wk), record(&fp, &format!("{wk}?mirror=1"))]
            }
            Behaviour::FingerprintMismatch => {
                let other = impostor_key(self.config().seed, agent.index);
                vec![record(&identity::fingerprint(&other.verifying_key()), &wk)]
            }
            Behaviour::TxtLarge => {
                let mut records = vec![record(&fp, &wk)];
                for k in 0..6 {
                    let filler = format!("x-filler-{k}={}", "f".repeat(230));
                    records.push(vec![filler]);
                }
                records
            }
            Behaviour::Healthy if agent.index % 4 == 1 => {
                let text = adp::txt::render(&fp, &wk);
                let (a, b) = text.split_at(text.len() / 2);
                vec![vec![a.to_owned(), b.to_owned()]]
            }
            _ => vec![record(&fp, &wk)],
        }
    }

    /// The A record of `{domain}`: `advertised` (where the testbed's
    /// HTTPS listener is reached), except for a `PrivateTarget` agent.
    pub fn address(&self, agent: &Agent, advertised: Ipv4Addr) -> Ipv4Addr {
        match agent.behaviour {
            Behaviour::PrivateTarget => PRIVATE_ADDRESS,
            _ => advertised,
        }
    }

    /// The first key's fingerprint, once the population rotated.
    fn previous_fingerprint(&self, agent: &Agent) -> Option<String> {
        (self.config().rotation != Rotation::None).then(|| {
            identity::fingerprint(&agent_key(self.config().seed, agent.index).verifying_key())
        })
    }

    /// `identity.keyRotation`, signed by the first key, when the
    /// population rotated with proof.
    fn rotation_statement(&self, agent: &Agent) -> Map<String, Value> {
        let mut extra = Map::new();
        if self.config().rotation == Rotation::Proven {
            let old = agent_key(self.config().seed, agent.index);
            let statement = adp::rotation::sign(&agent.id(), &old, &agent.verifying_key());
            extra.insert(
                adp::rotation::MEMBER.into(),
                serde_json::to_value(statement).expect("a statement serialises"),
            );
        }
        extra
    }

    /// The agent's `agent.json`.
    pub fn document(&self, agent: &Agent, ports: Ports) -> AgentDocument {
        let base = origin("https", &agent.domain, ports.https);
        let chat = format!("{}{CHAT_PATH}", origin("wss", &agent.domain, ports.https));
        let key = agent.verifying_key();
        let domain = match agent.behaviour {
            Behaviour::WrongDomain => self
                .neighbour(agent)
                .map_or_else(|| "elsewhere.test".to_owned(), |a| a.domain.clone()),
            _ => agent.domain.clone(),
        };
        let object = |v: Value| match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let mut availability = agent.availability.clone();
        let status = availability
            .remove("status")
            .and_then(|s| s.as_str().map(str::to_owned))
            .unwrap_or_else(|| "online".into());
        AgentDocument {
            protocol: "ADP/1.0".into(),
            identity: Identity {
                id: agent.id(),
                domain,
                name: agent.name.clone(),
                owner: Some(agent.owner.clone()),
                created: Some(agent.created.clone()),
                public_key: PublicKey {
                    algorithm: "ed25519".into(),
                    fingerprint: identity::fingerprint(&key),
                    full: Some(identity::encode_public_key(&key)),
                },
                previous_fingerprint: self.previous_fingerprint(agent),
                extra: self.rotation_statement(agent),
            },
            endpoints: object(json!({
                "discovery": format!("{base}/"),
                "wellKnown": format!("{base}{WELL_KNOWN_PATH}"),
                "chat": chat,
                "tasks": format!("{base}/agent/tasks"),
            })),
            capabilities: agent.capabilities.clone(),
            interfaces: Some(object(json!({
                "chat": chat,
                "api": format!("{base}/agent/api"),
                "webhook": format!("{base}/agent/hooks"),
            }))),
            relationships: (!agent.relationships.is_empty()).then(|| agent.relationships.clone()),
            security: json!({
                "tlsRequired": true,
                "minProtocolVersion": "ADP/1.0",
                "authMethods": ["pubkey"],
                "rateLimit": {"requestsPerMinute": agent.rate_limit},
            }),
            policies: Some(json!({
                "privacy": format!("{base}/privacy"),
                "terms": format!("{base}/terms"),
            })),
            availability: Availability {
                status,
                extra: availability,
            },
            meta: Some(json!({
                "updated": agent.created,
                "version": agent.version.to_string(),
                "generator": "agentmesh testbed",
            })),
            extra: Map::new(),
        }
    }

    /// The authoritative zone for every agent: TXT at `_agent.{d}`, SRV at
    /// `_agent._tcp.{d}` (`0 0 {https port} {d}.`), A at `{d}` (see
    /// [`Population::address`]).
    ///
    /// # Errors
    /// [`TestbedError::Dns`] for a name that is not a valid DNS name.
    pub fn zone(&self, ports: Ports, advertised: Ipv4Addr) -> Result<Zone, TestbedError> {
        let mut zone = Zone::new();
        for agent in self.agents() {
            let d = &agent.domain;
            for record in self.txt_records(agent, ports) {
                zone.add_txt(&format!("_agent.{d}"), record)?;
            }
            zone.add_srv(&format!("_agent._tcp.{d}"), 0, 0, ports.https, d)?;
            zone.add_a(d, self.address(agent, advertised))?;
        }
        Ok(zone)
    }

    /// Every agent's site; each document is rendered when first asked for.
    pub fn sites(self: &Arc<Self>, ports: Ports, drip: Drip) -> Vec<AgentSite> {
        self.agents()
            .iter()
            .map(|agent| {
                let (population, index) = (Arc::clone(self), agent.index);
                let render = move || {
                    let document = population.document(&population.agents()[index], ports);
                    Bytes::from(
                        serde_json::to_vec_pretty(&document)
                            .expect("an AgentDocument always serialises to JSON"),
                    )
                };
                let mut site = AgentSite::lazy(&agent.domain, agent.key.clone(), render)
                    .with_behaviour(agent.behaviour)
                    .with_drip(drip);
                match (agent.behaviour, self.neighbour(agent)) {
                    (Behaviour::ChallengeBadSignature, _) => {
                        site = site.with_impostor(impostor_key(self.config().seed, index));
                    }
                    (Behaviour::RedirectOtherHost, Some(other)) => {
                        site = site.with_redirect_target(&self.well_known_url(other, ports));
                    }
                    _ => {}
                }
                site
            })
            .collect()
    }
}
