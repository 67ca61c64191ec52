//! Compact records: what a search result shows of an agent, kept apart
//! from the signed record that only `GET /agents/{id}`, the mesh and the
//! resolver need. A search page reads one small value per result (a few
//! hundred bytes) instead of decoding a whole signed record (kilobytes:
//! the original document rides in it).
//!
//! The `compact` tree maps an agent's ordinal (see `store/postings.rs`) to
//! one kind byte, the record's seq (8 bytes, big-endian: what the issuer
//! reads before it signs the next record) and, for a live descriptor, the
//! CBOR of [`CompactAgent`]; a tombstone keeps only the agent id. The
//! store writes it in the same transaction as the record, so the two
//! never disagree.

use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::stored::{KIND_DESCRIPTOR, KIND_TOMBSTONE};
use crate::descriptor::DocumentFormat;
use crate::record::{DescriptorRecord, SignedRecord};
use crate::trust::{EvidenceFlags, TrustLevel};

/// What a search result shows of a live agent, as the store keeps it
/// beside the signed record (short CBOR keys: it is stored a million
/// times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactAgent {
    /// Agent id.
    #[serde(rename = "i")]
    pub id: String,
    /// The record's seq.
    #[serde(rename = "q")]
    pub seq: u64,
    /// When the record expires (unix seconds).
    #[serde(rename = "x")]
    pub expires_at: u64,
    /// Name.
    #[serde(rename = "n")]
    pub name: String,
    /// Description.
    #[serde(rename = "d")]
    pub description: String,
    /// Invocation endpoint.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Normalised capability ids.
    #[serde(rename = "c")]
    pub capabilities: Vec<String>,
    /// The trust level this node counts: what the record's evidence
    /// proves, or `unverified` when that evidence is only claimed.
    #[serde(rename = "l")]
    pub level: TrustLevel,
    /// The evidence flags this node counts (none when claimed).
    #[serde(rename = "f")]
    pub evidence: EvidenceFlags,
    /// What the record's signer claims, when this node neither proved
    /// it nor trusts the signer (`store::Origin::Claimed`): shown, never
    /// counted.
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    pub claimed: Option<Claimed>,
    /// The raw Ed25519 key that signed the record (the attesting node).
    #[serde(rename = "s", with = "serde_bytes")]
    pub signer: Vec<u8>,
    /// Whether the agent was registered through this node's API.
    #[serde(rename = "o")]
    pub local: bool,
    /// The format of the agent's document (absent in compact records
    /// written before there were more than two: see
    /// [`CompactAgent::source_format`]).
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DocumentFormat>,
    /// The agent's declared status (`online`, `offline`, `maintenance`),
    /// when its document says (absent in compact records written before
    /// it was kept).
    #[serde(rename = "a", default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Tags, as declared: with the capabilities and languages, the terms
    /// the store's filter posting lists are loaded from at open (absent in
    /// compact records written before layout version 3, which the
    /// migration rewrites).
    #[serde(rename = "g", default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Languages, as declared.
    #[serde(rename = "u", default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
}

/// The evidence a record's signer claims, as a compact record keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    /// The level the claimed evidence would prove.
    #[serde(rename = "l")]
    pub level: TrustLevel,
    /// The claimed evidence flags.
    #[serde(rename = "f")]
    pub evidence: EvidenceFlags,
}

impl CompactAgent {
    /// The compact form of a stored descriptor record; `local` as the
    /// store's `local` tree says; `claimed` when its evidence is a claim
    /// this node does not count.
    pub fn of(record: &SignedRecord, body: &DescriptorRecord, local: bool, claimed: bool) -> Self {
        let d = &body.descriptor;
        let (level, evidence, claim) = if claimed {
            (
                TrustLevel::Unverified,
                EvidenceFlags::default(),
                Some(Claimed {
                    level: body.evidence.level(),
                    evidence: EvidenceFlags::from(&body.evidence),
                }),
            )
        } else {
            (
                body.evidence.level(),
                EvidenceFlags::from(&body.evidence),
                None,
            )
        };
        Self {
            id: body.agent_id.clone(),
            seq: body.seq,
            expires_at: body.expires_at,
            name: d.name.clone(),
            description: d.description.clone(),
            endpoint: d.endpoint.clone(),
            capabilities: d.capabilities.clone(),
            level,
            evidence,
            claimed: claim,
            signer: record.signer().as_bytes().to_vec(),
            local,
            format: Some(d.format),
            status: d.status.clone(),
            tags: d.tags.clone(),
            languages: d.languages.clone(),
        }
    }

    /// The format of the agent's document.
    pub fn source_format(&self) -> DocumentFormat {
        self.format
            .unwrap_or_else(|| DocumentFormat::of_legacy_id(&self.id))
    }
}

/// The stored value of a live descriptor.
pub(super) fn encode_live(agent: &CompactAgent) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.push(KIND_DESCRIPTOR);
    out.extend_from_slice(&agent.seq.to_be_bytes());
    ciborium::into_writer(agent, &mut out)
        .expect("a CompactAgent (strings, numbers, bytes) always encodes to a Vec");
    out
}

/// The stored value of a tombstone: its seq and the agent id.
pub(super) fn encode_tombstone(id: &str, seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + id.len());
    out.push(KIND_TOMBSTONE);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(id.as_bytes());
    out
}

