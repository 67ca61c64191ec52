//! `agentmesh suspend`: the operator's suspension of an agent on a
//! running node, through its admin API (`PUT` / `DELETE
//! /admin/agents/{id}/suspension`), or the list of suspensions.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use serde_json::{json, Value};

/// Flags of `suspend`.
#[derive(Debug, Clone, Args)]
pub struct SuspendArgs {
    /// The agent's id (omit with `--list`).
    #[arg(required_unless_present = "list")]
    pub id: Option<String>,
    /// Why (shown on the agent's record); required to suspend.
    #[arg(long, required_unless_present_any = ["lift", "list"])]
    pub reason: Option<String>,
    /// Lift the agent's suspension instead.
    #[arg(long, conflicts_with_all = ["reason", "list"])]
    pub lift: bool,
    /// List the node's suspensions (printed as JSON, with or without
    /// `--json`).
    #[arg(long, conflicts_with_all = ["reason", "lift", "id"])]
    pub list: bool,
    /// Print the node's answer as one JSON object (`{"id","suspended",
    /// "reason","since"}`) instead of a sentence.
    #[arg(long)]
    pub json: bool,
    /// The node's API.
    #[arg(long, default_value = "http://127.0.0.1:7700", value_name = "URL")]
    pub api: String,
    /// The node's admin token (`api.admin_token`).
    #[arg(
        long,
        env = "AGENTMESH_API__ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// Runs `suspend`: exit 0 when the node did it, 1 when it refused (the
/// error object is printed), 2 for a node that cannot be reached.
///
/// # Errors
/// When the HTTP client cannot be built.
pub(super) async fn run(args: SuspendArgs) -> anyhow::Result<ExitCode> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .context("building the HTTP client")?;
    let base = args.api.trim_end_matches('/');
    let request = match (&args.id, args.list, args.lift) {
        (_, true, _) => client.get(format!("{base}/admin/suspensions")),
        (Some(id), false, true) => client.delete(format!("{base}/admin/agents/{id}/suspension")),
        (Some(id), false, false) => client
            .put(format!("{base}/admin/agents/{id}/suspension"))
            .json(&json!({"reason": args.reason.clone().unwrap_or_default()})),
        (None, false, _) => unreachable!("clap requires an id without --list"),
    };
    let request = match &args.token {
        Some(t) => request.bearer_auth(t),
        None => request,
    };
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot reach the node at {base}: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        eprintln!("error: the node answered {status}: {text}");
        return Ok(ExitCode::from(1));
    }
    match (&args.id, args.list, args.lift) {
        (_, true, _) => println!("{}", serde_json::to_string_pretty(&body)?),
        (Some(id), _, lift) if args.json => {
            // A lift answers 204 without a body: the state it leaves.
            let out = if lift {
                json!({"id": id, "suspended": false})
            } else {
                body
            };
            println!("{out}");
        }
        (Some(id), _, true) => println!("{id}: suspension lifted"),
        (Some(id), _, false) => println!(
            "{id}: suspended ({})",
            body["reason"].as_str().unwrap_or_default()
        ),
        (None, false, _) => {}
    }
    Ok(ExitCode::SUCCESS)
}
