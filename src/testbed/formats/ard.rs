//! The ARD v0.91 publishers whose entries are found beside or instead of
//! `ard.json`: manifests named by `robots.txt` and by the home page, the
//! page's own JSON-LD entries, and trust manifests signed, forged and
//! squatting (module table in [`super`]).

use axum::body::Bytes;
use axum::http::StatusCode;
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{expect, host, json_doc, Builder};
use crate::descriptor::DocumentFormat::Ard;
use crate::formats::a2a;
use crate::formats::ard::trust;
use crate::testbed::publish::origin;
use crate::testbed::web::Served;
use crate::trust::TrustLevel::Unverified;

/// The domain that publishes no `ard.json`: its entries are named by its
/// `robots.txt` and its home page, and embedded in the page.
pub const ARD_SOURCES_DOMAIN: &str = "ard-sources.formats.test";
/// Where that domain's `robots.txt` points (`Agentmap:`).
pub const AGENTMAP_PATH: &str = "/agents/entries.json";
/// Where that domain's home page points (`<link rel="ard">`).
pub const LINKED_PATH: &str = "/catalog/more.json";
/// Where the key set of its signed trust manifests is.
pub const MANIFEST_JWKS_PATH: &str = "/keys/ard-jwks.json";
/// The key id of that key.
pub const MANIFEST_KID: &str = "ard-manifest-1";

/// The key that signs the testbed's trust manifests (derived, so tests
/// can rebuild it).
pub fn manifest_key() -> SigningKey {
    SigningKey::from_bytes(&Sha256::digest(b"agentmesh testbed: ard trust manifest key").into())
}

fn text(content_type: &'static str, body: String) -> Served {
    Served {
        content_type,
        body: Bytes::from(body),
        status: StatusCode::OK,
        drip: None,
    }
}

/// What the publisher's documents share: its names, its key, its claims.
struct Publisher {
    domain: String,
    base: String,
    key: SigningKey,
    jku: String,
    did: String,
}

impl Publisher {
    fn new(domain: &str, https_port: u16) -> Self {
        let base = origin("https", domain, https_port);
        // did:web encodes a port as %3A.
        let did = format!(
            "did:web:{}",
            base.trim_start_matches("https://").replace(':', "%3A")
        );
        Self {
            domain: domain.to_owned(),
            jku: format!("{base}{MANIFEST_JWKS_PATH}"),
            base,
            key: manifest_key(),
            did,
        }
    }

    fn id(&self, name: &str) -> String {
        format!("urn:air:{}:{name}", self.domain)
    }

    /// An entry of `name`, of media type `kind`.
    fn entry(&self, name: &str, kind: &str, description: &str) -> Value {
        json!({
            "identifier": self.id(name),
            "displayName": name,
            "type": kind,
            "url": format!("{}/artifacts/{name}.json", self.base),
            "description": description,
            "representativeQueries": [format!("find {name}"), format!("use {name}")],
        })
    }

    /// The trust manifest's claims, unsigned.
    fn claims(&self) -> Value {
        json!({
            "identity": self.did,
            "identityType": "did",
            "attestations": [{"type": "SOC2-Type2", "uri": format!("{}/trust/soc2.pdf", self.base), "mediaType": "application/pdf"}],
        })
    }
}

impl Builder {
    /// `ard-sources.formats.test`: no `ard.json`; an `Agentmap:` manifest
    /// with an entry whose trust manifest is signed (key set on the host)
    /// and one signed through its `did:web` identity; a `rel="ard"`
    /// manifest with a forged signature and an identity of another
    /// domain; a skill embedded in the page; and a legacy
    /// `ai-catalog.json` that must not be read, since the domain
    /// publishes v0.91 sources.
    pub(super) fn ard_sources(&mut self) {
        debug_assert_eq!(ARD_SOURCES_DOMAIN, host("ard-sources"));
        self.add_host(ARD_SOURCES_DOMAIN);
        let p = Publisher::new(ARD_SOURCES_DOMAIN, self.ports.https);
        self.ard_agentmap(&p);
        self.ard_page(&p);
        let legacy = json!({"specVersion": "1.0", "entries": [p.entry("legacy", "application/mcp-server-card+json", "Old.")]});
        self.serve(
            &p.domain,
            crate::formats::ard::WELL_KNOWN_PATH,
            json_doc(&legacy),
        );
        for name in ["ledger", "auditor", "finder", "slides"] {
            self.expected
                .push(expect(&p.domain, &p.id(name), Ard, Ok(Unverified)));
        }
        self.expected.push(expect(
            &p.domain,
            &p.id("forger"),
            Ard,
            Err("trust_manifest_signature_bad"),
        ));
        self.expected.push(expect(
            &p.domain,
            &p.id("squatter"),
            Ard,
            Err("catalog_entry_invalid"),
        ));
    }

