//! `agentmesh import`: AIDIP documents, one JSON object per line, into a
//! data directory as this node's registrations (the registry's
//! [`Importer`], the one `POST /admin/import` runs). A progress bar on
//! stderr when it is a terminal, a count line every few seconds when it is
//! not; each refused line on stderr with its line number and problems; a
//! summary on stdout (`--json`: the endpoint's NDJSON instead).
//!
//! `--format mcp-registry` reads MCP Registry servers instead (a list API
//! response, an array of its items or of `server.json` objects, or NDJSON
//! of them: [`ImportFormat::McpRegistry`]), through the same importer;
//! refusals name the item (`item N`: its line in NDJSON, its position in a
//! document) and carry their reason code.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use tokio::io::{AsyncRead, ReadBuf};

use crate::config::{Config, DEFAULT_IMPORT_MAX_LINE_BYTES};
use crate::issuer::Issuer;
use crate::registry::import::{
    ImportFormat, ImportLimits, ImportSummary, Importer, LineResult, Outcome,
};
use crate::registry::Registry;

/// Exit status when the import ran to the end but refused some lines
/// (the others went in).
const EXIT_REFUSED: u8 = 3;
/// How often a count line is printed when stderr is not a terminal.
const COUNT_EVERY: Duration = Duration::from_secs(10);

/// What `import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// AIDIP documents, one per line (NDJSON).
    Aidip,
    /// MCP Registry servers: a list API response (`GET /v0.1/servers`),
    /// a JSON array of its items or of server.json objects, one
    /// server.json, or NDJSON whose lines each are a server.json or an
    /// item.
    McpRegistry,
    /// An export (`agentmesh export`), restored into an empty data
    /// directory: recognised by its header line without this flag.
    Export,
}

/// Flags of `import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The input file (NDJSON of AIDIP documents, or what `--format`
    /// says); `-` reads stdin.
    pub file: PathBuf,
    /// What the input holds: without it, an export when the file starts
    /// with an export's header line, else AIDIP documents.
    #[arg(long, value_enum)]
    pub format: Option<InputFormat>,
    /// Data directory (store and node.key); no node may be running on it.
    #[arg(long, env = "AGENTMESH_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// TOML config file (its data_dir and store.record_ttl apply).
    #[arg(long, env = "AGENTMESH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Longest line, in bytes; longer lines are refused.
    #[arg(long, default_value_t = DEFAULT_IMPORT_MAX_LINE_BYTES, value_name = "BYTES")]
    pub max_line_bytes: usize,
    /// Print one JSON result per document line and a final
    /// `{"summary":{...}}` line (what `POST /admin/import` answers).
    #[arg(long)]
    pub json: bool,
}

/// An `AsyncRead` that counts the bytes read through it (for the bar).
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Counting<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        polled
    }
}

type Input = Box<dyn AsyncRead + Unpin + Send>;

/// Opens `file` (`-`: stdin); answers the input and its size when known.
async fn open(file: &std::path::Path) -> anyhow::Result<(Input, Option<u64>)> {
    if file.as_os_str() == "-" {
        return Ok((Box::new(tokio::io::stdin()), None));
    }
    let f = tokio::fs::File::open(file)
        .await
        .with_context(|| format!("opening {}", file.display()))?;
    let size = f.metadata().await.ok().map(|m| m.len());
    Ok((Box::new(f), size))
}

