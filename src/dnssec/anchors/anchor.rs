//! One DNSSEC trust anchor ([`Anchor`]: a zone and the key or key
//! digest that signs its DNSKEY RRset), the limits on how many are read,
//! and why reading them failed ([`AnchorError`]).

use std::path::{Path, PathBuf};

use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{PublicKey, Verifier};
use hickory_proto::rr::Name;

/// Largest trust anchor file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most anchors (DS or DNSKEY records, or valid key digests) in all files.
pub const MAX_RECORDS: usize = 64;
/// Most zones the anchors are for, in all files.
pub const MAX_ZONES: usize = 16;
/// Why trust anchors could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnchorError {
    /// The file cannot be read.
    #[error("trust anchor {file}: {reason}")]
    Read {
        /// The file.
        file: PathBuf,
        /// What the system says.
        reason: String,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("trust anchor {file}: {size} bytes, more than the {limit} allowed")]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        size: u64,
        /// [`MAX_FILE_BYTES`].
        limit: u64,
    },
    /// More than [`MAX_RECORDS`] anchors, or for more than [`MAX_ZONES`]
    /// zones.
    #[error("trust anchor {file}: more than {limit} {what}")]
    TooMany {
        /// The file whose anchor went over the limit.
        file: PathBuf,
        /// `anchors` or `zones`.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// A record or element that is not a usable anchor.
    #[error("trust anchor {file}, line {line}: {reason}")]
    Syntax {
        /// The file.
        file: PathBuf,
        /// The line (1-based) where the record or element starts.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The file holds no anchor (in the XML form: none valid now).
    #[error("trust anchor {file}: {reason}")]
    Empty {
        /// The file.
        file: PathBuf,
        /// What was missing.
        reason: String,
    },
}

/// What an anchor pins: a key, or a digest of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorKey {
    /// A DS record: the digest of a key of the zone.
    Ds(DS),
    /// A DNSKEY record: the key itself.
    Dnskey(DNSKEY),
}

/// One trust anchor: a zone and the key (or key digest) that signs its
/// DNSKEY RRset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The zone (absolute, lowercase).
    pub zone: Name,
    /// The key or its digest.
    pub key: AnchorKey,
}

impl Anchor {
    /// Whether `key`, a DNSKEY published at this anchor's zone, is the
    /// anchored key: a zone key, not revoked, equal to the anchor's key
    /// or with the anchor's digest (RFC 4034 5.1.4; its key tag and
    /// algorithm must match too).
    pub fn matches(&self, key: &DNSKEY) -> bool {
        if !key.zone_key() || key.revoke() {
            return false;
        }
        match &self.key {
            AnchorKey::Dnskey(anchor) => {
                anchor.algorithm() == key.algorithm()
                    && anchor.public_key().public_bytes() == key.public_key().public_bytes()
            }
            AnchorKey::Ds(ds) => {
                ds.algorithm() == key.algorithm()
                    && key.calculate_key_tag().ok() == Some(ds.key_tag())
                    && ds.covers(&self.zone, key).unwrap_or(false)
            }
        }
    }

    /// The key tag of the anchored key.
    pub fn key_tag(&self) -> Option<u16> {
        match &self.key {
            AnchorKey::Dnskey(key) => key.calculate_key_tag().ok(),
            AnchorKey::Ds(ds) => Some(ds.key_tag()),
        }
    }
}

pub(super) fn syntax(file: &Path, line: usize, reason: impl Into<String>) -> AnchorError {
    AnchorError::Syntax {
        file: file.to_owned(),
        line,
        reason: reason.into(),
    }
}
