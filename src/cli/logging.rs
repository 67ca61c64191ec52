//! The node's log: `tracing`'s formatter (text or JSON lines) under the
//! filter `RUST_LOG` or the command's default gives, and beside it the
//! counter of the DNS library's DNSSEC warnings, which sees them whatever
//! the filter shows (`metrics::CountLibraryWarnings`).

use tracing::{Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use super::LogFormat;
use crate::metrics::{CountLibraryWarnings, DNSSEC_LIBRARY_TARGET};

/// The subscriber that writes the log to `writer` in `format` (ANSI
/// colours when `ansi`), filtered by `filter`.
pub fn subscriber<W>(
    filter: EnvFilter,
    format: LogFormat,
    ansi: bool,
    writer: W,
) -> impl Subscriber + Send + Sync + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let logs = tracing_subscriber::fmt::layer().with_writer(writer);
    let logs = match format {
        LogFormat::Text => logs.with_ansi(ansi).boxed(),
        LogFormat::Json => logs.json().with_ansi(false).boxed(),
    };
    let counted = Targets::new().with_target(DNSSEC_LIBRARY_TARGET, Level::WARN);
    tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(CountLibraryWarnings.with_filter(counted))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::metrics::DNSSEC_LIBRARY_WARNINGS;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_dns_librarys_dnssec_warnings_are_counted_and_kept_out_of_the_default_log() {
        use clap::Parser as _;
        let cli = super::super::Cli::parse_from(["agentmesh", "node"]);
        let buffer = Buffer::default();
        let writer = {
            let buffer = buffer.clone();
            move || buffer.clone()
        };
        let filter = EnvFilter::new(cli.default_log_filter());
        let subscriber = subscriber(filter, LogFormat::Text, false, writer);
        let before = DNSSEC_LIBRARY_WARNINGS.load(Ordering::Relaxed);
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "hickory_net::dnssec", "response does not contain NSEC");
            tracing::info!(target: "hickory_net::dnssec", "not a warning");
            tracing::warn!(target: "agentmesh::crawl", "the node's own warning");
        });
        let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("the node's own warning"), "{log}");
        assert!(
            !log.contains("NSEC") && !log.contains("not a warning"),
            "{log}"
        );
        // Other tests may log under the target too; this one's warning
        // is counted, its info line is not.
        assert!(DNSSEC_LIBRARY_WARNINGS.load(Ordering::Relaxed) > before);
    }
}
