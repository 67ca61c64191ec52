use serde_json::json;

use super::*;

/// An entry that passes every check for `example.com`.
fn good(name: &str) -> Value {
    json!({
        "identifier": format!("urn:air:example.com:{name}"),
        "displayName": name,
        "type": "application/a2a-agent-card+json",
        "url": format!("https://example.com/{name}/agent-card.json"),
    })
}

fn catalog(entries: Vec<Value>) -> Value {
    json!({"specVersion": "1.0", "entries": entries})
}

/// The refusal of the single entry `entry` in a catalog of `domain`.
fn entry_error(entry: Value, domain: &str) -> FormatError {
    let mut c = parse_catalog(&catalog(vec![entry]), domain).unwrap();
    assert_eq!(c.entries.len(), 1);
    c.entries.pop().unwrap().unwrap_err()
}

fn with(mut entry: Value, key: &str, value: Value) -> Value {
    entry[key] = value;
    entry
}

fn without(mut entry: Value, key: &str) -> Value {
    entry.as_object_mut().unwrap().remove(key);
    entry
}

#[test]
fn the_minimal_example_reads_and_maps() {
    // spec/ard.md section 4.4, its publisher github.com read from
    // github.com.
    let doc = json!({
      "specVersion": "1.0",
      "host": { "displayName": "Alice's AI Tools" },
      "entries": [{
          "identifier": "urn:air:github.com:alice-dev:pptx-creator",
          "displayName": "pptx-creator",
          "type": "application/ai-skill",
          "url": "https://github.com/alice-dev/pptx-creator",
          "description": "Create professional PowerPoint presentations following brand guidelines."
      }]
    });
    let c = parse_catalog(&doc, "GitHub.com.").unwrap();
    assert_eq!(c.host.as_deref(), Some("Alice's AI Tools"));
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.kind(), EntryKind::Other);
    assert_eq!(e.publisher(), "github.com");
    let d = e.to_descriptor();
    assert_eq!(d.id, "urn:air:github.com:alice-dev:pptx-creator");
    assert_eq!(d.name, "pptx-creator");
    assert_eq!(d.format, DocumentFormat::Ard);
    assert_eq!(
        d.endpoint.as_deref(),
        Some("https://github.com/alice-dev/pptx-creator")
    );
    assert!(d.tags.is_empty(), "a skill has no kind tag: {:?}", d.tags);
    assert!(d.description.starts_with("Create professional"));
}

#[test]
fn the_fda_example_reads_and_maps() {
    // conformance/examples/fda-ndc, shortened as in the notes, read
    // from fda.gov (its publisher).
    let doc = json!({
      "specVersion": "1.0",
      "host": {
        "displayName": "U.S. Food and Drug Administration",
        "identifier": "did:web:fda.gov",
        "documentationUrl": "https://open.fda.gov/apis/drug/ndc/"
      },
      "entries": [{
          "identifier": "urn:air:fda.gov:api:drug-ndc",
          "displayName": "FDA Drug NDC Directory API",
          "type": "application/mcp-server-card+json",
          "url": "https://api.fda.gov/drug/ndc.json",
          "description": "Official FDA National Drug Code Directory API ...",
          "representativeQueries": [
            "find drug information by NDC code 1234-5678-90",
            "search for all aspirin products with dosage form tablet"
          ],
          "capabilities": ["DrugLookup", "ManufacturerSearch"],
          "trustManifest": {
            "identity": "did:web:fda.gov",
            "identityType": "did",
            "attestations": [{ "type": "Official-Government-API",
                "uri": "https://www.fda.gov/regulatory-information/foia/electronic-reading-room",
                "mediaType": "text/html" }]
          }
      }]
    });
    let c = parse_catalog(&doc, "fda.gov").unwrap();
    assert_eq!(c.host.as_deref(), Some("U.S. Food and Drug Administration"));
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.kind(), EntryKind::McpServer);
    let d = e.to_descriptor();
    assert_eq!(d.capabilities, ["druglookup", "manufacturersearch"]);
    assert_eq!(d.tags, ["mcp"]);
    assert_eq!(d.publisher.as_deref(), Some("fda.gov"));
    assert_eq!(d.name, "FDA Drug NDC Directory API");
    assert_eq!(
        d.endpoint.as_deref(),
        Some("https://api.fda.gov/drug/ndc.json")
    );
}

