//! The `agentmesh` binary: parse the command line, set up tracing, run.

use clap::Parser as _;
use tracing_subscriber::util::SubscriberInitExt as _;
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
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    agentmesh::cli::logging::subscriber(filter, cli.log_format, ansi, std::io::stderr).init();
    match agentmesh::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
