//! Tests of the [`Judge`]: evidence re-checked and attesters trusted or
//! not, forged evidence refused and counted, who may tombstone an agent,
//! and what a node keeps of what it looked up or already holds.

use super::*;
use crate::identity;
use crate::record::{TombstoneRecord, Transfer};
use crate::testbed::{Population, Ports};
use crate::trust::{ChallengeProof, Evidence, TrustLevel};
use ed25519_dalek::SigningKey;

mod dnssec;
mod hostile;
mod liveness;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    own: SigningKey,
    friend: SigningKey,
    stranger: SigningKey,
    agent_key: SigningKey,
    agent_id: String,
    document: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let population = Population::healthy(9, 1);
    let agent = &population.agents()[0];
    let doc = population.document(
        agent,
        Ports {
            https: 443,
            http: 80,
        },
    );
    Fixture {
        store,
        _dir: dir,
        own: SigningKey::from_bytes(&[1; 32]),
        friend: SigningKey::from_bytes(&[2; 32]),
        stranger: SigningKey::from_bytes(&[3; 32]),
        agent_key: agent.key.clone(),
        agent_id: agent.id(),
        document: serde_json::to_string(&doc).unwrap(),
    }
}

impl Fixture {
    fn judge(&self) -> Judge {
        Judge::new(
            self.store.clone(),
            self.own.verifying_key(),
            [self.friend.verifying_key()],
        )
    }

    /// A key-verified descriptor as a crawler would sign it.
    fn descriptor(
        &self,
        signer: &SigningKey,
        seq: u64,
        proof_key: &SigningKey,
    ) -> DescriptorRecord {
        self.descriptor_of(&self.document, signer, seq, proof_key)
    }

    /// As [`Fixture::descriptor`], of the document `text`.
    fn descriptor_of(
        &self,
        text: &str,
        signer: &SigningKey,
        seq: u64,
        proof_key: &SigningKey,
    ) -> DescriptorRecord {
        let doc: AgentDocument = serde_json::from_str(text).unwrap();
        let mut body = DescriptorRecord::new(
            doc.to_descriptor(),
            text.to_owned(),
            seq,
            record::unix_now(),
            3600,
            Evidence::default(),
        );
        let (verifier, unix_ms, rand) = ("crawler-node".to_owned(), 1_700_000_000_000, [7u8; 16]);
        let nonce = handshake::nonce(&body.doc_sha256, &verifier, unix_ms, &rand);
        let frame = handshake::challenge(&verifier, &signer.verifying_key(), &nonce);
        let answer = handshake::answer(&frame, &self.agent_id, proof_key);
        let signature = identity::decode_bytes(answer.signature.as_deref().unwrap()).unwrap();
        body.evidence = Evidence {
            fingerprint: true,
            challenge: Some(ChallengeProof {
                verifier,
                unix_ms,
                rand: rand.to_vec(),
                signature,
            }),
            ..Evidence::default()
        };
        body
    }

    fn domain(&self) -> String {
        self.agent_id.strip_prefix("agent:").unwrap().to_owned()
    }

    /// The agent's document with `key` in place of the agent's own: what
    /// an impersonator publishes, or gossips without publishing.
    fn forged_document(&self, key: &SigningKey) -> String {
        let mut doc: AgentDocument = serde_json::from_str(&self.document).unwrap();
        doc.identity.public_key.fingerprint = identity::fingerprint(&key.verifying_key());
        doc.identity.public_key.full = Some(identity::encode_public_key(&key.verifying_key()));
        doc.identity.previous_fingerprint = None;
        serde_json::to_string(&doc).unwrap()
    }

    /// An AIDIP registration of `id`, at `seq`, valid for an hour.
    fn registration(&self, id: &str, seq: u64, endpoint: &str) -> DescriptorRecord {
        let mut d = crate::record::tests::sample_descriptor(id);
        d.endpoint = Some(endpoint.into());
        DescriptorRecord::new(
            d,
            format!("{{\"endpoint\":{endpoint:?}}}"),
            seq,
            record::unix_now(),
            3600,
            Evidence::default(),
        )
    }

    fn signed(&self, body: &DescriptorRecord, signer: &SigningKey) -> Vec<u8> {
        SignedRecord::sign_descriptor(body, signer)
            .unwrap()
            .encode()
    }