#[test]
fn one_bad_entry_leaves_the_others() {
    let bad = without(good("b"), "displayName");
    let c = parse_catalog(&catalog(vec![good("a"), bad, good("c")]), "example.com").unwrap();
    let ok: Vec<&str> = c
        .entries
        .iter()
        .filter_map(|e| e.as_ref().ok())
        .map(|e| e.display_name.as_str())
        .collect();
    assert_eq!(ok, ["a", "c"]);
    let err = c.entries[1].as_ref().unwrap_err();
    assert_eq!(err.reason, Reason::CatalogEntryInvalid);
    assert!(err.message.starts_with("/entries/1/displayName"), "{err}");
}

#[test]
fn catalogs_that_are_not_catalogs_are_refused() {
    let many: Vec<Value> = (0..=MAX_ENTRIES).map(|i| good(&format!("a{i}"))).collect();
    let cases = [
        (json!([]), "not a JSON object"),
        (
            json!({"specVersion": "2.0", "entries": []}),
            "not a 1.x version",
        ),
        (
            json!({"specVersion": "1.x", "entries": []}),
            "not a 1.x version",
        ),
        (
            json!({"specVersion": "10.0", "entries": []}),
            "not a 1.x version",
        ),
        (
            json!({"specVersion": 1.0, "entries": []}),
            "/specVersion is not a string",
        ),
        (json!({"specVersion": "1.0"}), "/entries is missing"),
        (
            json!({"specVersion": "1.0", "entries": {}}),
            "/entries is not an array",
        ),
        (catalog(many), "at most 1000"),
    ];
    for (doc, says) in cases {
        let err = parse_catalog(&doc, "example.com").unwrap_err();
        assert_eq!(err.reason, Reason::CatalogInvalid, "{doc}");
        assert!(err.message.contains(says), "{err} should say {says:?}");
    }
}

#[test]
fn an_entry_without_a_type_is_refused() {
    for entry in [
        without(good("a"), "type"),
        with(good("a"), "type", json!(" ")),
    ] {
        let c = parse_catalog(&catalog(vec![entry]), "example.com").unwrap();
        let err = c.entries[0].as_ref().unwrap_err();
        assert!(err.message.contains("/type"), "{err}");
    }
}

#[test]
fn lenient_where_the_spec_sources_disagree() {
    // Unknown top-level members (the ARD schema forbids them), a
    // minor version above 0, no entries, `mediaType` for `type`.
    let doc = json!({"specVersion": "1.3", "metadata": {"x": 1}, "entries": []});
    assert!(parse_catalog(&doc, "example.com")
        .unwrap()
        .entries
        .is_empty());
    let entry = with(
        without(good("a"), "type"),
        "mediaType",
        json!("Application/A2A-Agent-Card+JSON; v=1"),
    );
    let c = parse_catalog(&catalog(vec![entry]), "example.com").unwrap();
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.kind(), EntryKind::A2aCard);
    assert_eq!(e.to_descriptor().tags, ["a2a"]);
    assert_eq!(
        EntryKind::Other,
        Entry {
            media_type: None,
            ..e.clone()
        }
        .kind()
    );
}

#[test]
fn kinds_follow_the_media_type() {
    let e = parse_catalog(&catalog(vec![good("a")]), "example.com")
        .unwrap()
        .entries
        .pop()
        .unwrap()
        .unwrap();
    for (media_type, kind) in [
        ("application/agent-card+json", EntryKind::A2aCard),
        ("application/mcp-server+json", EntryKind::McpServer),
        ("application/ai-catalog+json", EntryKind::Catalog),
        ("application/ai-registry", EntryKind::Registry),
        ("application/ai-registry+json", EntryKind::Registry),
        ("application/parquet", EntryKind::Other),
    ] {
        let e = Entry {
            media_type: Some(media_type.into()),
            ..e.clone()
        };
        assert_eq!(e.kind(), kind, "{media_type}");
    }
}

#[test]
fn inline_data_is_an_entry_without_endpoint() {
    let entry = with(
        without(good("bundle"), "url"),
        "data",
        json!({"specVersion": "1.0", "entries": []}),
    );
    let entry = with(entry, "type", json!("application/ai-catalog+json"));
    let c = parse_catalog(&catalog(vec![entry]), "example.com").unwrap();
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.data.as_ref().unwrap()["specVersion"], "1.0");
    let d = e.to_descriptor();
    assert_eq!(d.endpoint, None);
    assert_eq!(d.tags, ["catalog"]);
}

