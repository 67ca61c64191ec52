//! A DNSSEC chain carried with a record (docs/protocol.md#dnssec-chains):
//! the signed RRsets from a trust anchor's zone down to the RRset an
//! agent rests on, so that anyone holding the record can check, offline,
//! that DNSSEC proved that RRset when the record was signed.
//!
//! # The bytes
//! RFC 9102's `AuthenticationChain`, for any RRset: a sequence of
//! resource records, each in DNS wire format (RFC 1035 4.1.3) with
//! uncompressed names, nothing between them and nothing after the last.
//! [`encode`] writes the proved RRset and its RRSIGs first, then for each
//! zone on the way up its DNSKEY RRset with its RRSIGs and, below the
//! anchored zone, its DS RRset with its RRSIGs; past the first RRset the
//! order means nothing to [`verify`], which groups records by owner and
//! type. Each record's TTL is written as its RRSIG's original TTL (an
//! RRSIG's its own), so the same signatures give the same bytes.
//!
//! # The check ([`verify`])
//! The RRset of `owner` and `rtype` is proved when an RRSIG at `owner`
//! covering `rtype`, whose signer is `owner` or an ancestor and whose
//! label count is `owner`'s (no wildcard expansion), is inside its
//! validity window at the given time and verifies with a proved key of
//! its signer. A zone's DNSKEY RRset is proved when a key in it signs it
//! (an RRSIG at the zone, signer the zone, in its window) and that key is
//! either a trust anchor of the zone, or matches a DS record of a proved
//! DS RRset at the zone, itself signed by a proper ancestor. Only zone
//! keys that are not revoked count. Nothing else in the chain is read.
//!
//! # Limits
//! At most [`MAX_CHAIN_BYTES`] and [`MAX_CHAIN_RECORDS`] records, at
//! most [`MAX_CHAIN_ZONES`] zones from the RRset's signer to the anchor,
//! and at most [`MAX_SIGNATURE_CHECKS`] signature verifications, so a
//! hostile chain costs a bounded amount of work.

use std::collections::HashMap;

use hickory_proto::dnssec::rdata::{DNSSECRData, DNSKEY, DS, RRSIG};
use hickory_proto::dnssec::Verifier as _;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};

use super::anchors::TrustAnchorSet;

/// The largest chain carried or read.
pub const MAX_CHAIN_BYTES: usize = 8 * 1024;
/// Most records in a chain.
pub const MAX_CHAIN_RECORDS: usize = 64;
/// Most zones from the proved RRset's signer up to the anchored zone.
pub const MAX_CHAIN_ZONES: usize = 8;
/// Most signature verifications one check makes.
pub const MAX_SIGNATURE_CHECKS: usize = 64;

/// Why a chain does not prove its RRset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// Over [`MAX_CHAIN_BYTES`], [`MAX_CHAIN_RECORDS`], or one of the
    /// other bounds.
    #[error("the DNSSEC chain is too large: {0}")]
    TooLarge(String),
    /// Not a sequence of uncompressed wire-format records of class IN.
    #[error("the DNSSEC chain does not parse: {0}")]
    Malformed(String),
    /// The chain holds no such RRset, or it does not prove it.
    #[error("the DNSSEC chain does not prove {owner} {rtype}: {why}")]
    Unproved {
        /// The RRset's owner.
        owner: String,
        /// Its type.
        rtype: String,
        /// What failed first on the best path tried.
        why: String,
    },
}

/// An RRset a chain proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proved {
    /// The RRset's records.
    pub records: Vec<Record>,
    /// The anchored zone the proof starts from.
    pub anchor_zone: Name,
}

impl Proved {
    /// The proved RRset's TXT records, each one's strings joined.
    pub fn txt(&self) -> Vec<String> {
        self.records
            .iter()
            .filter_map(|r| match &r.data {
                RData::TXT(t) => {
                    let bytes: Vec<u8> = t.txt_data.iter().flatten().copied().collect();
                    Some(String::from_utf8_lossy(&bytes).into_owned())
                }
                _ => None,
            })
            .collect()
    }
}

