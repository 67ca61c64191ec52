//! Warnings a library logs about what the node meets, not about the node:
//! hickory's DNSSEC validator warns, with the whole DNS message, about
//! every unsigned or broken zone a validating lookup crosses. The default
//! log filter keeps them out of the operator's log (`cli`'s
//! `default_log_filter`); [`CountLibraryWarnings`], a tracing layer with
//! its own filter, counts them for `GET /metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The tracing target of hickory's DNSSEC validator.
pub const DNSSEC_LIBRARY_TARGET: &str = "hickory_net::dnssec";

/// Warnings and errors logged under [`DNSSEC_LIBRARY_TARGET`] in this
/// process (`agentmesh_dnssec_library_warnings_total`).
pub static DNSSEC_LIBRARY_WARNINGS: AtomicU64 = AtomicU64::new(0);

/// Counts the events under [`DNSSEC_LIBRARY_TARGET`] at warning level or
/// above, whatever the log filter shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountLibraryWarnings;

impl<S: Subscriber> Layer<S> for CountLibraryWarnings {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() <= Level::WARN && meta.target().starts_with(DNSSEC_LIBRARY_TARGET) {
            DNSSEC_LIBRARY_WARNINGS.fetch_add(1, Ordering::Relaxed);
        }
    }
}