#[test]
fn identifiers_follow_the_schema_pattern() {
    for ok in [
        "urn:air:acme.com:assistant",
        "urn:air:acme.com:ns.one:sub_ns:agent-2",
        "urn:air:Agents.Example.com:A",
    ] {
        assert!(is_urn_air(ok), "{ok} is valid");
    }
    for bad in [
        "urn:AIR:acme.com:a",
        "urn:air:acme.com",
        "urn:air:acme.com:",
        "urn:air:acme.com:a::b",
        "urn:air::a",
        "urn:air:ac_me.com:a",
        "urn:air:acme.com:a@1",
        "urn:air:acme.com:a b",
        "urn:air:sdxl:checkpoint:civitai:101055@128078",
        "urn:ai:acme.com:a",
    ] {
        assert!(!is_urn_air(bad), "{bad} is invalid");
    }
}

#[test]
fn the_publisher_must_be_the_catalog_domain_or_below_it() {
    for (publisher, ok) in [
        ("example.com", true),
        ("EXAMPLE.com.", true),
        ("agents.example.com", true),
        ("evilexample.com", false),
        ("example.com.evil.net", false),
        ("com", false),
    ] {
        let entry = with(
            good("a"),
            "identifier",
            json!(format!("urn:air:{publisher}:a")),
        );
        let c = parse_catalog(&catalog(vec![entry]), "Example.COM.").unwrap();
        match &c.entries[0] {
            Ok(_) => assert!(ok, "{publisher} is not example.com's"),
            Err(e) => {
                assert!(!ok, "{publisher} is example.com's: {e}");
                assert_eq!(e.reason, Reason::CatalogEntryInvalid);
                assert!(e.message.starts_with("/entries/0/identifier"), "{e}");
                assert!(e.message.contains("publisher"), "{e}");
            }
        }
    }
}

#[test]
fn bad_entries_are_refused_naming_the_member() {
    let long = format!("urn:air:example.com:{}", "a".repeat(MAX_IDENTIFIER_CHARS));
    let cases = [
        (json!("urn:air:example.com:a"), "/entries/0:"),
        (
            without(good("a"), "identifier"),
            "/entries/0/identifier: missing",
        ),
        (
            with(good("a"), "identifier", json!(7)),
            "/entries/0/identifier: not a string",
        ),
        (
            with(good("a"), "identifier", json!("urn:air:example.com")),
            "/entries/0/identifier: not a urn:air",
        ),
        (
            with(good("a"), "identifier", json!(long)),
            "/entries/0/identifier: longer than 256",
        ),
        (
            without(good("a"), "displayName"),
            "/entries/0/displayName: missing",
        ),
        (
            without(good("a"), "url"),
            "/entries/0: neither url nor data",
        ),
        (
            with(good("a"), "data", json!({})),
            "/entries/0: both url and data",
        ),
        (
            with(without(good("a"), "url"), "data", json!([1])),
            "/entries/0/data: not an object",
        ),
        (
            with(good("a"), "url", json!("http://example.com/a")),
            "/entries/0/url: not an https URL",
        ),
        (
            with(good("a"), "url", json!("example.com/a")),
            "/entries/0/url: not an https URL",
        ),
        (
            with(
                good("a"),
                "url",
                json!(format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS))),
            ),
            "/entries/0/url: longer than",
        ),
        (
            with(good("a"), "type", json!(["x"])),
            "/entries/0/type: not a string",
        ),
        (
            with(good("a"), "tags", json!("nlp")),
            "/entries/0/tags: not an array of strings",
        ),
        (
            with(good("a"), "capabilities", json!(["a", 1])),
            "/entries/0/capabilities: not an array of strings",
        ),
        (
            with(
                good("a"),
                "version",
                json!("1".repeat(MAX_VERSION_CHARS + 1)),
            ),
            "/entries/0/version: longer than",
        ),
        (
            with(good("a"), "updatedAt", json!(20260101)),
            "/entries/0/updatedAt: not a string",
        ),
    ];
    for (entry, says) in cases {
        let err = entry_error(entry, "example.com");
        assert_eq!(err.reason, Reason::CatalogEntryInvalid, "{err}");
        assert!(err.message.starts_with(says), "{err} should start {says:?}");
    }
}

