//! Writes the seed corpora, `fuzz/seeds/<target>/`, from the repository's
//! golden vectors and examples (`proto/`) and the testbed's publishers (the
//! ADP population, healthy and misbehaving; the formats organisation), so
//! the seeds are reproducible: `fuzz/seed.sh` runs it. Each seed is named
//! after what it came from; a target's selector byte, when it has one,
//! comes first.
//!
//! Not a fuzz target: it is built as one (`cargo fuzz build`) only to reuse
//! the targets' instrumented build of the node, and does its work in the
//! harness's `init`, then exits before any input is run. The directory is
//! `$SEEDS_DIR`, else `fuzz/seeds`.
#![no_main]

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use agentmesh::adp::handshake;
use agentmesh::formats::a2a;
use agentmesh::mesh::wire::{known_digest, SearchRequest, SearchResponse};
use agentmesh::record::{RecordType, SignedRecord};
use agentmesh::testbed::formats::formats_org;
use agentmesh::testbed::{Population, PopulationConfig, Ports};
use agentmesh_fuzz::{challenge_nonce, node_key, stranger_key, CHALLENGED, VERIFIER};
use hickory_proto::rr::RData;
use hickory_proto::serialize::binary::BinEncodable;
use serde_json::{json, Value};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

struct Seeds {
    root: PathBuf,
}

impl Seeds {
    /// Writes `bytes` as `target/name`, with `selector` first when given.
    fn put(&self, target: &str, name: &str, selector: Option<u8>, bytes: &[u8]) -> Result<()> {
        let dir = self.root.join(target);
        fs::create_dir_all(&dir)?;
        let mut out = Vec::with_capacity(bytes.len() + 1);
        out.extend(selector);
        out.extend_from_slice(bytes);
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        fs::write(dir.join(name), out)?;
        Ok(())
    }
}

fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    out.sort();
    Ok(out)
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn cbor<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("CBOR into a Vec");
    out
}

libfuzzer_sys::fuzz_target!(init: write_then_exit(), |_data: &[u8]| {});

/// Writes the seeds, then ends the process: no input is ever run.
fn write_then_exit() {
    let code = match write() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("seeds: {e}");
            1
        }
    };
    std::process::exit(code);
}

