//! The `_agent.{domain}` TXT record (ADP 4.1, docs/protocol.md#crawl-txt):
//! `v=ADP1; pk=<fingerprint>; wk=<url>`.
//!
//! The strings of each record are joined, split on `;`, trimmed, and read
//! as `key=value`; unknown keys are ignored. A record is an ADP record when
//! its first pair is `v=ADP...`; the RRset may hold other TXT records,
//! which are skipped. Exactly one ADP record, of version `ADP1`, is
//! accepted.

use std::collections::BTreeMap;

use crate::identity;
use crate::trust::Reason;

/// The version this code speaks.
pub const VERSION: &str = "ADP1";
/// Largest joined TXT record considered, bytes.
pub const MAX_RECORD_BYTES: usize = 4096;
/// Most `key=value` pairs read from one record.
pub const MAX_PAIRS: usize = 32;

/// A parsed ADP TXT record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdpTxt {
    /// The `pk` fingerprint.
    pub fingerprint: String,
    /// The `wk` URL of `agent.json`.
    pub well_known: String,
    /// Other keys, kept for diagnostics.
    pub extra: BTreeMap<String, String>,
}

/// Why the TXT RRset is not a usable ADP record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TxtError {
    /// No record starts with `v=ADP`.
    #[error("no ADP TXT record (v=ADP1) at _agent.{domain}")]
    Missing {
        /// The domain whose `_agent` name was queried.
        domain: String,
    },
    /// More than one ADP record (ADP 10.3 incompatibility).
    #[error("{count} ADP TXT records at _agent.{domain}; exactly one is allowed")]
    Multiple {
        /// The domain whose `_agent` name was queried.
        domain: String,
        /// How many ADP records it has.
        count: usize,
    },
    /// A version this code does not speak (ADP 10.3).
    #[error("unsupported ADP version {version:?} (this node speaks {VERSION})")]
    UnsupportedVersion {
        /// The record's `v=` value.
        version: String,
    },
    /// A required key is absent.
    #[error("the ADP TXT record has no {key}= value")]
    MissingKey {
        /// The absent key (`pk` or `wk`).
        key: &'static str,
    },
    /// The record is too long, has too many pairs, or a bad value.
    #[error("malformed ADP TXT record: {reason}")]
    Malformed {
        /// What is wrong with it.
        reason: String,
    },
}

impl TxtError {
    /// The stable reason code shown by the API and CLI.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Missing { .. } => Reason::TxtMissing,
            Self::Multiple { .. } => Reason::TxtMultiple,
            Self::UnsupportedVersion { .. } => Reason::TxtUnsupportedVersion,
            Self::MissingKey { .. } | Self::Malformed { .. } => Reason::TxtMalformed,
        }
    }
}

fn pairs(record: &str) -> Vec<(String, String)> {
    record
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim().to_owned()),
            None => (p.to_ascii_lowercase(), String::new()),
        })
        .collect()
}

/// Parses the TXT RRset at `_agent.{domain}`; each item is one record with
/// its character-strings already joined.
///
/// # Errors
/// The [`TxtError`] that says what is wrong.
pub fn parse(domain: &str, records: &[String]) -> Result<AdpTxt, TxtError> {
    let mut adp: Vec<Vec<(String, String)>> = Vec::new();
    for record in records {
        let p = pairs(record);
        if matches!(p.first(), Some((k, v)) if k == "v" && v.to_ascii_uppercase().starts_with("ADP"))
        {
            if record.len() > MAX_RECORD_BYTES {
                return Err(TxtError::Malformed {
                    reason: format!(
                        "{} bytes, over the {MAX_RECORD_BYTES}-byte limit",
                        record.len()
                    ),
                });
            }
            adp.push(p);
        }
    }
    let record = match adp.len() {
        0 => {
            return Err(TxtError::Missing {
                domain: domain.into(),
            })
        }
        1 => adp.remove(0),
        count => {
            return Err(TxtError::Multiple {
                domain: domain.into(),
                count,
            })
        }
    };
    if record.len() > MAX_PAIRS {
        return Err(TxtError::Malformed {
            reason: format!("{} pairs, over the limit of {MAX_PAIRS}", record.len()),
        });
    }
    let version = &record[0].1;
    if version != VERSION {
        return Err(TxtError::UnsupportedVersion {
            version: version.clone(),
        });
    }
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in record.into_iter().skip(1) {
        if map.contains_key(&k) {
            return Err(TxtError::Malformed {
                reason: format!("key {k} appears twice"),
            });
        }
        map.insert(k, v);
    }
    let fingerprint = map
        .remove("pk")
        .ok_or(TxtError::MissingKey { key: "pk" })?
        .to_ascii_lowercase();
    if !identity::is_fingerprint(&fingerprint) {
        return Err(TxtError::Malformed {
            reason: format!("pk={fingerprint:?} is not ed25519: followed by 64 hex digits"),
        });
    }
    let well_known = map.remove("wk").ok_or(TxtError::MissingKey { key: "wk" })?;
    if well_known.is_empty() {
        return Err(TxtError::MissingKey { key: "wk" });
    }
    Ok(AdpTxt {
        fingerprint,
        well_known,
        extra: map,
    })
}

