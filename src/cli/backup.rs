//! `agentmesh export` and the restore half of `agentmesh import`: a whole
//! store written out as one export (docs/protocol.md#export), from a
//! running node through `GET /admin/export` (`--api`) or from a stopped
//! node's data directory, and an export restored into an empty data
//! directory (the store's `backup.rs` does both; this is the CLI around
//! it).

use std::io::{BufRead, BufReader, Read as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use futures_util::StreamExt as _;

use crate::config::Config;
use crate::store::{self, Store, StoreOptions, TextIndexOpen};

/// Flags of `export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Where the export goes (`-`: stdout). A file is written beside
    /// itself first and renamed once whole.
    pub file: PathBuf,
    /// Data directory of a stopped node (no node may be running on it:
    /// export a running node with `--api`).
    #[arg(long, env = "AGENTMESH_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// TOML config file (for its data_dir).
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Export a running node through its API (`GET /admin/export`)
    /// instead of a data directory (which is then not read).
    #[arg(long, alias = "node", value_name = "URL")]
    pub api: Option<String>,
    /// The node's admin token (`api.admin_token`), with `--api`.
    #[arg(
        long,
        env = "AGENTMESH_API__ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// Runs `export`: exit 0 when the whole export was written, 1 otherwise.
///
/// # Errors
/// When the store, the node or the output fails; the message says which.
pub(super) async fn export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let to_stdout = args.file.as_os_str() == "-";
    let partial = partial_path(&args.file);
    let mut out: Box<dyn Write + Send> = if to_stdout {
        Box::new(std::io::BufWriter::new(std::io::stdout()))
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&partial)
                .with_context(|| format!("creating {}", partial.display()))?,
        ))
    };
    let written = match &args.api {
        Some(api) => from_node(api, args.token.as_deref(), &mut out).await,
        None => from_data_dir(&args, out.as_mut()).await,
    };
    let written = written.and_then(|summary| {
        out.flush().context("writing the export")?;
        Ok(summary)
    });
    drop(out);
    match written {
        Ok(summary) => {
            if !to_stdout {
                std::fs::rename(&partial, &args.file)
                    .with_context(|| format!("renaming {}", partial.display()))?;
            }
            eprintln!("export: {summary}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if !to_stdout {
                let _ = std::fs::remove_file(&partial);
            }
            Err(e)
        }
    }
}

/// `FILE.partial`, where an export is written until it is whole.
fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

async fn from_data_dir(args: &ExportArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<String> {
    let mut config = Config::load(args.config.as_deref(), std::env::vars())?;
    if let Some(d) = &args.data_dir {
        config.data_dir = d.clone();
    }
    let path = config.store_path();
    if !path.join("db").exists() {
        anyhow::bail!("no store in {}", config.data_dir.display());
    }
    if Store::is_in_use(&path)? {
        anyhow::bail!(
            "a node is running on {}: export it through its API instead \
             (agentmesh export --api URL --token TOKEN FILE)",
            config.data_dir.display()
        );
    }
    let options = StoreOptions {
        // Nothing is searched: the text index is not opened.
        text_index: TextIndexOpen::AtFirstSearch,
        ..StoreOptions::of(&config.store)
    };
    let store = tokio::task::spawn_blocking(move || Store::open_with(&path, &options))
        .await
        .context("the store-open task panicked")?
        .with_context(|| format!("opening the store in {}", config.data_dir.display()))?;
    let summary = tokio::task::block_in_place(|| store.blocking().export(out))
        .context("exporting the store")?;
    store.close().await.context("closing the store")?;
    Ok(format!(
        "{} registrations, {} records, {} other entries",
        summary.registrations, summary.records, summary.entries
    ))
}

/// The trailer's type, which the last line of a whole export carries.
const TRAILER: &[u8] = br#""type":"end""#;

async fn from_node(
    api: &str,
    token: Option<&str>,
    out: &mut Box<dyn Write + Send>,
) -> anyhow::Result<String> {
    let base = api.trim_end_matches('/');
    let client = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .context("building the HTTP client")?;
    let request = client.get(format!("{base}/admin/export"));
    let request = match token {
        Some(t) => request.bearer_auth(t),
        None => request,
    };
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach the node at {base}"))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        anyhow::bail!("the node answered {status}: {text}");
    }
    let mut body = response.bytes_stream();
    let (mut bytes, mut tail) = (0u64, Vec::<u8>::new());
    while let Some(chunk) = body.next().await {
        let chunk = chunk.context("the export broke off")?;
        out.write_all(&chunk).context("writing the export")?;
        bytes += chunk.len() as u64;
        tail.extend_from_slice(&chunk);
        let keep = tail.len().saturating_sub(256);
        tail.drain(..keep);
    }
    // The node streams a file it wrote whole; a connection cut short
    // ends without the trailer.
    let last = tail
        .strip_suffix(b"\n")
        .and_then(|t| t.rsplit(|b| *b == b'\n').next())
        .unwrap_or_default();
    if !last.windows(TRAILER.len()).any(|w| w == TRAILER) {
        anyhow::bail!("the export from {base} ended without its trailer: it is incomplete");
    }
    Ok(format!("{bytes} bytes from {base}"))
}

/// Whether `file` starts with an export's header line (how `import`
/// tells an export from AIDIP documents when `--format` is not given).
/// Stdin is never looked at: `--format export` says it.
pub(super) fn is_export(file: &Path) -> bool {
    if file.as_os_str() == "-" {
        return false;
    }
    let Ok(f) = std::fs::File::open(file) else {
        return false;
    };
    let mut first = String::new();
    let read = BufReader::new(f.take(4096)).read_line(&mut first);
    read.is_ok() && store::is_export_header(first.trim_end())
}

/// Flags of `import` that a restore reads.
pub(super) struct RestoreArgs<'a> {
    pub(super) file: &'a Path,
    pub(super) config: Option<&'a Path>,
    pub(super) data_dir: Option<&'a Path>,
}

/// Restores an export into the data directory's (empty) store: exit 0
/// when it is all in.
///
/// # Errors
/// When the input cannot be read, the store directory is not empty, or
/// the export is refused ([`store::BackupError`] says why and where).
pub(super) async fn restore(args: RestoreArgs<'_>) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(args.config, std::env::vars())?;
    if let Some(d) = args.data_dir {
        config.data_dir = d.to_path_buf();
    }
    config.validate()?;
    crate::node::create_data_dir(&config.data_dir)?;
    let input: Box<dyn std::io::Read + Send> = if args.file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(args.file)
                .with_context(|| format!("opening {}", args.file.display()))?,
        )
    };
    let path = config.store_path();
    let options = StoreOptions::of(&config.store);
    let summary = tokio::task::spawn_blocking(move || {
        let mut input = BufReader::with_capacity(256 * 1024, input);
        store::restore(&path, &mut input, &options)
    })
    .await
    .context("the restore task panicked")?
    .with_context(|| format!("restoring into {}", config.data_dir.display()))?;
    println!(
        "restored into {}: {} registrations, {} records, {} other entries",
        config.data_dir.display(),
        summary.registrations,
        summary.records,
        summary.entries
    );
    if !config.node_key_path().exists() {
        eprintln!(
            "note: {} has no node.key. Copy the exported node's node.key there before \
             starting the node: an export carries no private key, and a node with a new \
             key is another node (another peer id, and the registrations it holds were \
             signed by a key it does not have).",
            config.data_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