    fn tombstone(&self, seq: u64, signer: &SigningKey) -> Vec<u8> {
        self.tombstone_of(
            &self.agent_id,
            seq,
            signer,
            record::TombstoneReason::Revoked,
        )
    }

    fn tombstone_of(
        &self,
        id: &str,
        seq: u64,
        signer: &SigningKey,
        reason: record::TombstoneReason,
    ) -> Vec<u8> {
        let body = TombstoneRecord {
            agent_id: id.to_owned(),
            seq,
            issued_at: record::unix_now(),
            reason,
        };
        SignedRecord::sign_tombstone(&body, signer)
            .unwrap()
            .encode()
    }
}

#[test]
fn evidence_is_rechecked_and_untrusted_attesters_trigger_reverification() {
    let f = fixture();
    let judge = f.judge();
    let body = f.descriptor(&f.stranger, 10, &f.agent_key);
    let domain = f.agent_id.strip_prefix("agent:").unwrap().to_owned();
    assert_eq!(
        judge.judge(&f.signed(&body, &f.stranger)),
        Judgement::Stored {
            agent_id: f.agent_id.clone(),
            trusted: false,
            reverify: Some(domain),
            signer: f.stranger.verifying_key().to_bytes(),
        }
    );
    assert_eq!(
        judge.judge(&f.signed(&body, &f.stranger)),
        Judgement::Duplicate,
        "the same seq again is a duplicate, not an offence"
    );
    let newer = f.descriptor(&f.friend, 11, &f.agent_key);
    assert_eq!(
        judge.judge(&f.signed(&newer, &f.friend)),
        Judgement::Stored {
            agent_id: f.agent_id.clone(),
            trusted: true,
            reverify: None,
            signer: f.friend.verifying_key().to_bytes(),
        }
    );
    assert!(judge.refusals().is_empty(), "{:?}", judge.refusals());
    assert_eq!(judge.accepted(), 2);
}

#[test]
fn forged_or_inconsistent_evidence_is_refused_and_counted() {
    let f = fixture();
    let judge = f.judge();
    // The challenge signed by a key that is not the document's.
    let forged = f.descriptor(&f.stranger, 10, &f.stranger);
    assert_eq!(
        judge.judge(&f.signed(&forged, &f.stranger)),
        Judgement::Refused(Refusal::BadEvidence)
    );
    // A proof moved onto another document: the digest no longer matches.
    let mut moved = f.descriptor(&f.stranger, 11, &f.agent_key);
    moved.document = moved.document.replacen("\"protocol\"", " \"protocol\"", 1);
    moved.doc_sha256 = sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(
        moved.document.as_bytes(),
    ))
    .to_vec();
    assert_eq!(
        judge.judge(&f.signed(&moved, &f.stranger)),
        Judgement::Refused(Refusal::BadEvidence)
    );
    // A mutual-peer claim without a challenge.
    let mut claim = f.descriptor(&f.stranger, 12, &f.agent_key);
    claim.evidence.challenge = None;
    claim.evidence.mutual_peer = true;
    assert_eq!(
        judge.judge(&f.signed(&claim, &f.stranger)),
        Judgement::Refused(Refusal::BadEvidence)
    );
    // Expired and future records.
    let mut old = f.descriptor(&f.stranger, 13, &f.agent_key);
    old.expires_at = record::unix_now() - 1;
    assert_eq!(
        judge.judge(&f.signed(&old, &f.stranger)),
        Judgement::Refused(Refusal::Expired)
    );
    let mut future = f.descriptor(&f.stranger, 14, &f.agent_key);
    future.issued_at = record::unix_now() + 3600;
    assert_eq!(
        judge.judge(&f.signed(&future, &f.stranger)),
        Judgement::Refused(Refusal::IssuedInFuture)
    );
    // Envelope failures keep the record layer's reason codes.
    let mut bytes = f.signed(&f.descriptor(&f.stranger, 15, &f.agent_key), &f.stranger);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    assert_eq!(
        judge.judge(&bytes),
        Judgement::Refused(Refusal::BadSignature)
    );
    assert_eq!(
        judge.judge(&vec![0xa4; 20_000]),
        Judgement::Refused(Refusal::TooLarge)
    );

    let counts = judge.refusals();
    assert_eq!(counts["bad_evidence"], 3);
    assert_eq!(counts["expired"], 1);
    assert!(
        f.store.blocking().get(&f.agent_id).unwrap().is_none(),
        "nothing refused was stored"
    );
}

