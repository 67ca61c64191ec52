//! The `agentmesh` binary: parse the command line, set up tracing, run.

use agentmesh::cli::LogFormat;
use clap::Parser as _;
use tracing_subscriber::EnvFilter;

// sled allocates and frees a node copy per write; mimalloc does that
// work in less time than glibc's allocator (BENCHMARKS.md, the import).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = agentmesh::cli::Cli::parse();
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(cli.default_log_filter()));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => logs.json().with_ansi(false).init(),
    }
    match agentmesh::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
