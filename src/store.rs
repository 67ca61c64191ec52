//! The embedded store (sled): the latest record per agent, secondary
//! indexes for filter search, the set of local registrations, and the
//! schema version.
//!
//! Trees:
//! - `records`: agent id -> one kind byte + the encoded [`SignedRecord`]
//!   (the latest one, descriptor or tombstone);
//! - `ordinals`: agent id -> its ordinal (`u32`, big-endian), given at
//!   the agent's first write and never reused (`store/postings.rs`);
//! - `compact`: ordinal -> the agent's [`CompactAgent`] (what a search
//!   result shows, and what its filter terms come from: capabilities,
//!   tags, languages, trust level), or its id alone once it is a
//!   tombstone (`store/compact.rs`);
//! - `local`: ids registered through this node's API;
//! - `reports`: the latest crawl report (JSON) of agents crawled here;
//! - `reasons`: the reason codes of that report (comma-separated), which
//!   summaries show without reading the report (filled from `reports` at
//!   the first open of a data directory written before it existed);
//! - `pending`: agents whose text-index entry may not be committed yet;
//! - `gone`: the last `server.json` of each MCP Registry server a
//!   tombstone replaced, for the MCP sub-registry API (`store/gone.rs`;
//!   added without a layout change);
//! - `liveness`: other nodes' signed probe results of the agents held,
//!   by agent ordinal and signer (`store/liveness.rs`; a tree added
//!   without a layout change: a data directory without it gets it empty);
//! - `meta`: the schema version, and the state of each upstream registry
//!   followed (`store/upstreams.rs`); what the witness keeps: the last
//!   checkpoint of each peer, equivocation proofs (`store/witness.rs`);
//! - `audit`, `audit_versions`, `audit_meta`: the hash-chained audit log,
//!   the record versions its entries name, its head and retention
//!   checkpoint (`store/audit.rs`);
//! - `log_entries`, `log_hashes`, `log_index`: the transparency log of
//!   every record this node signs, appended in the write's own
//!   transaction (`store/log.rs`; trees added without a layout change).
//!
//! Every write is one sled transaction across the trees, so a compact
//! record never disagrees with the record it comes from, and the seq
//! check happens inside it. The `compact` tree is read once, at open,
//! into one roaring bitmap per filter term, kept in memory
//! (`store/postings.rs`), which every commit then updates: a filter
//! search intersects bitmaps and reads one compact record per result,
//! whether the node is warm or just restarted.
//!
//! sled blocks (disk reads, transactions, flushes, and the write/flush
//! gate of `store/write.rs`), so it is touched only on blocking threads,
//! never on the runtime's workers, which the mesh loop, the crawler and
//! the API share. Two faces over one database (`store/handles.rs`):
//! - [`Store`], the async face the node uses (registry, crawler, API,
//!   republisher; `store/async_face.rs`): a cheap handle, clone it
//!   freely; every sled call runs in `spawn_blocking`, and
//!   [`Store::run_blocking`] runs a whole scan there (the registry's
//!   ranked searches);
//! - [`BlockingStore`] ([`Store::blocking`]), the same operations run on
//!   the calling thread, for code that already is on a blocking thread
//!   (the federation `Judge`, inside the mesh handler's `spawn_blocking`)
//!   or is synchronous by nature (benches, the unit tests).
//!
//! The files, by what they hold:
//! - `open.rs`: [`StoreOptions`], opening (trees, migration, what is read
//!   into memory, the text index) and [`Store::close`];
//! - `write.rs`: the write path, one transaction per batch, and the
//!   flush; `read.rs`: records, the filter walk, the text ranking kept to
//!   the agents shown; `status.rs`: suspensions, freshness, the recrawl
//!   schedule; `reports.rs`: crawl reports and their reason codes;
//!   `trust.rs`: what this node counts, revoked keys, transfers;
//!   `liveness.rs`: other nodes' signed probe results;
//! - `stored.rs` (a record as stored), `compact.rs`, `postings.rs`,
//!   `filter.rs`, `claims.rs`, `changes.rs`, `migrate.rs`, `error.rs`;
//!   `text.rs`, the text index;
//! - `backup.rs`: the whole store as one export, and an export restored
//!   into an empty directory; `usage.rs`: `store.max_bytes` and a full
//!   disk, told apart from other failures.

mod async_face;
pub mod audit;
mod backup;
mod changes;
mod claims;
mod compact;
mod error;
mod filter;
mod freshness;
mod gone;
mod handles;
mod liveness;
mod log;
mod migrate;
mod open;
mod postings;
mod read;
mod reports;
mod status;
mod stored;
mod suspended;
pub mod text;
mod trust;
mod upstreams;
mod usage;
mod visibility;
pub mod witness;
mod write;

pub use audit::{AuditAction, AuditEntry, AuditEvent, AuditOutcome, Retention};
pub use backup::{
    is_export_header, restore, BackupError, BackupSummary, EXPORT_MAGIC, EXPORT_VERSION,
    MAX_EXPORT_LINE_BYTES,
};
pub use changes::ChangeFeed;
pub use compact::{Claimed, CompactAgent};
pub use error::{failed_batch, StoreError};
pub use filter::Filter;
pub use freshness::{FreshState, Freshness, LiveState, Liveness, ProbeProtocol};
pub use gone::GoneServer;
pub use handles::{BlockingStore, Store};
pub use liveness::{CheckPut, PeerCheck, MAX_CHECKS_PER_AGENT};
pub use log::BeyondLog;
pub use migrate::SCHEMA_VERSION;
pub use open::{StoreOptions, CLOSE_WAIT};
pub use stored::StoredAgent;
pub use suspended::{Suspension, MAX_REASON_CHARS as MAX_SUSPENSION_REASON_CHARS};
pub use text::{operation_texts, terms as text_terms, TextIndexOpen, TextQuery};
pub use trust::{Reassessed, Revocation};
pub use usage::{disk_usage, is_enospc, DISK_RESERVE};
pub use visibility::{
    Audience, Entitlement, Viewer, Visibility, MAX_CLIENTS as MAX_ENTITLED_CLIENTS,
    MAX_NAME_CHARS as MAX_ENTITLED_NAME_CHARS, MAX_SCOPES as MAX_ENTITLED_SCOPES,
};
pub use write::{Expect, Origin, PutOutcome};

#[cfg(test)]
mod tests;