/// The TXT record text for a fingerprint and well-known URL (what
/// `agentmesh publish` prints).
pub fn render(fingerprint: &str, well_known: &str) -> String {
    format!("v={VERSION}; pk={fingerprint}; wk={well_known}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "ed25519:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    fn one(s: &str) -> Result<AdpTxt, TxtError> {
        parse("a.test", &[s.to_owned()])
    }

    #[test]
    fn a_well_formed_record_parses_and_round_trips() {
        let wk = "https://a.test/.well-known/agent.json";
        let t = one(&render(FP, wk)).unwrap();
        assert_eq!(t.fingerprint, FP);
        assert_eq!(t.well_known, wk);
        let spaced = one(&format!(" v=ADP1 ;PK={FP};  wk = {wk} ; future=1;")).unwrap();
        assert_eq!(spaced.well_known, wk);
        assert_eq!(spaced.extra.get("future").map(String::as_str), Some("1"));
    }

    #[test]
    fn other_txt_records_in_the_rrset_are_skipped() {
        let records = vec![
            "google-site-verification=xyz".to_owned(),
            render(FP, "https://a.test/x"),
        ];
        assert!(parse("a.test", &records).is_ok());
    }

    #[test]
    fn each_defect_has_its_reason() {
        assert_eq!(
            parse("a.test", &[]).unwrap_err().reason().as_str(),
            "txt_missing"
        );
        assert_eq!(
            one("hello world").unwrap_err().reason().as_str(),
            "txt_missing"
        );
        let two = vec![
            render(FP, "https://a.test/1"),
            render(FP, "https://a.test/2"),
        ];
        assert_eq!(
            parse("a.test", &two).unwrap_err().reason().as_str(),
            "txt_multiple"
        );
        assert!(matches!(
            one(&format!("v=ADP2; pk={FP}; wk=https://a.test/")),
            Err(TxtError::UnsupportedVersion { version }) if version == "ADP2"
        ));
        assert_eq!(
            one("v=ADP1; wk=https://a.test/").unwrap_err(),
            TxtError::MissingKey { key: "pk" }
        );
        assert_eq!(
            one(&format!("v=ADP1; pk={FP}")).unwrap_err(),
            TxtError::MissingKey { key: "wk" }
        );
        assert_eq!(
            one("v=ADP1; pk=abc; wk=https://a.test/")
                .unwrap_err()
                .reason(),
            "txt_malformed"
        );
        assert_eq!(
            one(&format!("v=ADP1; pk={FP}; pk={FP}; wk=https://a.test/"))
                .unwrap_err()
                .reason(),
            "txt_malformed"
        );
        let long = format!(
            "v=ADP1; pk={FP}; wk=https://a.test/; pad={}",
            "x".repeat(MAX_RECORD_BYTES)
        );
        assert_eq!(one(&long).unwrap_err().reason().as_str(), "txt_malformed");
        let many = format!(
            "v=ADP1; pk={FP}; wk=https://a.test/;{}",
            (0..40).map(|i| format!("k{i}=1;")).collect::<String>()
        );
        assert_eq!(one(&many).unwrap_err().reason().as_str(), "txt_malformed");
    }
}
