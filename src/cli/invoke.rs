//! `agentmesh invoke`: calls an agent through a running node's gateway
//! (`POST /agents/{id}/invoke`). The input is a JSON file or stdin; the
//! agent's answer is printed as JSON on stdout.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Value};

use super::http::{first_line, ApiArgs, NodeApi};

/// Largest input read, bytes (the node's `api.max_body_bytes` decides).
const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Flags of `invoke`.
#[derive(Debug, Clone, Args)]
pub struct InvokeArgs {
    /// The agent's id.
    pub id: String,
    /// The operation to call (may be left out when the agent has one).
    #[arg(long, value_name = "NAME")]
    pub operation: Option<String>,
    /// The input: a JSON file, or `-` for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub input: PathBuf,
    /// A file whose first line is your credential for the agent itself,
    /// sent as `Agent-Authorization` (the node passes it on as
    /// `Authorization`, and neither logs nor keeps it).
    #[arg(long, value_name = "FILE")]
    pub agent_token_file: Option<PathBuf>,
    /// The node, your credential for it, and how long to wait.
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Runs `invoke`: exit 0 with the agent's JSON answer on stdout; 1 when
/// the node or the agent refused or failed the call (the error object is
/// printed); 2 when the node cannot be reached.
///
/// # Errors
/// When the input cannot be read or is not JSON, or a token file cannot
/// be read.
pub(super) async fn run(args: InvokeArgs) -> anyhow::Result<ExitCode> {
    let mut text = String::new();
    if args.input.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_INPUT_BYTES)
            .read_to_string(&mut text)
            .context("reading the input from stdin")?;
    } else {
        std::fs::File::open(&args.input)
            .and_then(|f| f.take(MAX_INPUT_BYTES).read_to_string(&mut text))
            .with_context(|| format!("reading {}", args.input.display()))?;
    }
    let input: Value = serde_json::from_str(&text).context("the input is not JSON")?;
    let mut headers = HeaderMap::new();
    if let Some(path) = &args.agent_token_file {
        let token = first_line(path, "--agent-token-file")?;
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .context("--agent-token-file: not a valid header value")?;
        value.set_sensitive(true);
        headers.insert("agent-authorization", value);
    }
    let mut body = json!({ "input": input });
    if let Some(op) = &args.operation {
        body["operation"] = json!(op);
    }
    let api = NodeApi::new(&args.api)?;
    let path = format!("/agents/{}/invoke", urlencode(&args.id));
    match api.post_with(&path, &body, headers).await {
        Ok(answer) => {
            println!("{}", answer.text.trim_end());
            Ok(ExitCode::SUCCESS)
        }
        Err(f) => Ok(f.report()),
    }
}

/// An id as one path segment.
fn urlencode(id: &str) -> String {
    let mut url = url::Url::parse("http://x/").expect("a valid base");
    url.path_segments_mut()
        .expect("an http URL has a path")
        .push(id);
    url.path().trim_start_matches('/').to_owned()
}