#[test]
fn registrations_from_other_registries_carry_no_evidence() {
    let f = fixture();
    let judge = f.judge();
    let mut d = crate::record::tests::sample_descriptor("agent-77");
    d.format = DocumentFormat::Aidip;
    let mut body = DescriptorRecord::new(
        d,
        "{}".into(),
        5,
        record::unix_now(),
        3600,
        Evidence::default(),
    );
    assert!(matches!(
        judge.judge(&f.signed(&body, &f.stranger)),
        Judgement::Stored { reverify: None, .. }
    ));
    body.seq = 6;
    body.evidence.fingerprint = true;
    assert_eq!(
        judge.judge(&f.signed(&body, &f.stranger)),
        Judgement::Refused(Refusal::BadEvidence)
    );
}

/// A record of an agent of `format` (id `id`) claiming `evidence`, as a
/// crawler of that format signs it.
fn discovered(id: &str, format: DocumentFormat, seq: u64, evidence: Evidence) -> DescriptorRecord {
    let mut d = crate::record::tests::sample_descriptor(id);
    d.format = format;
    DescriptorRecord::new(d, "{}".into(), seq, record::unix_now(), 3600, evidence)
}

fn flags(dnssec: bool, fingerprint: bool) -> Evidence {
    Evidence {
        dnssec,
        fingerprint,
        ..Evidence::default()
    }
}

#[test]
fn a2a_and_dns_aid_records_claiming_what_dns_proves_are_claims_handed_back() {
    let f = fixture();
    let judge = f.judge();
    let stranger = f.stranger.verifying_key().to_bytes();
    for (id, format, evidence, domain) in [
        // A card key the domain's AID record anchors, validated or not.
        (
            "a2a:cards.example.com",
            DocumentFormat::A2a,
            flags(true, true),
            "cards.example.com",
        ),
        (
            "a2a:plain.example.com",
            DocumentFormat::A2a,
            flags(false, true),
            "plain.example.com",
        ),
        // A Secure SVCB RRset: -01, protocol-scoped and -02 flat owners.
        (
            "dns-aid:_chat._a2a._agents.example.org",
            DocumentFormat::DnsAid,
            flags(true, false),
            "example.org",
        ),
        (
            "dns-aid:_mcp._agents.tools.example.org",
            DocumentFormat::DnsAid,
            flags(true, false),
            "tools.example.org",
        ),
        (
            "dns-aid:chat.example.net",
            DocumentFormat::DnsAid,
            flags(true, false),
            "example.net",
        ),
    ] {
        let body = discovered(id, format, 10, evidence.clone());
        assert_eq!(
            judge.judge(&f.signed(&body, &f.stranger)),
            Judgement::Stored {
                agent_id: id.to_owned(),
                trusted: false,
                reverify: Some(domain.to_owned()),
                signer: stranger,
            },
            "{id}"
        );
        // Shown as the stranger's claim, counted as nothing.
        let held = f.store.blocking().get(id).unwrap().unwrap();
        assert!(held.claimed, "{id}");
        assert_eq!(held.counted_level(), TrustLevel::Unverified, "{id}");
        let compact = f.store.blocking().compact(id).unwrap().unwrap();
        assert_eq!(compact.level, TrustLevel::Unverified, "{id}");
        assert_eq!(
            compact.claimed.map(|c| c.level),
            Some(evidence.level()),
            "{id}"
        );
    }
    assert_eq!(f.store.trust_count(TrustLevel::DnsVerified), 0);
    assert!(f
        .store
        .blocking()
        .matching(
            &crate::store::Filter::default(),
            Some(TrustLevel::DnsVerified)
        )
        .is_empty());

    // No flag claimed: nothing to re-verify.
    let bare = discovered(
        "a2a:bare.example.com",
        DocumentFormat::A2a,
        10,
        Evidence::default(),
    );
    assert!(matches!(
        judge.judge(&f.signed(&bare, &f.stranger)),
        Judgement::Stored {
            reverify: None,
            trusted: false,
            ..
        }
    ));
    // A trusted peer's flags count as they are, with nothing to re-verify.
    let id = "dns-aid:_a2a._agents.friend.example.com";
    let vouched = discovered(id, DocumentFormat::DnsAid, 10, flags(true, false));
    assert!(matches!(
        judge.judge(&f.signed(&vouched, &f.friend)),
        Judgement::Stored {
            reverify: None,
            trusted: true,
            ..
        }
    ));
    let held = f.store.blocking().get(id).unwrap().unwrap();
    assert_eq!(held.counted_level(), TrustLevel::DnsVerified);
    assert_eq!(f.store.trust_count(TrustLevel::DnsVerified), 1);
    assert!(judge.refusals().is_empty(), "{:?}", judge.refusals());
}