/// `records` as a chain's bytes, TTLs written as their RRSIGs' original
/// TTLs.
///
/// # Errors
/// [`ChainError::TooLarge`] past the limits; [`ChainError::Malformed`]
/// for a record that does not encode.
pub fn encode(records: &[Record]) -> Result<Vec<u8>, ChainError> {
    if records.len() > MAX_CHAIN_RECORDS {
        return Err(ChainError::TooLarge(format!(
            "{} records, more than {MAX_CHAIN_RECORDS}",
            records.len()
        )));
    }
    let mut out = Vec::new();
    for record in records {
        let mut record = record.clone();
        record.ttl = original_ttl(&record, records);
        emit(&record, &mut out)?;
        if out.len() > MAX_CHAIN_BYTES {
            return Err(ChainError::TooLarge(format!(
                "more than {MAX_CHAIN_BYTES} bytes"
            )));
        }
    }
    Ok(out)
}

/// The TTL `record` is written with: an RRSIG's original TTL, its own
/// for an RRSIG.
fn original_ttl(record: &Record, all: &[Record]) -> u32 {
    if let Some(sig) = rrsig(record) {
        return sig.input().original_ttl;
    }
    all.iter()
        .filter_map(|r| rrsig(r).filter(|_| r.name == record.name))
        .find(|sig| sig.input().type_covered == record.record_type())
        .map_or(record.ttl, |sig| sig.input().original_ttl)
}

/// Appends `record` to `out` (a `BinEncoder` writes from the start of
/// its buffer, so each record is written apart).
fn emit(record: &Record, out: &mut Vec<u8>) -> Result<(), ChainError> {
    let mut one = Vec::new();
    let mut encoder = BinEncoder::new(&mut one);
    encoder.set_name_encoding(hickory_proto::serialize::binary::NameEncoding::Uncompressed);
    record
        .emit(&mut encoder)
        .map_err(|e| ChainError::Malformed(e.to_string()))?;
    out.extend_from_slice(&one);
    Ok(())
}

/// The records of a chain's `bytes`, each read back and written again to
/// the same bytes (no compression, nothing left over).
///
/// # Errors
/// [`ChainError`] when the bytes are not such a chain.
pub fn decode(bytes: &[u8]) -> Result<Vec<Record>, ChainError> {
    if bytes.len() > MAX_CHAIN_BYTES {
        return Err(ChainError::TooLarge(format!(
            "{} bytes, more than {MAX_CHAIN_BYTES}",
            bytes.len()
        )));
    }
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if records.len() == MAX_CHAIN_RECORDS {
            return Err(ChainError::TooLarge(format!(
                "more than {MAX_CHAIN_RECORDS} records"
            )));
        }
        let mut decoder = BinDecoder::new(&bytes[at..]);
        let record = Record::read(&mut decoder)
            .map_err(|e| ChainError::Malformed(format!("record {}: {e}", records.len())))?;
        let end = at + decoder.index();
        let mut again = Vec::new();
        emit(&record, &mut again)?;
        if again != bytes[at..end] {
            return Err(ChainError::Malformed(format!(
                "record {} is not in uncompressed wire form",
                records.len()
            )));
        }
        if record.dns_class != DNSClass::IN {
            return Err(ChainError::Malformed(format!(
                "record {} is of class {}, not IN",
                records.len(),
                record.dns_class
            )));
        }
        records.push(record);
        at = end;
    }
    Ok(records)
}

/// Checks that the chain `bytes` proves the `rtype` RRset at `owner` from
/// one of `anchors`, every signature inside its window at `at` (Unix
/// seconds).
///
/// # Errors
/// [`ChainError`]: the bytes do not parse, or the RRset is not proved.
pub fn verify(
    bytes: &[u8],
    anchors: &TrustAnchorSet,
    owner: &Name,
    rtype: RecordType,
    at: u64,
) -> Result<Proved, ChainError> {
    verify_from(bytes, Some(anchors), owner, rtype, at)
}

/// As [`verify`], taking as anchored any zone of the chain that has no
/// DS record in it: whether the chain holds together, whoever's key it
/// starts from ([`Proved::anchor_zone`] says which zone's). A checker
/// that lacks the anchor tells this (a chain it cannot judge) from a
/// chain that proves nothing.
///
/// # Errors
/// As [`verify`].
pub fn verify_self_anchored(
    bytes: &[u8],
    owner: &Name,
    rtype: RecordType,
    at: u64,
) -> Result<Proved, ChainError> {
    verify_from(bytes, None, owner, rtype, at)
}