    /// The manifest `robots.txt` names: entries signed through the key
    /// set and through the DID document (both served), and a registry.
    fn ard_agentmap(&mut self, p: &Publisher) {
        let claims = p.claims();
        let mut signed = p.entry(
            "ledger",
            "application/mcp-server-card+json",
            "Reconciles ledgers.",
        );
        signed["trustManifest"] = trust::sign(&claims, &p.key, MANIFEST_KID, Some(&p.jku));
        let mut by_did = p.entry(
            "auditor",
            "application/a2a-agent-card+json",
            "Audits expense reports.",
        );
        by_did["trustManifest"] = trust::sign(&claims, &p.key, MANIFEST_KID, None);
        // A registry the domain runs: what a search in `referrals` mode
        // names.
        let mut registry = p.entry(
            "finder",
            "application/ai-registry+json",
            "Searches the agents of the formats organisation.",
        );
        registry["url"] = json!(format!("{}/ard/", p.base));
        let manifest = json!({"entries": [signed, by_did, registry]});
        self.serve(&p.domain, AGENTMAP_PATH, json_doc(&manifest));
        let robots = format!(
            "User-agent: *\nDisallow: /private/\nAgentmap: {}{AGENTMAP_PATH}\n",
            p.base
        );
        self.serve(&p.domain, "/robots.txt", text("text/plain", robots));
        let jwks = a2a::jwks_of(&p.key.verifying_key(), MANIFEST_KID);
        self.serve(&p.domain, MANIFEST_JWKS_PATH, json_doc(&jwks));
        let did = did_document(&p.did, &p.key);
        self.serve(&p.domain, "/.well-known/did.json", json_doc(&did));
    }

    /// The home page: a `rel="ard"` link to a manifest with a forged and
    /// a squatting entry, and a skill as JSON-LD.
    fn ard_page(&mut self, p: &Publisher) {
        let mut forged = p.entry(
            "forger",
            "application/mcp-server-card+json",
            "Claims an audit it never had.",
        );
        let mut changed = trust::sign(&p.claims(), &p.key, MANIFEST_KID, Some(&p.jku));
        changed["attestations"][0]["type"] = json!("ISO-27001");
        forged["trustManifest"] = changed;
        let mut squatter = p.entry(
            "squatter",
            "application/mcp-server-card+json",
            "Says it is Google's.",
        );
        squatter["trustManifest"] = json!({"identity": "did:web:google.com"});
        let linked = json!({"specVersion": "1.0", "entries": [forged, squatter]});
        self.serve(&p.domain, LINKED_PATH, json_doc(&linked));
        let inline = p.entry(
            "slides",
            "application/ai-skill+md",
            "Turns an outline into slides.",
        );
        let page = format!(
            "<!doctype html><html><head><title>ARD sources</title>\n\
             <link rel=\"ard\" href=\"{LINKED_PATH}\">\n\
             <script type=\"application/ld+json\">{inline}</script>\n\
             </head><body>Agents of {}.</body></html>\n",
            p.domain
        );
        self.serve(&p.domain, "/", text("text/html", page));
    }
}

/// The DID document of `did` with `key` as its one verification method
/// (`#{MANIFEST_KID}`).
fn did_document(did: &str, key: &SigningKey) -> Value {
    let jwk = a2a::jwks_of(&key.verifying_key(), MANIFEST_KID)["keys"][0].clone();
    json!({
        "@context": ["https://www.w3.org/ns/did/v1"],
        "id": did,
        "verificationMethod": [{
            "id": format!("{did}#{MANIFEST_KID}"),
            "type": "JsonWebKey2020",
            "controller": did,
            "publicKeyJwk": jwk,
        }],
        "assertionMethod": [format!("{did}#{MANIFEST_KID}")],
    })
}