fn write() -> Result<()> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = std::env::var_os("SEEDS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds"));
    if root.exists() {
        fs::remove_dir_all(&root)?;
    }
    let s = Seeds { root };

    // record_judge and mesh_wire: the golden record vectors.
    let vectors: Vec<Value> = serde_json::from_str(&fs::read_to_string(
        repo.join("proto/vectors/records.json"),
    )?)?;
    let mut good = Vec::new();
    for v in &vectors {
        let name = v["name"].as_str().unwrap_or("vector");
        let bytes = hex::decode(v["hex"].as_str().unwrap_or_default())?;
        s.put("record_judge", name, Some(0), &bytes)?;
        // The payloads of the small ones again, re-signed (the seeds stay
        // small: the 16 KiB vectors only as they are).
        if let Some(record) = SignedRecord::decode(&bytes)
            .ok()
            .filter(|_| bytes.len() < 4096)
        {
            // The payload, re-signed (by a stranger, then a trusted peer)
            // with its times moved to now by the target.
            let kind = match record.kind() {
                RecordType::Descriptor => 0,
                _ => 2,
            };
            s.put(
                "record_judge",
                &format!("{name}.stranger"),
                Some(1 | kind | 8),
                record.payload(),
            )?;
            s.put(
                "record_judge",
                &format!("{name}.trusted"),
                Some(1 | kind | 4 | 8),
                record.payload(),
            )?;
            good.push(bytes);
        }
    }
    let request =
        |capabilities: &[&str], query: Option<&str>, known: Vec<(u64, u64)>| SearchRequest {
            capabilities: capabilities.iter().map(|c| (*c).to_owned()).collect(),
            tags: vec!["nlp".into()],
            languages: vec!["en".into(), "zh".into()],
            query: query.map(str::to_owned),
            limit: 10,
            known,
        };
    s.put(
        "mesh_wire",
        "request-capability",
        Some(0),
        &cbor(&request(&["translation"], None, vec![])),
    )?;
    s.put(
        "mesh_wire",
        "request-query-known",
        Some(0),
        &cbor(&request(
            &[],
            Some("translate chinese"),
            vec![(known_digest("agent-12345"), 7)],
        )),
    )?;
    s.put(
        "mesh_wire",
        "request-empty",
        Some(0),
        &cbor(&SearchRequest::default()),
    )?;
    let response = SearchResponse {
        records: good
            .iter()
            .cloned()
            .map(serde_bytes::ByteBuf::from)
            .collect(),
        truncated: true,
    };
    s.put("mesh_wire", "response-vectors", Some(1), &cbor(&response))?;
    s.put(
        "mesh_wire",
        "response-empty",
        Some(1),
        &cbor(&SearchResponse::default()),
    )?;

    // agent_json: the ADP examples, valid and invalid, and the testbed
    // population's documents (healthy and every misbehaviour).
    for dir in ["proto/examples/adp/valid", "proto/examples/adp/invalid"] {
        for f in files(&repo.join(dir))? {
            s.put("agent_json", &stem(&f), None, &fs::read(&f)?)?;
        }
    }
    let rotations: Vec<Value> = serde_json::from_str(&fs::read_to_string(
        repo.join("proto/vectors/key-rotation.json"),
    )?)?;
    let base: Value = serde_json::from_str(&fs::read_to_string(
        repo.join("proto/examples/adp/valid/minimal-required-only.json"),
    )?)?;
    for v in &rotations {
        let mut doc = base.clone();
        doc["identity"] = v["identity"].clone();
        let name = format!("rotation-{}", v["name"].as_str().unwrap_or("vector"));
        s.put(
            "agent_json",
            &name,
            None,
            serde_json::to_string_pretty(&doc)?.as_bytes(),
        )?;
    }
    let population =
        Population::generate(&PopulationConfig::healthy(7, 2).with_every_misbehaviour());
    let ports = Ports {
        https: 443,
        http: 80,
    };
    for agent in population.agents() {
        let doc = population.document(agent, ports);
        let name = format!("testbed-{}", agent.behaviour.name());
        s.put(
            "agent_json",
            &name,
            None,
            serde_json::to_string(&doc)?.as_bytes(),
        )?;
        // adp_txt: the TXT answer at `_agent.{domain}`, strings joined.
        let records: Vec<String> = population
            .txt_records(agent, ports)
            .into_iter()
            .map(|strings| strings.concat())
            .collect();
        s.put("adp_txt", &name, None, records.join("\n").as_bytes())?;
    }
    s.put(
        "adp_txt",
        "two-records",
        None,
        b"v=ADP1; pk=ed25519:00; wk=https://a.example/.well-known/agent.json\nv=spf1 -all",
    )?;

    // The formats organisation: A2A cards (signed, legacy, forged, broken),
    // ARD catalogs, AID and DNS-AID records.
    let org = formats_org(ports, Ipv4Addr::new(192, 0, 2, 1), Some("alpha.test"));
    for ((host, path), served) in &org.documents {
        let name = format!("{host}{path}");
        if path.contains("ai-catalog") {
            s.put("ard", &name, None, &served.body)?;
        } else if path.contains("jwks") {
            continue;
        } else {
            s.put("a2a_card_jws", &name, None, &served.body)?;
        }
    }
    for (owner, rdata) in &org.records {
        match rdata {
            RData::TXT(txt) => {
                let bytes: Vec<u8> = txt
                    .txt_data
                    .iter()
                    .flat_map(|s| s.iter().copied())
                    .collect();
                let selector = if owner.starts_with("_index.") { 64 } else { 0 };
                s.put(
                    "aid_dnsaid",
                    &format!("txt-{owner}"),
                    Some(selector),
                    &bytes,
                )?;
                if selector == 0 {
                    s.put("adp_txt", &format!("txt-{owner}"), None, &bytes)?;
                }
            }
            RData::SVCB(svcb) => {
                s.put(
                    "aid_dnsaid",
                    &format!("svcb-{owner}"),
                    Some(128),
                    &svcb.to_bytes()?,
                )?;
            }
            _ => {}
        }
    }
    // The formats' unit tests' fixtures (src/formats/*.rs): AID records
    // v1 and v2, the TXT index, A2A cards of each shape, ARD catalogs.
    let aid_records = [
        "v=aid1;uri=https://api.example.com/mcp;p=mcp",
        "v=aid1;uri=docker://myimage;proto=local;desc=Local Docker Agent",
        "v=aid1;uri=https://api.example.com/mcp;p=mcp;d=https://docs.example.com/agent;e=2099-01-01T00:00:00Z",
        "v=aid2;u=https://api.example.com/mcp;p=mcp;a=oauth2_code",
        "v=aid2;u=https://[2001:db8::1]:8443/mcp;p=mcp;k=ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ",
        "v=aid1;u=https://api.example.com/mcp;p=mcp;k=z9C6hybhQ6Aycep9jaUnP6uL9ZYvDjUp1aSkFWPUFJtpj;i=g1",
        "v=aid2;u=https://a.test/mcp;p=a2a;a=pat;s=Hi;d=https://a.test/d;e=2030-01-01T00:00:00Z\nv=spf1 -all",
    ];
    for (i, r) in aid_records.iter().enumerate() {
        s.put(
            "aid_dnsaid",
            &format!("aid-test-{i}"),
            Some(0),
            r.as_bytes(),
        )?;
    }
    s.put(
        "aid_dnsaid",
        "index-txt",
        Some(64),
        b"v=spf1 -all\nagents=chat:mcp, Billing:A2A ,broken,a_b:mcp,x:1mcp,chat:mcp\n AGENTS = help:x-custom",
    )?;
    let v1 = json!({"name": "Echo Agent", "description": "Echoes text back.", "version": "1.0.0",
        "supportedInterfaces": [{"url": "https://echo.example.com/a2a",
            "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Returns the input text.",
            "tags": ["echo"]}]});
    let v0 = json!({"name": "Weather", "description": "Forecasts.", "version": "0.4.1",
        "url": "https://weather.example.com/a2a", "protocolVersion": "0.2.5",
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": "https://weather.example.com/a2a", "transport": "JSONRPC"},
            {"url": "https://weather.example.com/rest", "transport": "HTTP+JSON"}],
        "provider": {"organization": "Example Weather", "url": "https://example.com"},
        "capabilities": {"streaming": true, "stateTransitionHistory": false},
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
        "security": [{"key": []}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
        "skills": [{"id": "Forecast", "name": "Forecast", "description": "Daily forecast.",
            "tags": ["Weather", "forecast"], "examples": ["Rain in Oslo tomorrow?"]}]});
    let hybrid = json!({"name": "Complex Agent", "description": "Agent with many interfaces",
        "version": "1.2.3",
        "supportedInterfaces": [
            {"url": "http://jsonrpc.v10.com", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://grpc.v03.com", "protocolBinding": "GRPC", "protocolVersion": "0.3.0"}],
        "url": "http://jsonrpc.v03.com", "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": "http://grpc.v03.com", "transport": "GRPC"}],
        "capabilities": {"extensions": [{"uri": "https://example.com/ext", "required": false}]},
        "securitySchemes": {"bearer": {
            "httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Bearer"}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "security": [{"bearer": []}],
        "defaultInputModes": [], "defaultOutputModes": [], "skills": []});
    for (name, card) in [("test-v1", &v1), ("test-v0", &v0), ("test-hybrid", &hybrid)] {
        s.put("a2a_card_jws", name, None, card.to_string().as_bytes())?;
    }
    // A card signed by another key, its key set after 0xFF.
    let other = stranger_key();
    let mut signed = a2a::sign_card(
        &v1,
        &other,
        "k2",
        Some("https://echo.example.com/jwks.json"),
    )
    .to_string()
    .into_bytes();
    signed.push(0xFF);
    signed.extend(
        a2a::jwks_of(&other.verifying_key(), "k2")
            .to_string()
            .into_bytes(),
    );
    s.put("a2a_card_jws", "test-v1-signed-with-jwks", None, &signed)?;
    let catalogs = [
        json!({"specVersion": "1.0", "host": {"displayName": "Alice's AI Tools"},
            "entries": [{"identifier": "urn:air:github.com:alice-dev:pptx-creator",
                "displayName": "pptx-creator", "type": "application/ai-skill",
                "url": "https://github.com/alice-dev/pptx-creator",
                "description": "Create professional PowerPoint presentations."}]}),
        json!({"specVersion": "1.0",
            "host": {"displayName": "Formats", "identifier": "did:web:catalog.formats.test"},
            "entries": [
                {"identifier": "urn:air:catalog.formats.test:api:drug-ndc",
                    "displayName": "Drug NDC Directory API",
                    "type": "application/mcp-server-card+json",
                    "url": "https://catalog.formats.test/ndc.json",
                    "description": "Drug codes.",
                    "representativeQueries": ["find drug information by NDC code"]},
                {"identifier": "urn:air:catalog.formats.test:echo",
                    "displayName": "echo", "type": "application/a2a-agent-card+json",
                    "url": "https://catalog.formats.test/echo/agent-card.json"}]}),
    ];
    for (i, c) in catalogs.iter().enumerate() {
        s.put("ard", &format!("test-{i}"), None, c.to_string().as_bytes())?;
    }

    // aidip_bodies: the AIDIP examples as registrations; the README's
    // search and resolve bodies.
    for dir in ["proto/examples/aidip/valid", "proto/examples/aidip/invalid"] {
        for f in files(&repo.join(dir))? {
            s.put(
                "aidip_bodies",
                &format!("register-{}", stem(&f)),
                Some(0),
                &fs::read(&f)?,
            )?;
        }
    }
    let searches = [
        json!({"filters": {"capabilities": ["translation"], "supported_languages": ["en", "zh"], "tags": ["nlp"]}, "top": 10}),
        json!({"query": "translate chinese text", "top": 5}),
        json!({"filters": {"supported_language": "de", "min_trust": "dns-verified"}, "scope": "local", "cursor": "YWdlbnQtMQ", "include_stale": true}),
    ];
    for (i, body) in searches.iter().enumerate() {
        s.put(
            "aidip_bodies",
            &format!("search-{i}"),
            Some(96),
            body.to_string().as_bytes(),
        )?;
    }
    let resolves = [
        json!({"intent": "translate a Chinese contract into English", "policy": {"min_trust": "unverified", "languages": ["zh"], "status": ["active"]}, "top": 3}),
        json!({"intent": "weather forecast for Paris", "context": {"language": "fr"}, "policy": {"share_intent": true}, "scope": "local"}),
    ];
    for (i, body) in resolves.iter().enumerate() {
        s.put(
            "aidip_bodies",
            &format!("resolve-{i}"),
            Some(176),
            body.to_string().as_bytes(),
        )?;
    }

    // challenge: the agent's answers, echoing the nonce and with a nonce of
    // its own (the mutual handshake), and one signed by another key.
    let nonce = challenge_nonce();
    let frame = handshake::challenge(VERIFIER, &node_key().verifying_key(), &nonce);
    let echo = handshake::answer(&frame, CHALLENGED, &stranger_key());
    let own_nonce = "ab".repeat(32);
    let mutual = handshake::answer_with_nonce(&frame, CHALLENGED, &stranger_key(), &own_nonce);
    let other = handshake::answer(&frame, CHALLENGED, &node_key());
    for (name, f) in [
        ("echo", &echo),
        ("mutual", &mutual),
        ("other-key", &other),
        ("challenge", &frame),
    ] {
        s.put(
            "challenge",
            name,
            None,
            serde_json::to_string(f)?.as_bytes(),
        )?;
    }

    // answers: signed answers and a checkpoint written from
    // docs/answers.md by tests/answers/make_vectors.py, and tile paths.
    for file in files(&repo.join("tests/answers/vectors"))? {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let selector = if name.ends_with(".txt") { 2 } else { 0 };
        s.put("answers", &name, Some(selector), &fs::read(&file)?)?;
    }
    for path in ["0/x001/234.p/7", "entries/000", "1/000.p/1"] {
        s.put("answers", &format!("tile-{path}"), Some(1), path.as_bytes())?;
    }
    dnssec_chain(&s)
}

