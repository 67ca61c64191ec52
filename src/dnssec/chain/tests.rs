//! Chains signed here with hickory's signer: a parent `test.` anchored by
//! its key, a child `org.test.` delegated by a DS record, the agent's TXT
//! RRset in the child; and every way a chain can fail to prove it.

use hickory_proto::dnssec::crypto::EcdsaSigningKey;
use hickory_proto::dnssec::rdata::{DNSSECRData, SigInput, DNSKEY, DS, RRSIG};
use hickory_proto::dnssec::{Algorithm, DigestType, DnssecSigner, SigningKey, TBS};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber};

use super::*;

/// 2026-01-01T00:00:00Z, inside every signature's window below.
const NOW: u64 = 1_767_225_600;
const TTL: u32 = 300;

fn name(text: &str) -> Name {
    Name::from_ascii(text).unwrap()
}

struct ZoneKey {
    zone: Name,
    signer: DnssecSigner,
}

impl ZoneKey {
    fn new(zone: &str) -> Self {
        let algorithm = Algorithm::ECDSAP256SHA256;
        let pkcs8 = EcdsaSigningKey::generate_pkcs8(algorithm).unwrap();
        let key = EcdsaSigningKey::from_pkcs8(&pkcs8, algorithm).unwrap();
        let dnskey = DNSKEY::new(true, true, false, key.to_public_key().unwrap());
        let zone = name(zone);
        let signer = DnssecSigner::new(
            dnskey,
            Box::new(key),
            zone.clone(),
            std::time::Duration::from_secs(86_400),
        );
        Self { zone, signer }
    }

    fn dnskey(&self) -> &DNSKEY {
        self.signer.dnskey()
    }

    fn dnskey_record(&self) -> Record {
        Record::from_rdata(
            self.zone.clone(),
            TTL,
            RData::DNSSEC(DNSSECRData::DNSKEY(self.dnskey().clone())),
        )
    }

    fn ds_record(&self) -> Record {
        let key = self.dnskey();
        let digest = key.to_digest(&self.zone, DigestType::SHA256).unwrap();
        let ds = DS::new(
            key.calculate_key_tag().unwrap(),
            key.algorithm(),
            DigestType::SHA256,
            digest.as_ref().to_vec(),
        );
        Record::from_rdata(self.zone.clone(), TTL, RData::DNSSEC(DNSSECRData::DS(ds)))
    }

    /// An RRSIG by this key over `rrset`, valid `window` around [`NOW`].
    fn sign_in(&self, rrset: &[Record], window: (u64, u64)) -> Record {
        let first = &rrset[0];
        let input = SigInput {
            type_covered: first.record_type(),
            algorithm: self.signer.key().algorithm(),
            num_labels: first.name.num_labels(),
            original_ttl: first.ttl,
            sig_expiration: SerialNumber::new(u32::try_from(window.1).unwrap()),
            sig_inception: SerialNumber::new(u32::try_from(window.0).unwrap()),
            key_tag: self.signer.calculate_key_tag().unwrap(),
            signer_name: self.zone.clone(),
        };
        let tbs = TBS::from_input(&first.name, DNSClass::IN, &input, rrset.iter()).unwrap();
        let sig = self.signer.sign(&tbs).unwrap();
        Record::from_rdata(
            first.name.clone(),
            first.ttl,
            RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(input, sig))),
        )
    }

    fn sign(&self, rrset: &[Record]) -> Record {
        self.sign_in(rrset, (NOW - 3600, NOW + 86_400))
    }

    /// This key as the only trust anchor.
    fn anchor(&self) -> TrustAnchorSet {
        let text = format!(
            "{} {TTL} IN DNSKEY {}\n",
            self.zone.to_ascii(),
            self.dnskey()
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("anchor.key");
        std::fs::write(&file, text).unwrap();
        TrustAnchorSet::load(&[file]).unwrap()
    }
}

fn txt(owner: &str, text: &str) -> Record {
    Record::from_rdata(name(owner), TTL, RData::TXT(TXT::new(vec![text.into()])))
}

const OWNER: &str = "_agent.org.test.";
const RECORD: &str = "v=ADP1; pk=ed25519:00; wk=https://org.test/.well-known/agent.json";

