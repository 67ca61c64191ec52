//! `agentmesh audit verify|tail|show`: the audit log (`store/audit.rs`),
//! read from a data directory when no node runs on it (`--data-dir`), or
//! from a running node through its admin API (`--api URL --token T`:
//! the node holds sled's lock on its data directory while it runs).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::Value;

use crate::store::audit::AuditEntry;

/// Exit status when the chain is broken.
const EXIT_BROKEN: u8 = 1;
/// Exit status when the log could not be read (a node holds the data
/// directory, the node cannot be reached, or it refused).
const EXIT_UNREADABLE: u8 = 2;

/// Flags of `audit`.
#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: AuditCommand,
}

/// The `audit` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain from the retention checkpoint (or the first
    /// entry) to the head; name the first broken entry and how it is
    /// broken (edited, missing, reordered). Exit 0 when it verifies, 1
    /// when it is broken, 2 when it could not be read.
    Verify(VerifyArgs),
    /// Print the newest entries, oldest first.
    Tail(TailArgs),
    /// Print one entry and the version of the record it names (the
    /// document as it was after that write).
    Show(ShowArgs),
}

/// Where the log is read.
#[derive(Debug, Clone, Args)]
pub struct Source {
    /// A data directory no node is running on.
    #[arg(
        long,
        env = "AGENTMESH_DATA_DIR",
        value_name = "DIR",
        conflicts_with = "api"
    )]
    pub data_dir: Option<PathBuf>,
    /// A running node's API (its admin routes; with --token).
    #[arg(long, value_name = "URL")]
    pub api: Option<String>,
    /// The node's admin token (`api.admin_token`).
    #[arg(
        long,
        env = "AGENTMESH_API__ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `audit verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// Where the log is.
    #[command(flatten)]
    pub source: Source,
}

/// Flags of `audit tail`.
#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// How many entries (1 to 1000).
    #[arg(short, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub n: u64,
    /// Where the log is.
    #[command(flatten)]
    pub source: Source,
}

/// Flags of `audit show`.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The entry's seq.
    pub seq: u64,
    /// Where the log is.
    #[command(flatten)]
    pub source: Source,
}