/// The seq of a stored compact value (a descriptor's or a tombstone's),
/// without decoding the rest.
///
/// # Errors
/// [`StoreError::Corrupt`] naming `key` when the value is too short.
pub(super) fn seq_of(key: &str, bytes: &[u8]) -> Result<u64, StoreError> {
    bytes
        .get(1..9)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::Corrupt {
            key: key.to_owned(),
            reason: format!("a compact record of {} bytes", bytes.len()),
        })
}

/// A stored compact value: `Some` for a live descriptor, `None` for a
/// tombstone.
///
/// # Errors
/// [`StoreError::Corrupt`] naming `key` when the value does not decode.
pub(super) fn decode(key: &str, bytes: &[u8]) -> Result<Option<CompactAgent>, StoreError> {
    decode_as(key, bytes)
}

/// What the filter posting lists are loaded from: a live compact record's
/// capabilities, tags, languages and trust level, read without the rest
/// (its other strings are skipped, not copied).
#[derive(Debug, Deserialize)]
pub(super) struct Filed {
    #[serde(rename = "c")]
    pub capabilities: Vec<String>,
    #[serde(rename = "g", default)]
    pub tags: Vec<String>,
    #[serde(rename = "u", default)]
    pub languages: Vec<String>,
    #[serde(rename = "l")]
    pub level: TrustLevel,
    #[serde(rename = "s", with = "serde_bytes")]
    pub signer: Vec<u8>,
    /// Present when the record's evidence is only claimed.
    #[serde(rename = "k", default)]
    pub claimed: Option<serde::de::IgnoredAny>,
}

impl Filed {
    /// The signer of a claimed record (`None` for a counted one).
    pub(super) fn claimant(&self) -> Option<[u8; 32]> {
        self.claimed.as_ref()?;
        <[u8; 32]>::try_from(self.signer.as_slice()).ok()
    }
}

/// As [`decode`], into `T`: the whole [`CompactAgent`] or a part of it.
pub(super) fn decode_as<T: serde::de::DeserializeOwned>(
    key: &str,
    bytes: &[u8],
) -> Result<Option<T>, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        key: key.to_owned(),
        reason,
    };
    match (bytes.first(), bytes.get(9..)) {
        (Some(&KIND_DESCRIPTOR), Some(rest)) => ciborium::from_reader(rest)
            .map(Some)
            .map_err(|e| corrupt(format!("compact record: {e}"))),
        (Some(&KIND_TOMBSTONE), Some(_)) => Ok(None),
        (Some(kind), Some(_)) => Err(corrupt(format!("compact record of unknown kind {kind}"))),
        _ => Err(corrupt(format!(
            "a compact record of {} bytes",
            bytes.len()
        ))),
    }
}

/// A compact record for tests: key-verified, local, with a tag and two
/// languages.
#[cfg(test)]
pub(super) fn sample() -> CompactAgent {
    CompactAgent {
        id: "agent:a.test".into(),
        seq: 7,
        expires_at: 1_900_000_000,
        name: "A".into(),
        description: "Translates legal text".into(),
        endpoint: Some("https://a.test/chat".into()),
        capabilities: vec!["translation".into()],
        level: TrustLevel::KeyVerified,
        evidence: EvidenceFlags {
            fingerprint: true,
            challenge: true,
            ..EvidenceFlags::default()
        },
        claimed: None,
        signer: vec![9; 32],
        local: true,
        format: Some(DocumentFormat::Adp),
        status: Some("online".into()),
        tags: vec!["legal".into()],
        languages: vec!["en-GB".into(), "fr".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_record_written_before_formats_reads_its_format_from_its_id() {
        let mut old = sample();
        old.format = None;
        let mut bytes = Vec::new();
        ciborium::into_writer(&old, &mut bytes).unwrap();
        let back: CompactAgent = ciborium::from_reader(&bytes[..]).unwrap();
        assert_eq!(back.format, None);
        assert_eq!(back.source_format(), DocumentFormat::Adp);
        old.id = "agent-12345".into();
        assert_eq!(old.source_format(), DocumentFormat::Aidip);
        let mut a2a = sample();
        a2a.id = "a2a:a.test".into();
        a2a.format = Some(DocumentFormat::A2a);
        assert_eq!(a2a.source_format(), DocumentFormat::A2a);
    }

    #[test]
    fn a_compact_record_round_trips_and_a_tombstone_keeps_only_its_seq() {
        let a = sample();
        let bytes = encode_live(&a);
        assert_eq!(seq_of("k", &bytes).unwrap(), 7);
        assert_eq!(decode("k", &bytes).unwrap(), Some(a));
        let tomb = encode_tombstone("agent:a.test", 8);
        assert_eq!(decode("k", &tomb).unwrap(), None);
        assert_eq!(seq_of("k", &tomb).unwrap(), 8);
    }

    #[test]
    fn a_damaged_compact_record_is_reported_as_corrupt_with_its_key() {
        let mut bytes = encode_live(&sample());
        bytes.truncate(bytes.len() / 2);
        assert!(seq_of("agent:a.test", &bytes[..5]).is_err());
        for bad in [&bytes[..], &[][..], &[b'?', 1, 2][..], &[b'?'; 12][..]] {
            match decode("agent:a.test", bad) {
                Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, "agent:a.test"),
                other => panic!("expected Corrupt, got {other:?}"),
            }
        }
    }
}
