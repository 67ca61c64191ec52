//! Checking a chain: [`verify_chain`] walks the stored entries in key
//! order from the checkpoint (or entry 1) and names the first one that
//! breaks it, and how ([`Broken`]). Pure: it reads what it is given.

use ed25519_dalek::VerifyingKey;
use serde::Serialize;

use super::entry::{chain_hash, decode_stored, AuditCheckpoint, GENESIS};

/// How a chain is broken, at the first place it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Broken {
    /// The entry at `seq` does not hash to what is stored with it, or
    /// does not decode: its content was changed.
    Edited {
        /// The entry.
        seq: u64,
        /// What does not hold.
        why: String,
    },
    /// The entry at `seq` hashes right but does not link to the entry
    /// before it: one of the two was changed and rehashed.
    Unlinked {
        /// The entry.
        seq: u64,
    },
    /// Entries `first..=last` are missing: deleted.
    Missing {
        /// The first missing seq.
        first: u64,
        /// The last missing seq.
        last: u64,
    },
    /// The position `seq` holds the entry that says it is `holds`:
    /// entries were moved.
    Reordered {
        /// The position (the key the entry is stored under).
        seq: u64,
        /// The seq the entry there carries.
        holds: u64,
    },
    /// The checkpoint does not verify.
    Checkpoint {
        /// What does not hold.
        why: String,
    },
}

impl Broken {
    /// The first seq the break names (the checkpoint's: 0).
    pub fn seq(&self) -> u64 {
        match self {
            Self::Edited { seq, .. }
            | Self::Unlinked { seq }
            | Self::Reordered { seq, .. }
            | Self::Missing { first: seq, .. } => *seq,
            Self::Checkpoint { .. } => 0,
        }
    }
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Edited { seq, why } => write!(f, "entry {seq} was edited: {why}"),
            Self::Unlinked { seq } => write!(
                f,
                "entry {seq} does not link to the entry before it: entry {} or {seq} was edited and rehashed",
                seq.saturating_sub(1)
            ),
            Self::Missing { first, last } if first == last => {
                write!(f, "entry {first} is missing (deleted)")
            }
            Self::Missing { first, last } => {
                write!(f, "entries {first} to {last} are missing (deleted)")
            }
            Self::Reordered { seq, holds } => write!(
                f,
                "entry {seq} is out of order: its place holds entry {holds} (reordered)"
            ),
            Self::Checkpoint { why } => write!(f, "the retention checkpoint is not valid: {why}"),
        }
    }
}

/// What a check of the chain found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Entries checked (up to the first break).
    pub checked: u64,
    /// The seq the walk started after: the checkpoint's, 0 without one.
    pub from: u64,
    /// The last seq that verified.
    pub last: u64,
    /// The first break, when the chain does not verify.
    pub broken: Option<Broken>,
}

impl VerifyReport {
    /// Whether the chain verified.
    pub fn ok(&self) -> bool {
        self.broken.is_none()
    }
}

/// Checks the stored entries `entries` (key, value, in key order)
/// against `checkpoint` (when retention pruned; its signer must be
/// `node_key` when given) and `head` (the last seq and hash appended, as
/// kept beside the entries, which reveals entries deleted at the end).
pub fn verify_chain<I, E>(
    checkpoint: Option<&AuditCheckpoint>,
    node_key: Option<&VerifyingKey>,
    head: Option<(u64, [u8; 32])>,
    entries: I,
) -> Result<VerifyReport, E>
where
    I: IntoIterator<Item = Result<(u64, Vec<u8>), E>>,
{
    let (from, mut prev) = match checkpoint {
        None => (0, GENESIS),
        Some(c) => match c.check(node_key) {
            Ok(hash) => (c.through, hash),
            Err(why) => {
                return Ok(VerifyReport {
                    checked: 0,
                    from: c.through,
                    last: c.through,
                    broken: Some(Broken::Checkpoint { why }),
                })
            }
        },
    };
    let mut report = VerifyReport {
        checked: 0,
        from,
        last: from,
        broken: None,
    };
    for item in entries {
        let (key, value) = item?;
        let expected = report.last + 1;
        // Entries up to the checkpoint left by a prune that stopped
        // half-way: the checkpoint stands for them.
        if key < expected {
            continue;
        }
        if let Some(broken) = check_one(key, expected, &value, &prev) {
            report.broken = Some(broken);
            return Ok(report);
        }
        prev = decode_stored(&value).expect("checked above").hash;
        report.last = key;
        report.checked += 1;
    }
    if let Some((head_seq, head_hash)) = head {
        if report.last < head_seq {
            report.broken = Some(Broken::Missing {
                first: report.last + 1,
                last: head_seq,
            });
        } else if report.last == head_seq && head_seq > from && prev != head_hash {
            report.broken = Some(Broken::Edited {
                seq: head_seq,
                why: "it is not the entry the chain's head names".to_owned(),
            });
        }
    }
    Ok(report)
}

/// The break at entry `key` (expected `expected`, after hash `prev`), if
/// it breaks the chain.
fn check_one(key: u64, expected: u64, value: &[u8], prev: &[u8; 32]) -> Option<Broken> {
    if key > expected {
        return Some(Broken::Missing {
            first: expected,
            last: key - 1,
        });
    }
    let decoded = match decode_stored(value) {
        Ok(d) => d,
        Err(why) => {
            return Some(Broken::Edited {
                seq: key,
                why: format!("it does not decode ({why})"),
            })
        }
    };
    if decoded.entry.seq != key {
        return Some(Broken::Reordered {
            seq: key,
            holds: decoded.entry.seq,
        });
    }
    if chain_hash(&decoded.prev, &decoded.body) != decoded.hash {
        return Some(Broken::Edited {
            seq: key,
            why: "its content does not hash to the hash stored with it".to_owned(),
        });
    }
    if &decoded.prev != prev {
        return Some(Broken::Unlinked { seq: key });
    }
    None
}