fn verify_from(
    bytes: &[u8],
    anchors: Option<&TrustAnchorSet>,
    owner: &Name,
    rtype: RecordType,
    at: u64,
) -> Result<Proved, ChainError> {
    let records = decode(bytes)?;
    let mut check = Check {
        records: &records,
        anchors,
        at: u32::try_from(at).unwrap_or(u32::MAX),
        checks: 0,
        keys: HashMap::new(),
    };
    let owner = owner.to_lowercase();
    match check.rrset(&owner, rtype, 0) {
        Ok(anchor_zone) => Ok(Proved {
            records: check
                .rrset_records(&owner, rtype)
                .into_iter()
                .cloned()
                .collect(),
            anchor_zone,
        }),
        Err(why) => Err(ChainError::Unproved {
            owner: owner.to_ascii(),
            rtype: rtype.to_string(),
            why,
        }),
    }
}

/// One check's state: the records, what is proved so far, the work done.
struct Check<'a> {
    records: &'a [Record],
    /// `None`: any zone without a DS record in the chain is anchored.
    anchors: Option<&'a TrustAnchorSet>,
    at: u32,
    checks: usize,
    /// Each zone's proved keys and the anchored zone they rest on, or why
    /// they are not proved.
    keys: HashMap<Name, Result<(Vec<DNSKEY>, Name), String>>,
}