#[test]
fn an_identifier_listed_twice_keeps_the_first() {
    let second = with(good("a"), "version", json!("2"));
    let c = parse_catalog(&catalog(vec![good("a"), good("b"), second]), "example.com").unwrap();
    assert!(c.entries[0].is_ok() && c.entries[1].is_ok());
    let err = c.entries[2].as_ref().unwrap_err();
    assert_eq!(err.reason, Reason::CatalogEntryInvalid);
    assert!(err.message.contains("of /entries/0 again"), "{err}");
}

#[test]
fn descriptors_carry_the_entry() {
    let entry = json!({
        "identifier": "urn:air:agents.example.com:travel:planner",
        "displayName": "  ",
        "type": "application/a2a-agent-card+json",
        "url": "https://agents.example.com/planner/card.json",
        "description": "Plans trips.",
        "tags": ["Travel", "travel", "Route Planning"],
        "capabilities": ["BookFlight", "book flight"],
        "version": "1.2.0",
        "updatedAt": "2026-07-01T00:00:00Z"
    });
    let c = parse_catalog(&catalog(vec![entry]), "example.com").unwrap();
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.updated_at.as_deref(), Some("2026-07-01T00:00:00Z"));
    let d = e.to_descriptor();
    assert_eq!(
        d,
        Descriptor {
            id: "urn:air:agents.example.com:travel:planner".into(),
            // A blank display name falls back to the id.
            name: "urn:air:agents.example.com:travel:planner".into(),
            description: "Plans trips.".into(),
            version: Some("1.2.0".into()),
            publisher: Some("agents.example.com".into()),
            endpoint: Some("https://agents.example.com/planner/card.json".into()),
            capabilities: vec!["book_flight".into(), "bookflight".into()],
            tags: vec!["a2a".into(), "route_planning".into(), "travel".into()],
            languages: Vec::new(),
            status: None,
            auth: None,
            format: DocumentFormat::Ard,
        }
    );
}

#[test]
fn tags_are_bounded() {
    let many: Vec<String> = (0..200).map(|i| format!("a{i:03}")).collect();
    let c = parse_catalog(
        &catalog(vec![with(good("a"), "tags", json!(many))]),
        "example.com",
    )
    .unwrap();
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.tags.len(), MAX_TERMS);
    assert_eq!(e.tags.last().map(String::as_str), Some("a063"));
    // The kind's tag sorts after the a0.. tags and is kept.
    for (media_type, tag) in [
        ("application/a2a-agent-card+json", "a2a"),
        ("application/mcp-server-card+json", "mcp"),
    ] {
        let e = Entry {
            media_type: Some(media_type.into()),
            ..e.clone()
        };
        let tags = e.to_descriptor().tags;
        assert_eq!(tags.len(), MAX_TERMS);
        assert_eq!(tags.last().map(String::as_str), Some(tag));
        assert!(tags.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
    }
}

#[test]
fn a_v091_manifest_needs_no_spec_version() {
    // ARD v0.91 §5.1: an `ard.json` is a document with an `entries` array;
    // other top-level members are the transport's.
    let c = parse_catalog(&json!({"entries": [good("a")], "x-note": 1}), "example.com").unwrap();
    assert_eq!(c.entries.len(), 1);
    assert!(c.entries[0].is_ok());
}

#[test]
fn the_published_examples_read() {
    // tests/fixtures/ard: the spec repository's example manifests, each
    // read from its publisher's domain; every entry is valid but the one
    // whose `type` is not a media type.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ard");
    let mut read = 0;
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let first = doc["entries"][0]["identifier"].as_str().unwrap();
        let domain = publisher_of(first);
        let c = parse_catalog(&doc, &domain).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        for (i, entry) in c.entries.iter().enumerate() {
            let id = doc["entries"][i]["identifier"].as_str().unwrap();
            match entry {
                Ok(e) => {
                    assert!(!id.ends_with("malformed-type"), "{id} was read");
                    assert_eq!(e.identifier, id);
                    if let Some(trust) = &e.trust {
                        assert_eq!(
                            trust.identity,
                            doc["entries"][i]["trustManifest"]["identity"]
                        );
                    }
                }
                Err(e) => {
                    assert!(id.ends_with("malformed-type"), "{path:?} {id}: {e}");
                    assert!(e.message.contains("/type"), "{e}");
                }
            }
            read += 1;
        }
    }
    assert!(read >= 18, "{read} entries read");
}

