//! `agentmesh revoke`: an agent revokes itself. The tombstone is signed
//! with the agent's own key (the one its DNS fingerprint names), so every
//! node that holds the agent accepts it and refuses any record of a lower
//! seq; it is sent to a node's `POST /records`, which stores it and
//! publishes it to the mesh, or printed (base64) for another channel.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use base64::Engine as _;
use clap::Args;

use crate::identity;
use crate::record::{self, SignedRecord, TombstoneReason, TombstoneRecord};

/// Flags of `revoke`.
#[derive(Debug, Clone, Args)]
pub struct RevokeArgs {
    /// The agent's domain (or `agent:{domain}`).
    pub domain: String,
    /// The agent's key file (what `agentmesh keygen` wrote).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// A node to send it to (its API); without it the record is printed.
    #[arg(long, value_name = "URL")]
    pub node: Option<String>,
    /// Print one JSON object: `{"agent_id","seq","record"}` (the record
    /// in base64) when printed, `{"agent_id","seq","node"}` (the node's
    /// answer) when sent.
    #[arg(long)]
    pub json: bool,
}

/// Runs `revoke`: exit 0 when the node stored it (or it was printed), 1
/// when the node refused it, 2 for a bad domain or an unreachable node.
///
/// # Errors
/// When the key file cannot be read.
pub(super) async fn run(args: RevokeArgs) -> anyhow::Result<ExitCode> {
    let domain = match identity::normalise_domain(args.domain.trim_start_matches("agent:")) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let key = identity::read_key_file(&args.key)
        .with_context(|| format!("reading the agent key {}", args.key.display()))?;
    let body = TombstoneRecord {
        agent_id: identity::AgentId::of_domain(&domain).into(),
        seq: record::next_seq(None),
        issued_at: record::unix_now(),
        reason: TombstoneReason::Revoked,
    };
    let bytes = SignedRecord::sign_tombstone(&body, &key)
        .context("signing the tombstone")?
        .encode();
    let Some(node) = args.node else {
        let record = base64::engine::general_purpose::STANDARD.encode(&bytes);
        if args.json {
            let out =
                serde_json::json!({"agent_id": body.agent_id, "seq": body.seq, "record": record});
            println!("{out}");
        } else {
            println!("{record}");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let url = format!("{}/records", node.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/cbor")
        .body(bytes)
        .send()
        .await;
    let response = match response {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot reach {url}: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status.is_success() && args.json {
        let answer: serde_json::Value =
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        let out = serde_json::json!({"agent_id": body.agent_id, "seq": body.seq, "node": answer});
        println!("{out}");
        Ok(ExitCode::SUCCESS)
    } else if status.is_success() {
        println!("{}: revoked (seq {}); {text}", body.agent_id, body.seq);
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("error: the node answered {status}: {text}");
        Ok(ExitCode::from(1))
    }
}