/// The parent, the child, and the child's chain to the parent's key.
fn two_zones() -> (ZoneKey, ZoneKey, Vec<Record>) {
    let (parent, child) = (ZoneKey::new("test."), ZoneKey::new("org.test."));
    let rrset = vec![txt(OWNER, RECORD)];
    let child_keys = vec![child.dnskey_record()];
    let ds = vec![child.ds_record()];
    let parent_keys = vec![parent.dnskey_record()];
    let mut chain = rrset.clone();
    chain.push(child.sign(&rrset));
    chain.extend(child_keys.clone());
    chain.push(child.sign(&child_keys));
    chain.extend(ds.clone());
    chain.push(parent.sign(&ds));
    chain.extend(parent_keys.clone());
    chain.push(parent.sign(&parent_keys));
    (parent, child, chain)
}

fn verify_with(chain: &[Record], anchors: &TrustAnchorSet) -> Result<Proved, ChainError> {
    let bytes = encode(chain).unwrap();
    verify(&bytes, anchors, &name(OWNER), RecordType::TXT, NOW)
}

#[test]
fn a_chain_through_a_delegation_proves_the_rrset_from_the_parents_anchor() {
    let (parent, child, chain) = two_zones();
    let proved = verify_with(&chain, &parent.anchor()).unwrap();
    assert_eq!(proved.txt(), vec![RECORD.to_owned()]);
    assert_eq!(proved.anchor_zone, name("test."));
    // An island of trust: the child's own key as the anchor.
    let proved = verify_with(&chain, &child.anchor()).unwrap();
    assert_eq!(proved.anchor_zone, name("org.test."));
    // The bytes read back to the same records.
    let bytes = encode(&chain).unwrap();
    assert_eq!(decode(&bytes).unwrap().len(), chain.len());
}

#[test]
fn a_chain_from_an_anchor_the_checker_does_not_hold_proves_nothing() {
    let (_, _, chain) = two_zones();
    let stranger = ZoneKey::new("test.").anchor();
    let e = verify_with(&chain, &stranger).unwrap_err();
    assert!(matches!(e, ChainError::Unproved { .. }), "{e}");
    // Nor does the root's built-in anchor, which signs none of it.
    verify_with(&chain, &TrustAnchorSet::builtin_root()).unwrap_err();
}

#[test]
fn a_changed_record_or_a_missing_link_is_unproved() {
    let (parent, _, chain) = two_zones();
    let anchors = parent.anchor();
    // The TXT record changed after signing.
    let mut changed = chain.clone();
    changed[0] = txt(OWNER, &RECORD.replace("pk=ed25519:00", "pk=ed25519:01"));
    verify_with(&changed, &anchors).unwrap_err();
    // Each link removed in turn: the RRset's RRSIG, the child's keys or
    // their RRSIG, the DS or its RRSIG, the parent's keys or their RRSIG.
    for drop in 1..chain.len() {
        let mut cut = chain.clone();
        cut.remove(drop);
        assert!(
            verify_with(&cut, &anchors).is_err(),
            "record {drop} removed"
        );
    }
    // Another name asked of the same chain.
    let bytes = encode(&chain).unwrap();
    verify(
        &bytes,
        &anchors,
        &name("_agent.other.test."),
        RecordType::TXT,
        NOW,
    )
    .unwrap_err();
}

#[test]
fn a_ds_for_another_key_or_a_ds_signed_by_the_child_is_unproved() {
    let (parent, child, chain) = two_zones();
    let anchors = parent.anchor();
    // The DS names a key the child does not publish.
    let other = ZoneKey::new("org.test.");
    let ds = vec![other.ds_record()];
    let mut swapped: Vec<Record> = chain
        .iter()
        .filter(|r| r.record_type() != RecordType::DS && !covers(r, RecordType::DS))
        .cloned()
        .collect();
    swapped.extend(ds.clone());
    swapped.push(parent.sign(&ds));
    verify_with(&swapped, &anchors).unwrap_err();
    // The child signing its own DS proves nothing.
    let ds = vec![child.ds_record()];
    let mut self_signed: Vec<Record> = chain
        .iter()
        .filter(|r| !covers(r, RecordType::DS))
        .cloned()
        .collect();
    self_signed.push(child.sign(&ds));
    verify_with(&self_signed, &anchors).unwrap_err();
}

fn covers(record: &Record, rtype: RecordType) -> bool {
    rrsig(record).is_some_and(|s| s.input().type_covered == rtype)
}