/// Runs `audit`.
///
/// # Errors
/// Output failures; what cannot be read is an exit status, not an error.
pub(super) async fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let (source, answer) = match &args.command {
        AuditCommand::Verify(a) => (&a.source, read(&a.source, Ask::Verify).await),
        AuditCommand::Tail(a) => (&a.source, read(&a.source, Ask::Tail(a.n)).await),
        AuditCommand::Show(a) => (&a.source, read(&a.source, Ask::Show(a.seq)).await),
    };
    let answer = match answer {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::from(EXIT_UNREADABLE));
        }
    };
    match &args.command {
        AuditCommand::Verify(_) => Ok(print_verify(&answer, source.json)),
        AuditCommand::Tail(_) => {
            let entries: Vec<AuditEntry> =
                serde_json::from_value(answer["entries"].clone()).context("reading the entries")?;
            if source.json {
                for e in &entries {
                    println!("{}", serde_json::to_string(e)?);
                }
            } else {
                for e in &entries {
                    println!("{}", line(e));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Show(a) => {
            if answer.is_null() {
                eprintln!("error: no audit entry {}", a.seq);
                return Ok(ExitCode::from(EXIT_UNREADABLE));
            }
            println!("{}", serde_json::to_string_pretty(&answer)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// What is asked of the log.
#[derive(Debug, Clone, Copy)]
enum Ask {
    Verify,
    Tail(u64),
    Show(u64),
}

/// The answer, as `GET /admin/audit...` gives it, from the node or from
/// the data directory.
async fn read(source: &Source, ask: Ask) -> anyhow::Result<Value> {
    match (&source.data_dir, &source.api) {
        (Some(dir), _) => offline(dir.clone(), ask).await,
        (None, Some(api)) => online(api, source.token.as_deref(), ask).await,
        (None, None) => anyhow::bail!("give --data-dir DIR (no node running on it) or --api URL"),
    }
}

async fn offline(dir: PathBuf, ask: Ask) -> anyhow::Result<Value> {
    let path = dir.join("store");
    if !path.join("db").exists() {
        anyhow::bail!("{} holds no store", dir.display());
    }
    let node_key = crate::identity::read_key_file(&dir.join("node.key"))
        .ok()
        .map(|k| k.verifying_key());
    let store = tokio::task::spawn_blocking(move || {
        crate::store::Store::open_with(
            &path,
            &crate::store::StoreOptions {
                cache_bytes: 16 << 20,
                text_index: crate::store::TextIndexOpen::AtFirstSearch,
                max_bytes: None,
                log_signer: None,
            },
        )
    })
    .await
    .context("the store-open task panicked")?
    .with_context(|| {
        format!(
            "opening the store in {} (a running node holds it: stop it, or read its log with --api URL --token T)",
            dir.display()
        )
    })?;
    let answer = store
        .run_blocking(move |s| -> Result<Value, crate::store::StoreError> {
            Ok(match ask {
                Ask::Verify => crate::api::audit_verify_json(&s.audit_verify(node_key.as_ref())?),
                Ask::Tail(n) => {
                    serde_json::json!({"entries": s.audit_tail(usize::try_from(n).unwrap_or(1000))?})
                }
                Ask::Show(seq) => crate::api::audit_show(s, seq)?.unwrap_or(Value::Null),
            })
        })
        .await??;
    store.close().await.context("closing the store")?;
    Ok(answer)
}

async fn online(api: &str, token: Option<&str>, ask: Ask) -> anyhow::Result<Value> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .context("building the HTTP client")?;
    let base = api.trim_end_matches('/');
    let url = match ask {
        Ask::Verify => format!("{base}/admin/audit/verify"),
        Ask::Tail(n) => format!("{base}/admin/audit?last={n}"),
        Ask::Show(seq) => format!("{base}/admin/audit/{seq}"),
    };
    let mut request = client.get(&url);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach the node at {base}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if status == reqwest::StatusCode::NOT_FOUND && matches!(ask, Ask::Show(_)) {
        return Ok(Value::Null);
    }
    if !status.is_success() {
        anyhow::bail!("{url} answered {status}: {text}");
    }
    serde_json::from_str(&text).with_context(|| format!("{url} answered something not JSON"))
}

/// Prints a verification report; answers the exit status.
fn print_verify(report: &Value, json: bool) -> ExitCode {
    let ok = report["ok"].as_bool().unwrap_or(false);
    if json {
        println!("{report}");
    } else if ok {
        let from = report["from"].as_u64().unwrap_or(0);
        let start = if from == 0 {
            "the first entry".to_owned()
        } else {
            format!("the checkpoint after entry {from}")
        };
        println!(
            "ok: {} entries verify, from {start} to entry {}",
            report["checked"], report["last"]
        );
    } else {
        println!(
            "broken: {}",
            report["message"]
                .as_str()
                .unwrap_or("the chain does not verify")
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_BROKEN)
    }
}

/// One entry on one line.
fn line(e: &AuditEntry) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.time_ms);
    let mut out = format!(
        "{:>6}  {}  {}  {}  {}  {}  {}",
        e.seq,
        humantime::format_rfc3339_millis(time),
        e.actor,
        e.addr.as_deref().unwrap_or("-"),
        e.action,
        if e.target.is_empty() { "-" } else { &e.target },
        e.outcome,
    );
    if e.count != 1 {
        out.push_str(&format!("  x{}", e.count));
    }
    if let Some(r) = &e.record {
        out.push_str(&format!("  record {}", &r[..r.len().min(16)]));
    }
    if let Some(id) = &e.request_id {
        out.push_str(&format!("  request {id}"));
    }
    out
}
