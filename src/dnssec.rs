//! DNSSEC that needs no network: trust anchors read from files
//! ([`anchors`]) and the chain of signed records a crawled agent's DNS
//! record rests on, built, carried with the record and checked offline
//! ([`chain`]). The crawler validates live lookups from the same anchors
//! (`crawl/dns/dnssec.rs`); a signed answer's checker checks the chains
//! the records carry (`answer::check`).

pub mod anchors;
pub mod chain;

pub use anchors::{Anchor, AnchorError, TrustAnchorSet};
pub use chain::{ChainError, Proved};