/// Runs `import`: exit 0 when every line went in (or was already there),
/// 3 when some lines were refused, 1 when the import could not run or
/// stopped early (a read or store error).
///
/// # Errors
/// When the input, the config, the key or the store cannot be opened.
pub(super) async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let (format, unit) = match args.format {
        Some(InputFormat::Aidip) => (ImportFormat::Aidip, "line"),
        Some(InputFormat::McpRegistry) => (ImportFormat::McpRegistry, "item"),
        None if !super::backup::is_export(&args.file) => (ImportFormat::Aidip, "line"),
        Some(InputFormat::Export) | None => {
            return super::backup::restore(super::backup::RestoreArgs {
                file: &args.file,
                config: args.config.as_deref(),
                data_dir: args.data_dir.as_deref(),
            })
            .await
        }
    };
    let mut config = Config::load(args.config.as_deref(), std::env::vars())?;
    if let Some(d) = &args.data_dir {
        config.data_dir = d.clone();
    }
    config.validate()?;
    if args.max_line_bytes == 0 {
        anyhow::bail!("--max-line-bytes must be above zero");
    }
    let (input, size) = open(&args.file).await?;
    let (store, key) = super::open_data_dir(&config).await?;
    // The node's issuer: the node key, the configured lifetime. Nothing
    // is published here; a node started on the data directory puts its
    // own records back into the DHT.
    let audit_store = store.clone();
    let issuer = Issuer::new(store, Arc::new(key), config.store.record_ttl);
    let importer = Importer::new(
        Registry::new(issuer),
        ImportLimits {
            max_line_bytes: args.max_line_bytes,
            max_lines: u64::MAX,
        },
    )
    .with_format(format);

    let read = Arc::new(AtomicU64::new(0));
    let input = tokio::io::BufReader::with_capacity(
        256 * 1024,
        Counting {
            inner: input,
            read: read.clone(),
        },
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel::<LineResult>(4096);
    let job = tokio::spawn(async move { importer.run(input, tx).await });

    let terminal = std::io::stderr().is_terminal();
    let bar = progress_bar(size, terminal && !args.json);
    let started = Instant::now();
    let mut counts = ImportSummary::default();
    let mut last_count_line = Instant::now();
    while let Some(r) = rx.recv().await {
        counts.lines = r.line;
        counts.count(&r);
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&r).expect("results always serialise")
            );
        } else if r.outcome == Outcome::Refused {
            bar.suspend(|| eprintln!("{}", refusal_line(unit, &r)));
        }
        bar.set_position(read.load(Ordering::Relaxed));
        bar.set_message(counts_text(&counts));
        if !terminal && !args.json && last_count_line.elapsed() >= COUNT_EVERY {
            eprintln!("import: {} so far", counts_text(&counts));
            last_count_line = Instant::now();
        }
    }
    let summary = job.await.context("the import task panicked")?;
    audit_store
        .audit(summary.audit_event("cli", &args.file.display().to_string()))
        .await
        .context("writing the import's audit entry")?;
    drop(audit_store);
    bar.finish_and_clear();
    if args.json {
        println!("{}", json!({ "summary": summary }));
    } else {
        print_summary(&args.file, &config.data_dir, &summary, started.elapsed());
    }
    Ok(if let Some(stopped) = &summary.stopped {
        eprintln!(
            "error: the import stopped early: {}",
            serde_json::to_string(stopped).expect("a stop always serialises")
        );
        ExitCode::FAILURE
    } else if summary.refused > 0 {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::SUCCESS
    })
}

fn progress_bar(size: Option<u64>, visible: bool) -> indicatif::ProgressBar {
    let bar = match size {
        Some(size) => {
            let bar = indicatif::ProgressBar::new(size);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {bytes}/{total_bytes}, {elapsed}, eta {eta}: {msg}",
                )
                .expect("the progress template is valid"),
            );
            bar
        }
        None => {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {bytes} read, {elapsed}: {msg}")
                    .expect("the progress template is valid"),
            );
            bar
        }
    };
    if !visible {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    } else {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

fn counts_text(c: &ImportSummary) -> String {
    let mut text = format!(
        "{} lines: {} created, {} updated, {} unchanged, {} refused",
        c.lines, c.created, c.updated, c.unchanged, c.refused
    );
    for (label, n) in [("deleted", c.deleted), ("skipped", c.skipped)] {
        if n > 0 {
            text.push_str(&format!(", {n} {label}"));
        }
    }
    text
}

/// `line N: refused (id X): /field: message; ...`, or `item N: refused
/// (id X): reason_code: /field: message` when the refusal has a code.
fn refusal_line(unit: &str, r: &LineResult) -> String {
    let problems: Vec<String> = r
        .problems
        .iter()
        .map(|p| {
            if p.field.is_empty() {
                p.message.clone()
            } else {
                format!("{}: {}", p.field, p.message)
            }
        })
        .collect();
    let id =
        r.id.as_deref()
            .map(|id| format!(" (id {id})"))
            .unwrap_or_default();
    let code = r
        .reason
        .map(|reason| format!("{reason}: "))
        .unwrap_or_default();
    format!(
        "{unit} {}: refused{id}: {code}{}",
        r.line,
        problems.join("; ")
    )
}

fn print_summary(
    file: &std::path::Path,
    data_dir: &std::path::Path,
    s: &ImportSummary,
    elapsed: Duration,
) {
    let documents = s.lines - s.blank;
    println!(
        "imported {} into {} in {:.1} s ({:.0} lines/s)",
        if file.as_os_str() == "-" {
            "stdin".into()
        } else {
            file.display().to_string()
        },
        data_dir.display(),
        elapsed.as_secs_f64(),
        s.lines as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    println!("  lines read  {:>9}", s.lines);
    println!("  documents   {documents:>9}");
    println!("  created     {:>9}", s.created);
    println!("  updated     {:>9}", s.updated);
    println!("  unchanged   {:>9}", s.unchanged);
    println!("  refused     {:>9}", s.refused);
    for (reason, n) in &s.refused_reasons {
        println!("    {reason}: {n}");
    }
    if s.deleted > 0 {
        println!("  deleted     {:>9}", s.deleted);
    }
    if s.skipped > 0 {
        println!("  skipped     {:>9}", s.skipped);
    }
    if s.blank > 0 {
        println!("  blank       {:>9}", s.blank);
    }
}
