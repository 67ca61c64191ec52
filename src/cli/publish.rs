//! `agentmesh publish`: what an agent operator adds to DNS and serves, so
//! the agent can be found and key-verified. It prints the zone lines (TXT
//! and optional SRV) and writes a schema-valid `agent.json` bound to the
//! operator's key.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use serde_json::{json, Value};

use crate::adp::{self, txt};
use crate::identity;

/// Flags of `publish`.
#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    /// The agent's domain.
    #[arg(long)]
    pub domain: String,
    /// The agent's key file (make one with `agentmesh keygen`).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Display name.
    #[arg(long)]
    pub name: Option<String>,
    /// Operator's display name.
    #[arg(long)]
    pub owner: Option<String>,
    /// A capability id (repeatable).
    #[arg(long = "capability", value_name = "ID", required = true)]
    pub capabilities: Vec<String>,
    /// A language the agent handles, BCP 47 (repeatable).
    #[arg(long = "language", value_name = "TAG")]
    pub languages: Vec<String>,
    /// HTTPS port the agent host listens on (also published as SRV).
    #[arg(long)]
    pub port: Option<u16>,
    /// Where to write agent.json.
    #[arg(long, default_value = "agent.json", value_name = "FILE")]
    pub out: PathBuf,
    /// TTL of the printed records, seconds.
    #[arg(long, default_value_t = 3600)]
    pub ttl: u32,
    /// Print one JSON object (the records as name, type, ttl and data,
    /// the document written and where to serve it) instead of the zone
    /// lines.
    #[arg(long)]
    pub json: bool,
}

/// TXT character-strings are at most 255 bytes each.
fn txt_strings(text: &str) -> String {
    text.as_bytes()
        .chunks(255)
        .map(|c| format!("\"{}\"", String::from_utf8_lossy(c).replace('"', "\\\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The agent.json document for these flags and key.
///
/// # Errors
/// When the domain is not a domain name.
pub(super) fn document(
    args: &PublishArgs,
    key: &ed25519_dalek::VerifyingKey,
) -> anyhow::Result<Value> {
    let domain = crate::identity::normalise_domain(&args.domain)?;
    let authority = match args.port {
        Some(p) if p != 443 => format!("{domain}:{p}"),
        _ => domain.clone(),
    };
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let capabilities: Vec<Value> = args
        .capabilities
        .iter()
        .map(|c| {
            let mut cap = json!({
                "id": c,
                "name": c.replace(['_', '-'], " "),
                "input": ["text/plain"],
                "output": ["text/plain"],
                "interfaces": ["chat"],
                "pricing": {"model": "free"}
            });
            if !args.languages.is_empty() {
                cap["languages"] = json!(args.languages);
            }
            cap
        })
        .collect();
    Ok(json!({
        "protocol": "ADP/1.0",
        "identity": {
            "id": identity::AgentId::of_domain(&domain).as_str(),
            "domain": domain,
            "name": args.name.clone().unwrap_or_else(|| format!("Agent at {domain}")),
            "owner": args.owner.clone().unwrap_or_else(|| domain.clone()),
            "created": now,
            "publicKey": {
                "algorithm": "ed25519",
                "fingerprint": identity::fingerprint(key),
                "full": identity::encode_public_key(key)
            }
        },
        "endpoints": {
            "discovery": format!("https://{authority}/"),
            "wellKnown": format!("https://{authority}{}", adp::WELL_KNOWN_PATH),
            "chat": format!("wss://{authority}{}", adp::CHAT_PATH)
        },
        "capabilities": capabilities,
        "security": {"tlsRequired": true, "minProtocolVersion": "ADP/1.0", "authMethods": ["pubkey"]},
        "availability": {"status": "online"},
        "meta": {"updated": now, "version": "1", "generator": concat!("agentmesh ", env!("CARGO_PKG_VERSION"))}
    }))
}

/// Runs `publish`.
///
/// # Errors
/// For an unreadable key, a bad domain, an invalid document or an
/// unwritable output file.
pub(super) fn run(args: &PublishArgs) -> anyhow::Result<()> {
    let key = identity::read_key_file(&args.key)?.verifying_key();
    let doc = document(args, &key)?;
    let schema: Value =
        serde_json::from_str(crate::adp::SCHEMA).expect("the built-in ADP schema is valid JSON");
    let validator =
        jsonschema::validator_for(&schema).expect("the built-in ADP schema is a valid JSON Schema");
    let problems: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect();
    if !problems.is_empty() {
        anyhow::bail!(
            "the document would not be valid ADP: {}",
            problems.join("; ")
        );
    }
    let text = serde_json::to_string_pretty(&doc).expect("a JSON value always serialises");
    std::fs::write(&args.out, format!("{text}\n"))
        .with_context(|| format!("writing {}", args.out.display()))?;
    let domain = doc["identity"]["domain"].as_str().unwrap_or_default();
    let well_known = doc["endpoints"]["wellKnown"].as_str().unwrap_or_default();
    let txt_value = txt::render(&identity::fingerprint(&key), well_known);
    if args.json {
        let mut records = vec![json!({
            "name": format!("_agent.{domain}."), "type": "TXT", "ttl": args.ttl, "data": txt_value,
        })];
        if let Some(port) = args.port {
            records.push(json!({
                "name": format!("_agent._tcp.{domain}."), "type": "SRV", "ttl": args.ttl,
                "data": format!("0 0 {port} {domain}."),
            }));
        }
        let out = json!({
            "domain": domain,
            "records": records,
            "document": args.out,
            "serve_at": well_known,
        });
        println!("{out}");
        return Ok(());
    }
    println!("; Add to the zone of {domain}:");
    println!(
        "_agent.{domain}. {} IN TXT {}",
        args.ttl,
        txt_strings(&txt_value)
    );
    if let Some(port) = args.port {
        println!(
            "_agent._tcp.{domain}. {} IN SRV 0 0 {port} {domain}.",
            args.ttl
        );
    }
    println!("; Serve {} at {well_known}", args.out.display());
    println!(
        "; (for example: agentmesh agent-host --document {} --key {} ...)",
        args.out.display(),
        args.key.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_txt_values_are_split_into_255_byte_strings() {
        let s = txt_strings(&"a".repeat(300));
        assert_eq!(s, format!("\"{}\" \"{}\"", "a".repeat(255), "a".repeat(45)));
        assert_eq!(txt_strings("v=ADP1"), "\"v=ADP1\"");
    }

    #[test]
    fn the_document_is_valid_adp_bound_to_the_key() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        let args = PublishArgs {
            domain: "Example.ORG".into(),
            key: PathBuf::new(),
            name: None,
            owner: None,
            capabilities: vec!["translation".into()],
            languages: vec!["en".into()],
            port: Some(8443),
            out: PathBuf::new(),
            ttl: 300,
            json: false,
        };
        let doc = document(&args, &key).unwrap();
        let schema: Value = serde_json::from_str(crate::adp::SCHEMA).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(doc["identity"]["id"], "agent:example.org");
        assert_eq!(
            doc["endpoints"]["chat"],
            "wss://example.org:8443/agent/chat"
        );
        assert_eq!(
            doc["identity"]["publicKey"]["fingerprint"],
            identity::fingerprint(&key)
        );
    }
}