/// answers, shape 4: the DNSSEC chain of `_agent.fuzz.test.`'s TXT RRset
/// in the testbed's `test.` zone signed in process (the RRset, its RRSIG,
/// the zone's DNSKEY RRset and its RRSIG), whole and cut short.
fn dnssec_chain(s: &Seeds) -> Result<()> {
    use agentmesh::testbed::dns::Zone;
    use agentmesh::testbed::dnssec::ZoneKey;
    use hickory_proto::rr::{LowerName, Name, RecordType};
    let owner = "_agent.fuzz.test";
    let mut zone = Zone::new();
    zone.add_txt(
        owner,
        vec!["v=ADP1; pk=ed25519:00; wk=https://fuzz.test/.well-known/agent.json".into()],
    )?;
    let key = ZoneKey::generate()?;
    key.sign(&mut zone)?;
    let mut records = Vec::new();
    for (name, rtype) in [
        (format!("{owner}."), RecordType::TXT),
        ("test.".into(), RecordType::DNSKEY),
    ] {
        let name = LowerName::from(Name::from_ascii(&name)?);
        if let agentmesh::testbed::dns::Answer::Records(found) = zone.lookup(&name, rtype) {
            records.extend(found.iter().cloned());
        }
        records.extend(zone.signatures(&name, rtype).iter().cloned());
    }
    let bytes = agentmesh::dnssec::chain::encode(&records)?;
    s.put("answers", "dnssec-chain", Some(4), &bytes)?;
    s.put(
        "answers",
        "dnssec-chain-cut",
        Some(4),
        &bytes[..bytes.len() / 2],
    )?;
    Ok(())
}