#[test]
fn flags_dns_cannot_give_a_format_or_ids_outside_its_space_are_refused() {
    let f = fixture();
    let judge = f.judge();
    let proof = ChallengeProof {
        verifier: "rogue".into(),
        unix_ms: 1,
        rand: vec![0; 16],
        signature: vec![0; 64],
    };
    let challenged = Evidence {
        challenge: Some(proof),
        ..flags(true, true)
    };
    let mutual = Evidence {
        mutual_peer: true,
        ..flags(true, true)
    };
    let a2a = "a2a:cards.example.com";
    let dns_aid = "dns-aid:_a2a._agents.example.com";
    for (id, format, evidence, why) in [
        (a2a, DocumentFormat::A2a, challenged.clone(), "a challenge"),
        (a2a, DocumentFormat::A2a, mutual.clone(), "a mutual peer"),
        (dns_aid, DocumentFormat::DnsAid, challenged, "a challenge"),
        (dns_aid, DocumentFormat::DnsAid, mutual, "a mutual peer"),
        (
            a2a,
            DocumentFormat::A2a,
            flags(true, false),
            "dnssec without the anchored key",
        ),
        (
            dns_aid,
            DocumentFormat::DnsAid,
            flags(true, true),
            "a key DNS-AID does not publish",
        ),
        (
            "dns-aid:_a2a._agents.com",
            DocumentFormat::DnsAid,
            flags(true, false),
            "an owner under no domain",
        ),
        (
            "a2a:not a domain",
            DocumentFormat::A2a,
            flags(true, true),
            "an id with no domain",
        ),
        (
            "aid:example.com",
            DocumentFormat::Aid,
            flags(true, false),
            "an AID record",
        ),
        (
            "urn:air:example.com:x",
            DocumentFormat::Ard,
            flags(true, false),
            "an ARD entry",
        ),
        (
            "mcp:io.example/x",
            DocumentFormat::McpRegistry,
            flags(true, false),
            "an MCP server",
        ),
        (
            "agent-9",
            DocumentFormat::Aidip,
            flags(false, true),
            "a registration",
        ),
    ] {
        let body = discovered(id, format, 10, evidence);
        assert_eq!(
            judge.judge(&f.signed(&body, &f.stranger)),
            Judgement::Refused(Refusal::BadEvidence),
            "{id}: {why}"
        );
        assert!(f.store.blocking().get(id).unwrap().is_none(), "{id}");
    }
    // An ADP id, or another format's, under these formats: refused
    // before any flag is looked at.
    for (id, format) in [
        ("agent:cards.example.com", DocumentFormat::A2a),
        ("agent:example.com", DocumentFormat::DnsAid),
        ("a2a:example.com", DocumentFormat::DnsAid),
    ] {
        let body = discovered(id, format, 10, flags(true, false));
        assert_eq!(
            judge.judge(&f.signed(&body, &f.stranger)),
            Judgement::Refused(Refusal::ReservedId),
            "{id}"
        );
    }
    assert_eq!(judge.refusals()["bad_evidence"], 12);
    assert_eq!(judge.refusals()["reserved_id"], 3);
}

