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

impl Builder {
    /// `ard-sources.formats.test`: no `ard.json`; an `Agentmap:` manifest
    /// with an entry whose trust manifest is signed (key set on the host)
    /// and one signed through its `did:web` identity; a `rel="ard"`
    /// manifest with a forged signature and an identity of another
    /// domain; a skill embedded in the page; and a legacy
    /// `ai-catalog.json` that must not be read, since the domain
    /// publishes v0.91 sources.
    pub(super) fn ard_sources(&mut self) {
        let domain = ARD_SOURCES_DOMAIN.to_owned();
        debug_assert_eq!(domain, host("ard-sources"));
        self.add_host(&domain);
        let base = origin("https", &domain, self.ports.https);
        let key = manifest_key();
        let jku = format!("{base}{MANIFEST_JWKS_PATH}");
        let id = |name: &str| format!("urn:air:{domain}:{name}");
        let entry = |name: &str, kind: &str, description: &str| {
            json!({
                "identifier": id(name),
                "displayName": name,
                "type": kind,
                "url": format!("{base}/artifacts/{name}.json"),
                "description": description,
                "representativeQueries": [format!("find {name}"), format!("use {name}")],
            })
        };
        // did:web encodes a port as %3A.
        let did = format!(
            "did:web:{}",
            base.trim_start_matches("https://").replace(':', "%3A")
        );
        let claims = json!({
            "identity": did,
            "identityType": "did",
            "attestations": [{"type": "SOC2-Type2", "uri": format!("{base}/trust/soc2.pdf"), "mediaType": "application/pdf"}],
        });
        let mut signed = entry(
            "ledger",
            "application/mcp-server-card+json",
            "Reconciles ledgers.",
        );
        signed["trustManifest"] = trust::sign(&claims, &key, MANIFEST_KID, Some(&jku));
        let mut by_did = entry(
            "auditor",
            "application/a2a-agent-card+json",
            "Audits expense reports.",
        );
        by_did["trustManifest"] = trust::sign(&claims, &key, MANIFEST_KID, None);
        // A registry the domain runs: what a search in `referrals` mode
        // names.
        let mut registry = entry(
            "finder",
            "application/ai-registry+json",
            "Searches the agents of the formats organisation.",
        );
        registry["url"] = json!(format!("{base}/ard/"));
        self.documents.push((
            (domain.clone(), AGENTMAP_PATH.to_owned()),
            json_doc(&json!({"entries": [signed, by_did, registry]})),
        ));

        let mut forged = entry(
            "forger",
            "application/mcp-server-card+json",
            "Claims an audit it never had.",
        );
        let mut changed = trust::sign(&claims, &key, MANIFEST_KID, Some(&jku));
        changed["attestations"][0]["type"] = json!("ISO-27001");
        forged["trustManifest"] = changed;
        let mut squatter = entry(
            "squatter",
            "application/mcp-server-card+json",
            "Says it is Google's.",
        );
        squatter["trustManifest"] = json!({"identity": "did:web:google.com"});
        self.documents.push((
            (domain.clone(), LINKED_PATH.to_owned()),
            json_doc(&json!({"specVersion": "1.0", "entries": [forged, squatter]})),
        ));

        let inline = entry(
            "slides",
            "application/ai-skill+md",
            "Turns an outline into slides.",
        );
        let page = format!(
            "<!doctype html><html><head><title>ARD sources</title>\n\
             <link rel=\"ard\" href=\"{LINKED_PATH}\">\n\
             <script type=\"application/ld+json\">{inline}</script>\n\
             </head><body>Agents of {domain}.</body></html>\n"
        );
        self.documents
            .push(((domain.clone(), "/".to_owned()), text("text/html", page)));
        let robots =
            format!("User-agent: *\nDisallow: /private/\nAgentmap: {base}{AGENTMAP_PATH}\n");
        self.documents.push((
            (domain.clone(), "/robots.txt".to_owned()),
            text("text/plain", robots),
        ));
        self.documents.push((
            (domain.clone(), MANIFEST_JWKS_PATH.to_owned()),
            json_doc(&a2a::jwks_of(&key.verifying_key(), MANIFEST_KID)),
        ));
        self.documents.push((
            (domain.clone(), "/.well-known/did.json".to_owned()),
            json_doc(&did_document(&did, &key)),
        ));
        let legacy = json!({"specVersion": "1.0", "entries": [entry("legacy", "application/mcp-server-card+json", "Old.")]});
        self.documents.push((
            (
                domain.clone(),
                crate::formats::ard::WELL_KNOWN_PATH.to_owned(),
            ),
            json_doc(&legacy),
        ));

        for name in ["ledger", "auditor", "finder", "slides"] {
            self.expected
                .push(expect(&domain, &id(name), Ard, Ok(Unverified)));
        }
        self.expected.push(expect(
            &domain,
            &id("forger"),
            Ard,
            Err("trust_manifest_signature_bad"),
        ));
        self.expected.push(expect(
            &domain,
            &id("squatter"),
            Ard,
            Err("catalog_entry_invalid"),
        ));
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
