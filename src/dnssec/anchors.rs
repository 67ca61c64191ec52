//! DNSSEC trust anchors: what `--trust-anchor FILE` (config
//! `crawl.dnssec_trust_anchors`) holds, read into [`TrustAnchorSet`].
//!
//! A file is either
//! - zone-file syntax: DS or DNSKEY records, one or more, for any zone
//!   (the `K*.key` file `dnssec-keygen` writes, the `dsset-*` file
//!   `dnssec-signzone` writes, `dnssec-dsfromkey`'s output, unbound's
//!   `root.key`); `;` comments, blank lines, parentheses around a record
//!   that spans lines and a `$TTL` line are allowed; owner names are
//!   absolute (a final dot); or
//! - IANA's `root-anchors.xml` (RFC 9718): a `<TrustAnchor>` with its
//!   `<Zone>` and `<KeyDigest>` elements (`KeyTag`, `Algorithm`,
//!   `DigestType`, `Digest`), each a DS record for the zone; a digest
//!   outside its `validFrom`/`validUntil` window is left out. The format
//!   is small and fixed, so it is read by a scanner for exactly these
//!   elements, not by a general XML parser.
//!
//! A file is at most [`MAX_FILE_BYTES`]; all files together hold at most
//! [`MAX_RECORDS`] anchors for at most [`MAX_ZONES`] zones. Every error
//! names the file, and the line where there is one.
//!
//! The root's key-signing keys that hickory ships
//! ([`TrustAnchorSet::builtin_root`]) are always in the set; the files'
//! anchors are added beside them. The crawler's validator
//! (`crawl/dns/dnssec.rs`) says how each kind is used; [`super::chain`]
//! checks a carried chain from them.

mod anchor;
mod xml;
mod zone_file;

use std::path::{Path, PathBuf};

use hickory_proto::dnssec::rdata::DNSKEY;
use hickory_proto::dnssec::{PublicKey, PublicKeyBuf, TrustAnchors};
use hickory_proto::rr::Name;

pub use anchor::{Anchor, AnchorError, AnchorKey, MAX_FILE_BYTES, MAX_RECORDS, MAX_ZONES};

/// The trust anchors the crawler validates from: the root's built-in
/// anchor, and beside it those the configured files hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchorSet {
    anchors: Vec<Anchor>,
    /// The zones a configured file holds an anchor for.
    configured: Vec<Name>,
}

impl TrustAnchorSet {
    /// The root zone's key-signing keys that hickory ships (KSK-2017,
    /// tag 20326, and KSK-2024, tag 38696), as DNSKEY anchors: what the
    /// crawler uses when no anchor is configured.
    pub fn builtin_root() -> Self {
        let shipped = TrustAnchors::default();
        let anchors = (0..shipped.len())
            .filter_map(|i| shipped.get(i))
            .map(|key| Anchor {
                zone: Name::root(),
                key: AnchorKey::Dnskey(DNSKEY::new(
                    true,
                    true,
                    false,
                    PublicKeyBuf::new(key.public_bytes().to_vec(), key.algorithm()),
                )),
            })
            .collect();
        Self {
            anchors,
            configured: Vec::new(),
        }
    }

    /// [`TrustAnchorSet::builtin_root`] and, beside it, the anchors in
    /// `files`.
    ///
    /// # Errors
    /// [`AnchorError`], naming the file (and the line) at fault.
    pub fn load(files: &[PathBuf]) -> Result<Self, AnchorError> {
        let mut set = Self::builtin_root();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut added = 0usize;
        for file in files {
            let text = read_bounded(file)?;
            for anchor in parse(&text, file, now)? {
                if added == MAX_RECORDS {
                    return Err(AnchorError::TooMany {
                        file: file.clone(),
                        what: "anchors",
                        limit: MAX_RECORDS,
                    });
                }
                if !set.configured.contains(&anchor.zone) {
                    if set.configured.len() == MAX_ZONES {
                        return Err(AnchorError::TooMany {
                            file: file.clone(),
                            what: "zones",
                            limit: MAX_ZONES,
                        });
                    }
                    set.configured.push(anchor.zone.clone());
                }
                added += 1;
                if !set.anchors.contains(&anchor) {
                    set.anchors.push(anchor);
                }
            }
        }
        Ok(set)
    }

    /// Whether no file gave an anchor: the root's built-in one alone.
    pub fn is_builtin(&self) -> bool {
        self.configured.is_empty()
    }

    /// Whether `zone`'s anchors are all built in (no configured file
    /// names it).
    pub fn is_builtin_zone(&self, zone: &Name) -> bool {
        !self.configured.contains(zone)
    }

    /// Every anchor.
    pub fn anchors(&self) -> &[Anchor] {
        &self.anchors
    }

    /// The zones anchored, each once, in the order first given.
    pub fn zones(&self) -> Vec<Name> {
        let mut out: Vec<Name> = Vec::new();
        for a in &self.anchors {
            if !out.contains(&a.zone) {
                out.push(a.zone.clone());
            }
        }
        out
    }

    /// The anchors for `zone`.
    pub fn for_zone<'a>(&'a self, zone: &'a Name) -> impl Iterator<Item = &'a Anchor> + 'a {
        self.anchors.iter().filter(move |a| &a.zone == zone)
    }

    /// The closest anchored zone at or above `name` (the name itself or
    /// its nearest anchored ancestor), if any anchor covers it.
    pub fn covering(&self, name: &Name) -> Option<Name> {
        let name = name.to_lowercase();
        self.anchors
            .iter()
            .map(|a| &a.zone)
            .filter(|zone| zone.zone_of(&name))
            .max_by_key(|zone| zone.num_labels())
            .cloned()
    }
}

fn read_bounded(file: &Path) -> Result<String, AnchorError> {
    let read = |e: std::io::Error| AnchorError::Read {
        file: file.to_owned(),
        reason: e.to_string(),
    };
    let size = std::fs::metadata(file).map_err(read)?.len();
    if size > MAX_FILE_BYTES {
        return Err(AnchorError::TooLarge {
            file: file.to_owned(),
            size,
            limit: MAX_FILE_BYTES,
        });
    }
    let bytes = std::fs::read(file).map_err(read)?;
    // Read again in case it grew between the two calls.
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(AnchorError::TooLarge {
            file: file.to_owned(),
            size: bytes.len() as u64,
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|e| AnchorError::Syntax {
        file: file.to_owned(),
        line: 1,
        reason: format!("not UTF-8 text ({e})"),
    })
}

/// The anchors in `text`, the contents of `file`: IANA's XML form when it
/// starts with `<`, zone-file syntax otherwise. `now` (Unix seconds)
/// decides which XML key digests are valid.
///
/// # Errors
/// [`AnchorError::Syntax`] at the first record or element that is not a
/// usable anchor, [`AnchorError::Empty`] when there is none,
/// [`AnchorError::TooMany`] past [`MAX_RECORDS`].
pub fn parse(text: &str, file: &Path, now: u64) -> Result<Vec<Anchor>, AnchorError> {
    let anchors = if text.trim_start().starts_with('<') {
        xml::parse(text, file, now)?
    } else {
        zone_file::read(text, file)?
    };
    if anchors.is_empty() {
        return Err(AnchorError::Empty {
            file: file.to_owned(),
            reason: "no DS or DNSKEY record".into(),
        });
    }
    Ok(anchors)
}

#[cfg(test)]
mod tests;