#[test]
fn tombstones_need_the_agent_key_or_the_attester() {
    let f = fixture();
    let judge = f.judge();
    assert_eq!(
        judge.judge(&f.tombstone(1, &f.stranger)),
        Judgement::Unverifiable(Refusal::TombstoneForUnknownAgent)
    );
    let body = f.descriptor(&f.stranger, 10, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&body, &f.stranger)),
        Judgement::Stored { .. }
    ));
    assert_eq!(
        judge.judge(&f.tombstone(11, &f.friend)),
        Judgement::Refused(Refusal::TombstoneNotAuthorised)
    );
    assert!(
        matches!(
            judge.judge(&f.tombstone(11, &f.agent_key)),
            Judgement::Stored { .. }
        ),
        "the agent revokes itself"
    );
    assert!(matches!(
        f.store.blocking().get(&f.agent_id).unwrap().unwrap().body,
        RecordBody::Tombstone(_)
    ));
    let late = f.descriptor(&f.stranger, 10, &f.agent_key);
    assert_eq!(
        judge.judge(&f.signed(&late, &f.stranger)),
        Judgement::Stale,
        "a tombstone beats lower seqs"
    );
    assert_eq!(judge.refusals().get("stale_seq"), Some(&1));
}

#[test]
fn the_attester_may_withdraw_its_own_attestation() {
    let f = fixture();
    let judge = f.judge();
    let body = f.descriptor(&f.stranger, 10, &f.agent_key);
    judge.judge(&f.signed(&body, &f.stranger));
    assert!(matches!(
        judge.judge(&f.tombstone(12, &f.stranger)),
        Judgement::Stored { .. }
    ));
}

#[test]
fn a_lookups_node_keeps_what_it_looked_up_and_updates_of_what_it_holds() {
    let f = fixture();
    let judge = f.judge().with_replication(Replication::Lookups);
    let first = f.signed(&f.descriptor(&f.friend, 10, &f.agent_key), &f.friend);
    // Offered unasked: checked and passed on, not stored.
    assert_eq!(judge.judge_offered(&first, None), Judgement::NotKept);
    assert!(f.store.blocking().get(&f.agent_id).unwrap().is_none());
    // Forgeries are refused and counted as on any node.
    let forged = f.signed(&f.descriptor(&f.friend, 11, &f.stranger), &f.friend);
    assert_eq!(
        judge.judge_offered(&forged, None),
        Judgement::Refused(Refusal::BadEvidence)
    );
    // Looked up: kept.
    assert!(matches!(judge.judge(&first), Judgement::Stored { .. }));
    // Now held: a newer offer and a tombstone are kept.
    let newer = f.signed(&f.descriptor(&f.friend, 12, &f.agent_key), &f.friend);
    assert!(matches!(
        judge.judge_offered(&newer, None),
        Judgement::Stored { .. }
    ));
    assert!(matches!(
        judge.judge_offered(&f.tombstone(13, &f.friend), None),
        Judgement::Stored { .. }
    ));
    assert_eq!(judge.refusals().get("bad_evidence"), Some(&1));
}

#[test]
fn a_tombstone_for_an_unknown_agent_is_not_an_offence() {
    let f = fixture();
    let judge = f.judge();
    assert_eq!(
        judge.judge_offered(&f.tombstone(1, &f.stranger), None),
        Judgement::Unverifiable(Refusal::TombstoneForUnknownAgent)
    );
    assert!(judge.refusals().is_empty());
}

#[test]
fn a_node_keeps_its_own_attestation_over_an_untrusted_peers() {
    let f = fixture();
    let judge = f.judge();
    let ours = f.descriptor(&f.own, 10, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&ours, &f.own)),
        Judgement::Stored { .. }
    ));
    // A stranger re-verified the same document: no replacement, and no
    // re-verification to queue (which would start a re-crawl loop).
    let theirs = f.descriptor(&f.stranger, 11, &f.agent_key);
    assert_eq!(
        judge.judge(&f.signed(&theirs, &f.stranger)),
        Judgement::Outranked {
            reverify: None,
            signer: f.stranger.verifying_key().to_bytes(),
        }
    );
    let held = f.store.blocking().get(&f.agent_id).unwrap().unwrap();
    assert_eq!(held.record.signer(), &f.own.verifying_key());
    // Another document (the stranger says the agent changed, or made it
    // up): still kept out, and this node goes to look for itself.
    let other = f.document.replacen("\"protocol\"", " \"protocol\"", 1);
    let changed = f.descriptor_of(&other, &f.stranger, 12, &f.agent_key);
    assert_eq!(
        judge.judge(&f.signed(&changed, &f.stranger)),
        Judgement::Outranked {
            reverify: Some(f.domain()),
            signer: f.stranger.verifying_key().to_bytes(),
        }
    );
    assert_eq!(
        f.store
            .blocking()
            .get(&f.agent_id)
            .unwrap()
            .unwrap()
            .body
            .seq(),
        10
    );
    // A trusted partner's newer attestation replaces ours.
    let partner = f.descriptor(&f.friend, 13, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&partner, &f.friend)),
        Judgement::Stored { .. }
    ));
}