#[test]
fn the_scan_attestation_example_keeps_its_claims() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ard/scan-attestation-ai-catalog.json"
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let c = parse_catalog(&doc, "tools.example.com").unwrap();
    let trust = c.entries[0].as_ref().unwrap().trust.clone().unwrap();
    assert_eq!(trust.identity_domain, "tools.example.com");
    assert_eq!(trust.identity_type.as_deref(), Some("spiffe"));
    let kinds: Vec<&str> = trust.attestations.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["SOC2-Type2", "agent-threat-scan"]);
    assert_eq!(
        trust.attestations[1].digest.as_deref(),
        Some("sha256:cdbd706458d30031292cb80c697357257e2fcb739917dc68d67c7b8925d3bee3")
    );
    assert!(trust.signature.is_none());
    assert!(trust.summary().contains("SOC2-Type2, agent-threat-scan"));
}

#[test]
fn media_types_must_be_well_formed() {
    for ok in [
        "application/vnd.example.tool-manifest+json",
        "text/x-example-notes",
        "application/ai-skill+md; charset=utf-8",
    ] {
        let c = parse_catalog(
            &catalog(vec![with(good("a"), "type", json!(ok))]),
            "example.com",
        )
        .unwrap();
        assert!(c.entries[0].is_ok(), "{ok}");
    }
    for bad in [
        "application/ example",
        "application",
        "/json",
        "application/json/x",
        "ap plication/json",
    ] {
        let err = entry_error(with(good("a"), "type", json!(bad)), "example.com");
        assert!(
            err.message.starts_with("/entries/0/type: not a media type"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn skills_are_their_own_kind() {
    let skill = with(good("s"), "type", json!("application/ai-skill+md"));
    let c = parse_catalog(&catalog(vec![skill]), "example.com").unwrap();
    let e = c.entries[0].as_ref().unwrap();
    assert_eq!(e.kind(), EntryKind::Skill);
    assert!(e.to_descriptor().tags.contains(&"skill".to_owned()));
}

fn with_manifest(manifest: Value) -> Value {
    with(good("a"), "trustManifest", manifest)
}

#[test]
fn the_identity_must_align_with_the_publisher() {
    // §4.5.1: urn:air:example.com:... with an identity of the same
    // domain, a parent or a child of it reads; another domain, or an
    // identity that names none, is namespace squatting and refused.
    for identity in [
        "did:web:example.com",
        "did:web:example.com%3A8443:users:alice",
        "spiffe://prod.example.com/agent/a",
        "https://example.com/agents/a",
        "example.com",
        "DID:WEB:EXAMPLE.COM",
    ] {
        let c = parse_catalog(
            &catalog(vec![with_manifest(json!({"identity": identity}))]),
            "example.com",
        )
        .unwrap();
        let trust = c.entries[0]
            .as_ref()
            .unwrap_or_else(|e| panic!("{identity}: {e}"))
            .trust
            .clone();
        assert!(
            trust.unwrap().identity_domain.ends_with("example.com"),
            "{identity}"
        );
    }
    for (identity, says) in [
        ("did:web:google.com", "does not align"),
        ("spiffe://example.com.evil.test/a", "does not align"),
        ("https://notexample.com/", "does not align"),
        (
            "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
            "names no domain",
        ),
        ("localhost", "names no domain"),
    ] {
        let err = entry_error(with_manifest(json!({"identity": identity})), "example.com");
        assert_eq!(err.reason, Reason::CatalogEntryInvalid);
        assert!(
            err.message.starts_with("/entries/0/trustManifest/identity"),
            "{err}"
        );
        assert!(err.message.contains(says), "{identity}: {err}");
    }
}

#[test]
fn malformed_trust_manifests_are_refused_naming_the_member() {
    let many: Vec<Value> = (0..=trust::MAX_CLAIMS)
        .map(|i| json!({"type": format!("t{i}"), "uri": "https://example.com/a"}))
        .collect();
    let cases = [
        (
            json!("did:web:example.com"),
            "/trustManifest: not an object",
        ),
        (json!({}), "/trustManifest/identity: missing"),
        (
            json!({"identity": 7}),
            "/trustManifest/identity: not a string",
        ),
        (
            json!({"identity": "example.com", "attestations": {}}),
            "/attestations: not an array",
        ),
        (
            json!({"identity": "example.com", "attestations": [{"uri": "https://example.com/a"}]}),
            "/attestations/0/type: missing",
        ),
        (
            json!({"identity": "example.com", "attestations": many}),
            "more than 32 items",
        ),
        (
            json!({"identity": "example.com", "provenance": [{"relation": "stolenFrom", "sourceId": "x"}]}),
            "/provenance/0/relation",
        ),
        (
            json!({"identity": "example.com", "provenance": [{"relation": "copiedFrom"}]}),
            "/provenance/0/sourceId: missing",
        ),
        (
            json!({"identity": "example.com", "signature": "abc"}),
            "/signature: not a detached JWS",
        ),
        (
            json!({"identity": "example.com", "signature": "e30..AAAA"}),
            "/signature: the protected header has no alg",
        ),
        (
            json!({"identity": "x".repeat(trust::MAX_TEXT_CHARS + 1)}),
            "longer than 2048",
        ),
    ];
    for (manifest, says) in cases {
        let err = entry_error(with_manifest(manifest.clone()), "example.com");
        assert_eq!(err.reason, Reason::CatalogEntryInvalid, "{manifest}");
        assert!(err.message.contains(says), "{err} should say {says:?}");
    }
}

#[test]
fn a_signed_manifest_verifies_and_a_changed_one_does_not() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let jwks = crate::formats::a2a::jwks_of(&key.verifying_key(), "k1");
    let manifest = json!({"identity": "did:web:example.com", "attestations": [
        {"type": "SOC2-Type2", "uri": "https://example.com/soc2.pdf", "mediaType": "application/pdf"}]});
    let signed = trust::sign(
        &manifest,
        &key,
        "k1",
        Some("https://example.com/.well-known/jwks.json"),
    );
    let c = parse_catalog(&catalog(vec![with_manifest(signed.clone())]), "example.com").unwrap();
    let read = c.entries[0].as_ref().unwrap().trust.clone().unwrap();
    let jws = read.signature.clone().unwrap();
    assert_eq!(jws.header.kid, "k1");
    trust::verify(&signed, &jws, &jwks).unwrap();
    // Member order does not matter (JCS); a changed claim does.
    let reordered: Value = serde_json::from_str(&signed.to_string()).unwrap();
    trust::verify(&reordered, &jws, &jwks).unwrap();
    let mut changed = signed.clone();
    changed["attestations"][0]["type"] = json!("ISO-27001");
    assert_eq!(
        trust::verify(&changed, &jws, &jwks),
        Err(crate::formats::a2a::SignatureError::Bad)
    );
    let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
    let wrong = crate::formats::a2a::jwks_of(&other.verifying_key(), "k1");
    assert_eq!(
        trust::verify(&signed, &jws, &wrong),
        Err(crate::formats::a2a::SignatureError::Bad)
    );
}

#[test]
fn the_key_is_looked_for_on_the_publisher_only() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let read = |manifest: Value| {
        let c = parse_catalog(&catalog(vec![with_manifest(manifest)]), "example.com").unwrap();
        c.entries[0].as_ref().unwrap().trust.clone().unwrap()
    };
    let base = json!({"identity": "did:web:example.com"});
    let jku = |url: &str| read(trust::sign(&base, &key, "k1", Some(url)));
    assert_eq!(
        trust::key_source(&jku("https://keys.example.com/jwks.json"), "example.com"),
        Ok(trust::KeySource::Jwks(
            url::Url::parse("https://keys.example.com/jwks.json").unwrap()
        ))
    );
    for elsewhere in [
        "https://evil.test/jwks.json",
        "http://example.com/jwks.json",
        "https://com/jwks.json",
    ] {
        let err = trust::key_source(&jku(elsewhere), "example.com").unwrap_err();
        assert!(
            err.contains("not on the publisher's domain"),
            "{elsewhere}: {err}"
        );
    }
    // No jku: a did:web identity's DID document, at the root or a path.
    assert_eq!(
        trust::key_source(&read(trust::sign(&base, &key, "k1", None)), "example.com"),
        Ok(trust::KeySource::DidWeb(
            url::Url::parse("https://example.com/.well-known/did.json").unwrap()
        ))
    );
    let pathed = json!({"identity": "did:web:example.com:agents:a"});
    assert_eq!(
        trust::key_source(&read(trust::sign(&pathed, &key, "k1", None)), "example.com"),
        Ok(trust::KeySource::DidWeb(
            url::Url::parse("https://example.com/agents/a/did.json").unwrap()
        ))
    );
    let spiffe = json!({"identity": "spiffe://example.com/a"});
    assert!(
        trust::key_source(&read(trust::sign(&spiffe, &key, "k1", None)), "example.com").is_err()
    );
    assert!(trust::key_source(&read(base), "example.com").is_err());
}

#[test]
fn did_documents_give_their_keys_by_id_and_fragment() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let jwk = crate::formats::a2a::jwks_of(&key.verifying_key(), "ignored")["keys"][0].clone();
    let doc = json!({"id": "did:web:example.com", "verificationMethod": [
        {"id": "did:web:example.com#k1", "type": "JsonWebKey2020", "publicKeyJwk": jwk},
        {"id": "did:web:example.com#multibase", "type": "Multikey", "publicKeyMultibase": "z6Mk"}]});
    let keys = trust::did_document_keys(&doc);
    let kids: Vec<&str> = keys["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, ["did:web:example.com#k1", "k1"]);
    let manifest = json!({"identity": "did:web:example.com"});
    let signed = trust::sign(&manifest, &key, "k1", None);
    let c = parse_catalog(&catalog(vec![with_manifest(signed.clone())]), "example.com").unwrap();
    let jws = c.entries[0]
        .as_ref()
        .unwrap()
        .trust
        .clone()
        .unwrap()
        .signature
        .unwrap();
    trust::verify(&signed, &jws, &keys).unwrap();
}

#[test]
fn robots_txt_names_manifests_on_agentmap_lines() {
    let robots = "User-agent: *\nDisallow: /private\nAgentmap: https://example.com/entries.json # ours\n\
                  agentmap:https://cdn.example.net/more.json\nAGENTMAP: https://example.com/entries.json\n\
                  Sitemap: https://example.com/sitemap.xml\n# Agentmap: https://example.com/commented.json\n\
                  Agentmap:\n";
    assert_eq!(
        sources::agentmaps(robots),
        [
            "https://example.com/entries.json",
            "https://cdn.example.net/more.json"
        ]
    );
    let many: String = (0..10)
        .map(|i| format!("Agentmap: https://example.com/{i}.json\n"))
        .collect();
    assert_eq!(sources::agentmaps(&many).len(), sources::MAX_SOURCES);
}

#[test]
fn link_headers_name_manifests_with_rel_ard() {
    let header = r#"<https://example.com/ard.json>; rel="ard", </style.css>; rel=stylesheet, </old.json>; rel=ai-catalog; type="application/json", <https://x.test/>; rel="alternate""#;
    assert_eq!(
        sources::link_header(header),
        ["https://example.com/ard.json", "/old.json"]
    );
}

#[test]
fn pages_name_manifests_and_embed_entries() {
    let entry = good("inline");
    let html = format!(
        r#"<!doctype html><html><HEAD>
<!-- <link rel="ard" href="/commented.json"> -->
<meta name="x" content='a > b'>
<link href="/ard.json" REL="ard">
<link rel='alternate ai-catalog' href='https://cdn.example.net/c.json?a=1&amp;b=2'/>
<link rel="stylesheet" href="/s.css">
<script>var a = "<link rel='ard' href='/in-script.json'>";</script>
<script type="application/ld+json">{}</script>
<script type="application/ld+json">{{"@graph": [{{"identifier": "urn:air:example.com:g"}}]}}</script>
<script type="application/ld+json">not json</script>
</head><body><p>hello</p></body></html>"#,
        entry
    );
    let page = sources::page(&html);
    assert_eq!(
        page.links,
        ["/ard.json", "https://cdn.example.net/c.json?a=1&b=2"]
    );
    let ids: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e["identifier"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["urn:air:example.com:inline", "urn:air:example.com:g"]);
    // Unterminated tags and scripts end the reading, nothing more.
    assert_eq!(
        sources::page("<link rel=ard href=/a.json").links,
        Vec::<String>::new()
    );
    assert!(sources::page("<script type=application/ld+json>{")
        .entries
        .is_empty());
}
