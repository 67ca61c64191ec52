//! `agentmesh verify-answer`: checks a signed answer (docs/answers.md)
//! offline, with nothing but the file and, optionally, the node keys the
//! client trusts, an older checkpoint of the node, and the request sent.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::answer::{self, CheckOptions, RequestInfo, MAX_ANSWER_BYTES};

/// Flags of `verify-answer`.
#[derive(Debug, Clone, Args)]
pub struct VerifyAnswerArgs {
    /// The signed answer (`-`: stdin).
    pub file: String,
    /// A node key the answer must be signed by: a peer id or the key in
    /// base64url (repeatable; without any, any node's signature counts).
    #[arg(long = "trust", value_name = "KEY")]
    pub trust: Vec<String>,
    /// A checkpoint of the same node seen before (`GET /log/checkpoint`):
    /// the answer's must not be older.
    #[arg(long, value_name = "FILE")]
    pub old_checkpoint: Option<PathBuf>,
    /// The request sent, `METHOD TARGET` (e.g. `POST /agents/search`): the
    /// answer must be for it (with --request-body for its body).
    #[arg(long, value_name = "'METHOD TARGET'")]
    pub request: Option<String>,
    /// The request body sent (with --request).
    #[arg(long, value_name = "FILE", requires = "request")]
    pub request_body: Option<PathBuf>,
    /// A DNSSEC trust anchor file (DS or DNSKEY records in zone-file
    /// syntax, or IANA's `root-anchors.xml`; repeatable), beside the
    /// root's built-in anchor: the records' DNSSEC chains are checked from
    /// these.
    #[arg(long = "dnssec-anchor", value_name = "FILE")]
    pub dnssec_anchor: Vec<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `verify-answer`: exit 0 when every check holds, 1 naming each
/// failure, 2 on a usage error or an unreadable file.
pub(super) fn run(args: &VerifyAnswerArgs) -> ExitCode {
    match options(args).and_then(|o| Ok((read(&args.file)?, o))) {
        Ok((bytes, options)) => {
            let report = answer::check(&bytes, &options);
            print(&report, args.json);
            if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn options(args: &VerifyAnswerArgs) -> Result<CheckOptions, String> {
    let mut trusted_nodes = Vec::new();
    for key in &args.trust {
        let parsed = crate::identity::key_of_peer_id(key)
            .or_else(|| crate::identity::decode_public_key(key).ok())
            .ok_or_else(|| format!("--trust {key}: not a peer id or a base64url Ed25519 key"))?;
        trusted_nodes.push(parsed);
    }
    let old_checkpoint = match &args.old_checkpoint {
        Some(path) => Some(
            std::fs::read(path).map_err(|e| format!("--old-checkpoint {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let request = match &args.request {
        Some(line) => {
            let (method, target) = line
                .split_once(' ')
                .ok_or("--request is 'METHOD TARGET', e.g. 'POST /agents/search'")?;
            let body = match &args.request_body {
                Some(p) => {
                    std::fs::read(p).map_err(|e| format!("--request-body {}: {e}", p.display()))?
                }
                None => Vec::new(),
            };
            let (target, _) = answer::without_proof(target);
            Some(RequestInfo::new(method, &target, &body))
        }
        None => None,
    };
    let dnssec_anchors = crate::dnssec::TrustAnchorSet::load(&args.dnssec_anchor)
        .map_err(|e| format!("--dnssec-anchor: {e}"))?;
    Ok(CheckOptions {
        trusted_nodes,
        old_checkpoint,
        request,
        dnssec_anchors: Some(dnssec_anchors),
    })
}

/// The answer's bytes, at most [`MAX_ANSWER_BYTES`] (one more is read,
/// so that the check names the size).
fn read(file: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let limit = MAX_ANSWER_BYTES as u64 + 1;
    let read = if file == "-" {
        std::io::stdin().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|e| format!("{file}: {e}"))?;
    Ok(bytes)
}

fn print(report: &answer::Report, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string(report).expect("a report serialises")
        );
        return;
    }
    for r in &report.results {
        println!("{}  {}", r.level, r.id);
    }
    for f in &report.failures {
        match f.result {
            Some(i) => println!("FAIL {} (result {i}): {}", f.code, f.message),
            None => println!("FAIL {}: {}", f.code, f.message),
        }
    }
    if report.ok {
        println!(
            "ok: {} results, signatures, inclusion proofs and trust levels hold",
            report.results.len()
        );
    }
}