#[test]
fn refusal_codes_are_unique_and_match_the_record_layer() {
    let mut seen = std::collections::HashSet::new();
    for r in Refusal::ALL {
        assert!(seen.insert(r.as_str()), "{r} twice");
    }
    let errors = [
        RecordError::TooLarge { size: 1, max: 0 },
        RecordError::Malformed { reason: "x".into() },
        RecordError::NonCanonical,
        RecordError::TrailingBytes { extra: 1 },
        RecordError::UnknownType { kind: "x".into() },
        RecordError::BadSignature,
        RecordError::BadPayload {
            kind: "descriptor",
            reason: "x".into(),
        },
        RecordError::DigestMismatch,
        RecordError::StaleSeq {
            agent_id: "a".into(),
            seq: 1,
            held: 2,
        },
        RecordError::Expired {
            agent_id: "a".into(),
            expires_at: 0,
        },
    ];
    for e in &errors {
        assert_eq!(Refusal::from(e).as_str(), e.reason(), "{e}");
    }
}

/// The fixture's agent after a key rotation (`Rotation`): its document
/// and its new key.
fn rotated(rotation: crate::testbed::Rotation) -> (String, SigningKey) {
    let config = crate::testbed::PopulationConfig {
        rotation,
        ..crate::testbed::PopulationConfig::healthy(9, 1)
    };
    let population = Population::generate(&config);
    let agent = &population.agents()[0];
    let doc = population.document(
        agent,
        Ports {
            https: 443,
            http: 80,
        },
    );
    (serde_json::to_string(&doc).unwrap(), agent.key.clone())
}

#[test]
fn a_proven_rotation_is_accepted_and_a_replayed_pre_rotation_record_refused() {
    let f = fixture();
    let judge = f.judge();
    let first = f.descriptor(&f.friend, 10, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&first, &f.friend)),
        Judgement::Stored { .. }
    ));

    let (doc, key) = rotated(crate::testbed::Rotation::Proven);
    assert_ne!(key.verifying_key(), f.agent_key.verifying_key());
    let after = f.descriptor_of(&doc, &f.friend, 11, &key);
    assert!(matches!(
        judge.judge(&f.signed(&after, &f.friend)),
        Judgement::Stored { .. }
    ));

    // The old document again, in a newer record: refused, and counted.
    let replay = f.descriptor(&f.friend, 12, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&replay, &f.friend)),
        Judgement::Refused(Refusal::KeyChangedUnproven)
    ));
    assert_eq!(judge.refusals().get("key_changed_unproven"), Some(&1));
    let held = f.store.blocking().get(&f.agent_id).unwrap().unwrap();
    assert_eq!(held.body.seq(), 11, "the rotated record stays");
}

#[test]
fn a_key_change_without_a_statement_is_refused() {
    let f = fixture();
    let judge = f.judge();
    let first = f.descriptor(&f.friend, 10, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&first, &f.friend)),
        Judgement::Stored { .. }
    ));
    let (doc, key) = rotated(crate::testbed::Rotation::Unproven);
    let changed = f.descriptor_of(&doc, &f.friend, 11, &key);
    assert!(matches!(
        judge.judge(&f.signed(&changed, &f.friend)),
        Judgement::Refused(Refusal::KeyChangedUnproven)
    ));
    assert_eq!(
        f.store
            .blocking()
            .get(&f.agent_id)
            .unwrap()
            .unwrap()
            .body
            .seq(),
        10
    );
}