#[test]
fn signatures_count_only_inside_their_window_at_the_time_asked() {
    let (parent, child, _) = two_zones();
    let anchors = child.anchor();
    let rrset = vec![txt(OWNER, RECORD)];
    let keys = vec![child.dnskey_record()];
    let chain = |window| {
        let mut c = rrset.clone();
        c.push(child.sign_in(&rrset, window));
        c.extend(keys.clone());
        c.push(child.sign_in(&keys, (NOW - 10_000, NOW + 86_400)));
        encode(&c).unwrap()
    };
    let owner = name(OWNER);
    let expired = chain((NOW - 7200, NOW - 3600));
    verify(&expired, &anchors, &owner, RecordType::TXT, NOW).unwrap_err();
    // The same chain checked at a time inside its window proves it.
    verify(&expired, &anchors, &owner, RecordType::TXT, NOW - 5000).unwrap();
    let future = chain((NOW + 3600, NOW + 7200));
    verify(&future, &anchors, &owner, RecordType::TXT, NOW).unwrap_err();
    let _ = parent;
}

#[test]
fn a_signature_counts_only_inside_its_window() {
    let sig = |inception: u32, expiration: u32| {
        RRSIG::from_sig(
            SigInput {
                type_covered: RecordType::DNSKEY,
                algorithm: Algorithm::ECDSAP256SHA256,
                num_labels: 0,
                original_ttl: 300,
                sig_expiration: SerialNumber::new(expiration),
                sig_inception: SerialNumber::new(inception),
                key_tag: 1,
                signer_name: Name::root(),
            },
            vec![0; 64],
        )
    };
    assert_eq!(expires_in(&sig(100, 200), 150), Some(50));
    assert_eq!(expires_in(&sig(100, 200), 99), None, "not yet valid");
    assert_eq!(expires_in(&sig(100, 200), 201), None, "expired");
    // Serial arithmetic across the 32-bit wrap.
    assert_eq!(expires_in(&sig(u32::MAX - 10, 20), 5), Some(15));
}

#[test]
fn bytes_that_are_not_a_chain_are_refused_with_the_reason() {
    let (parent, _, chain) = two_zones();
    let anchors = parent.anchor();
    let bytes = encode(&chain).unwrap();
    let owner = name(OWNER);
    // Cut inside a record.
    let e = verify(
        &bytes[..bytes.len() - 3],
        &anchors,
        &owner,
        RecordType::TXT,
        NOW,
    );
    assert!(matches!(e, Err(ChainError::Malformed(_))), "{e:?}");
    // Too large, before anything is parsed.
    let big = vec![0u8; MAX_CHAIN_BYTES + 1];
    assert!(matches!(decode(&big), Err(ChainError::TooLarge(_))));
    // Too many records.
    let many: Vec<Record> = (0..=MAX_CHAIN_RECORDS)
        .map(|i| txt(OWNER, &format!("{i}")))
        .collect();
    assert!(matches!(encode(&many), Err(ChainError::TooLarge(_))));
    let mut bytes = Vec::new();
    for r in &many {
        emit(r, &mut bytes).unwrap();
    }
    assert!(matches!(decode(&bytes), Err(ChainError::TooLarge(_))));
    // A compressed name (a pointer back to the first owner) is not the
    // uncompressed form.
    let mut first = Vec::new();
    emit(&chain[0], &mut first).unwrap();
    let mut pointer = first.clone();
    pointer.extend_from_slice(&[0xC0, 0x00]);
    pointer.extend_from_slice(&first[OWNER.len() + 1..]);
    let e = decode(&pointer).unwrap_err();
    assert!(matches!(e, ChainError::Malformed(_)), "{e}");
    // Empty: no RRset to prove.
    verify(&[], &anchors, &owner, RecordType::TXT, NOW).unwrap_err();
}

#[test]
fn the_same_signatures_give_the_same_bytes_whatever_the_ttls_left() {
    let (_, _, chain) = two_zones();
    let mut aged = chain.clone();
    for r in &mut aged {
        r.ttl = 17;
    }
    assert_eq!(encode(&chain).unwrap(), encode(&aged).unwrap());
}

#[test]
fn the_root_anchors_docs_answers_md_names_are_the_ones_hickory_ships() {
    let docs = include_str!("../../../docs/answers.md");
    for anchor in TrustAnchorSet::builtin_root().anchors() {
        let crate::dnssec::anchors::AnchorKey::Dnskey(key) = &anchor.key else {
            panic!("the built-in anchors are keys");
        };
        let digest = key.to_digest(&Name::root(), DigestType::SHA256).unwrap();
        let ds = format!(
            ". IN DS {} {} 2\n     {}",
            key.calculate_key_tag().unwrap(),
            u8::from(key.algorithm()),
            hex::encode_upper(digest.as_ref())
        );
        let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat(docs).contains(&flat(&ds)), "{ds}");
    }
}