impl<'a> Check<'a> {
    fn rrset_records(&self, owner: &Name, rtype: RecordType) -> Vec<&'a Record> {
        let records: &'a [Record] = self.records;
        records
            .iter()
            .filter(|r| r.record_type() == rtype && &r.name == owner)
            .collect()
    }

    fn signatures(&self, owner: &Name, rtype: RecordType) -> Vec<&'a RRSIG> {
        let records: &'a [Record] = self.records;
        records
            .iter()
            .filter(|r| &r.name == owner)
            .filter_map(rrsig)
            .filter(|s| s.input().type_covered == rtype)
            .collect()
    }

    /// Proves the `rtype` RRset at `owner` (`depth` zones above the first
    /// signer); the anchored zone it rests on.
    fn rrset(&mut self, owner: &Name, rtype: RecordType, depth: usize) -> Result<Name, String> {
        let rrset = self.rrset_records(owner, rtype);
        if rrset.is_empty() {
            return Err("the chain holds no such RRset".into());
        }
        let mut why = format!("no RRSIG covers the {rtype} RRset");
        for sig in self.signatures(owner, rtype) {
            let signer = sig.input().signer_name.to_lowercase();
            if !signer.zone_of(owner) || (rtype == RecordType::DS && &signer == owner) {
                why = format!("an RRSIG by {signer}, which is not a zone above {owner}");
                continue;
            }
            if usize::from(sig.input().num_labels) != usize::from(owner.num_labels()) {
                why = "a wildcard expansion (not carried)".into();
                continue;
            }
            if !in_window(sig, self.at) {
                why = format!("an RRSIG by {signer} outside its validity window");
                continue;
            }
            let keys = match self.keys(&signer, depth) {
                Ok((keys, anchor)) => (keys, anchor),
                Err(e) => {
                    why = format!("the keys of {signer}: {e}");
                    continue;
                }
            };
            match self.signed_by(owner, sig, &rrset, &keys.0) {
                Ok(()) => return Ok(keys.1),
                Err(e) => why = e,
            }
        }
        Err(why)
    }

    /// Whether one of `keys` made `sig` over `rrset`.
    fn signed_by(
        &mut self,
        owner: &Name,
        sig: &RRSIG,
        rrset: &[&Record],
        keys: &[DNSKEY],
    ) -> Result<(), String> {
        for key in keys {
            if key.algorithm() != sig.input().algorithm
                || key.calculate_key_tag().ok() != Some(sig.input().key_tag)
            {
                continue;
            }
            if self.checks == MAX_SIGNATURE_CHECKS {
                return Err(format!(
                    "more than {MAX_SIGNATURE_CHECKS} signatures to check"
                ));
            }
            self.checks += 1;
            if key
                .verify_rrsig(owner, DNSClass::IN, sig, rrset.iter().copied())
                .is_ok()
            {
                return Ok(());
            }
        }
        Err(format!(
            "no key of {} with tag {} verifies the signature",
            sig.input().signer_name,
            sig.input().key_tag
        ))
    }

    /// The proved keys of `zone` and the anchored zone they rest on.
    fn keys(&mut self, zone: &Name, depth: usize) -> Result<(Vec<DNSKEY>, Name), String> {
        if let Some(known) = self.keys.get(zone) {
            return known.clone();
        }
        let found = self.prove_keys(zone, depth);
        self.keys.insert(zone.clone(), found.clone());
        found
    }

    fn prove_keys(&mut self, zone: &Name, depth: usize) -> Result<(Vec<DNSKEY>, Name), String> {
        if depth >= MAX_CHAIN_ZONES {
            return Err(format!("more than {MAX_CHAIN_ZONES} zones above the RRset"));
        }
        let rrset = self.rrset_records(zone, RecordType::DNSKEY);
        let keys: Vec<DNSKEY> = rrset
            .iter()
            .filter_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::DNSKEY(k)) if k.zone_key() && !k.revoke() => {
                    Some(k.clone())
                }
                _ => None,
            })
            .collect();
        if keys.is_empty() {
            return Err("the chain holds no DNSKEY RRset".into());
        }
        let anchored: Vec<DNSKEY> = match self.anchors {
            Some(anchors) => keys
                .iter()
                .filter(|k| anchors.for_zone(zone).any(|a| a.matches(k)))
                .cloned()
                .collect(),
            None if self.rrset_records(zone, RecordType::DS).is_empty() => keys.clone(),
            None => Vec::new(),
        };
        let mut why = String::from("no trust anchor for the zone, and no DS record for it");
        if !anchored.is_empty() {
            match self.self_signed(zone, &rrset, &anchored) {
                Ok(()) => return Ok((keys, zone.clone())),
                Err(e) => why = format!("not signed by its trust anchor: {e}"),
            }
        }
        if zone.is_root() || self.rrset_records(zone, RecordType::DS).is_empty() {
            return Err(why);
        }
        let anchor = self
            .rrset(zone, RecordType::DS, depth + 1)
            .map_err(|e| format!("its DS RRset: {e}"))?;
        let delegated: Vec<DNSKEY> = keys
            .iter()
            .filter(|k| {
                self.rrset_records(zone, RecordType::DS)
                    .iter()
                    .filter_map(|r| ds(r))
                    .any(|d| {
                        d.algorithm() == k.algorithm()
                            && k.calculate_key_tag().ok() == Some(d.key_tag())
                            && d.covers(zone, k).unwrap_or(false)
                    })
            })
            .cloned()
            .collect();
        if delegated.is_empty() {
            return Err("no key matches a DS record of the zone".into());
        }
        self.self_signed(zone, &rrset, &delegated)
            .map(|()| (keys, anchor))
            .map_err(|e| format!("not signed by a key its DS names: {e}"))
    }

    /// Whether one of `signers` signed `zone`'s DNSKEY RRset.
    fn self_signed(
        &mut self,
        zone: &Name,
        rrset: &[&Record],
        signers: &[DNSKEY],
    ) -> Result<(), String> {
        let mut why = String::from("no RRSIG by the zone over its DNSKEY RRset");
        for sig in self.signatures(zone, RecordType::DNSKEY) {
            if &sig.input().signer_name.to_lowercase() != zone {
                continue;
            }
            if !in_window(sig, self.at) {
                why = "its RRSIG is outside its validity window".into();
                continue;
            }
            match self.signed_by(zone, sig, rrset, signers) {
                Ok(()) => return Ok(()),
                Err(e) => why = e,
            }
        }
        Err(why)
    }
}

fn rrsig(record: &Record) -> Option<&RRSIG> {
    match &record.data {
        RData::DNSSEC(DNSSECRData::RRSIG(sig)) => Some(sig),
        _ => None,
    }
}

fn ds(record: &Record) -> Option<&DS> {
    match &record.data {
        RData::DNSSEC(DNSSECRData::DS(d)) => Some(d),
        _ => None,
    }
}

/// Whether `now` is inside `sig`'s validity window (RFC 4034 3.1.5:
/// serial number arithmetic).
pub fn in_window(sig: &RRSIG, now: u32) -> bool {
    expires_in(sig, now).is_some()
}

/// Seconds until `sig` expires, when `now` is inside its validity window.
pub fn expires_in(sig: &RRSIG, now: u32) -> Option<u32> {
    let inception = sig.input().sig_inception.get();
    let expiration = sig.input().sig_expiration.get();
    let since = now.wrapping_sub(inception);
    let until = expiration.wrapping_sub(now);
    (since < 1 << 31 && until < 1 << 31).then_some(until)
}

#[cfg(test)]
mod tests;
