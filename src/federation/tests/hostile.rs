//! Tests of the [`Judge`] against a hostile peer: one member of the mesh,
//! or a stranger who reaches `POST /records`, signing whatever it likes
//! with a fresh key. Forged claims, squatting, seqs ahead of the clock,
//! ids and keys it does not own, revocations, quotas, and the hand-over of
//! an id that only its owner may sign.

use super::*;

#[test]
fn a_forged_proof_from_an_untrusted_signer_is_held_as_a_claim_and_counts_for_nothing() {
    let f = fixture();
    let judge = f.judge();
    // The stranger's own key in the agent's document, a challenge it
    // signed itself, every flag it can set.
    let forged_doc = f.forged_document(&f.stranger);
    let mut forged = f.descriptor_of(&forged_doc, &f.stranger, 10, &f.stranger);
    forged.evidence.dnssec = true;
    forged.evidence.mutual_peer = true;
    assert!(matches!(
        judge.judge(&f.signed(&forged, &f.stranger)),
        Judgement::Stored {
            trusted: false,
            reverify: Some(_),
            ..
        }
    ));
    let held = f.store.blocking().get(&f.agent_id).unwrap().unwrap();
    assert!(held.claimed, "an untrusted signer's evidence is a claim");
    assert_eq!(held.counted_level(), TrustLevel::Unverified);
    let compact = f.store.blocking().compact(&f.agent_id).unwrap().unwrap();
    assert_eq!(compact.level, TrustLevel::Unverified);
    assert_eq!(
        compact.claimed.map(|c| c.level),
        Some(TrustLevel::PeerVerified),
        "the claim is kept, to be shown as one"
    );
    for level in [
        TrustLevel::DnsVerified,
        TrustLevel::KeyVerified,
        TrustLevel::PeerVerified,
    ] {
        assert_eq!(f.store.trust_count(level), 0, "{level}");
        assert!(
            f.store
                .blocking()
                .matching(&crate::store::Filter::default(), Some(level))
                .is_empty(),
            "min_trust {level} finds nothing"
        );
    }
    // The dnssec flag alone proves nothing either.
    let mut dns_only = f.descriptor_of(&forged_doc, &f.stranger, 11, &f.stranger);
    dns_only.evidence = Evidence {
        dnssec: true,
        ..Evidence::default()
    };
    assert!(matches!(
        judge.judge(&f.signed(&dns_only, &f.stranger)),
        Judgement::Stored { trusted: false, .. }
    ));
    assert_eq!(
        f.store
            .blocking()
            .compact(&f.agent_id)
            .unwrap()
            .unwrap()
            .level,
        TrustLevel::Unverified
    );
    assert_eq!(f.store.trust_count(TrustLevel::DnsVerified), 0);
}

#[test]
fn a_forged_claim_cannot_squat_the_agent_against_a_verified_record() {
    let f = fixture();
    let judge = f.judge();
    let forged_doc = f.forged_document(&f.stranger);
    let forged = f.descriptor_of(&forged_doc, &f.stranger, 10, &f.stranger);
    assert!(matches!(
        judge.judge(&f.signed(&forged, &f.stranger)),
        Judgement::Stored { .. }
    ));
    // A trusted partner's verification of the real key replaces the
    // claim: continuity is judged only against what this node counts.
    let real = f.descriptor(&f.friend, 11, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&real, &f.friend)),
        Judgement::Stored { trusted: true, .. }
    ));
    // And the forgery cannot come back over it.
    let again = f.descriptor_of(&forged_doc, &f.stranger, 12, &f.stranger);
    assert!(matches!(
        judge.judge(&f.signed(&again, &f.stranger)),
        Judgement::Outranked {
            reverify: Some(_),
            ..
        }
    ));
    let held = f.store.blocking().get(&f.agent_id).unwrap().unwrap();
    assert_eq!(held.record.signer(), &f.friend.verifying_key());
    assert_eq!(held.counted_level(), TrustLevel::KeyVerified);
}

#[test]
fn seqs_ahead_of_the_clock_and_overlong_lifetimes_are_refused() {
    let f = fixture();
    let judge = f.judge();
    let pinned = f.registration("weather-bot", u64::MAX, "https://evil.test");
    assert_eq!(
        judge.judge(&f.signed(&pinned, &f.stranger)),
        Judgement::Refused(Refusal::SeqAhead)
    );
    let ahead = f.registration("weather-bot", max_seq_now() + 60_000, "https://evil.test");
    assert_eq!(
        judge.judge(&f.signed(&ahead, &f.stranger)),
        Judgement::Refused(Refusal::SeqAhead)
    );
    let mut century = f.registration("weather-bot", 5, "https://evil.test");
    century.expires_at = century.issued_at + 100 * 365 * 24 * 3600;
    assert_eq!(
        judge.judge(&f.signed(&century, &f.stranger)),
        Judgement::Refused(Refusal::LifetimeTooLong)
    );
    // Within the bounds: a seq of now, a lifetime of the default cap.
    let mut fine = f.registration("weather-bot", record::next_seq(None), "https://ok.test");
    fine.expires_at = fine.issued_at + DEFAULT_MAX_LIFETIME.as_secs();
    assert!(matches!(
        judge.judge(&f.signed(&fine, &f.stranger)),
        Judgement::Stored { .. }
    ));
    // A tighter cap from config.
    let strict = f
        .judge()
        .with_max_lifetime(std::time::Duration::from_secs(600));
    let long = f.registration("other-bot", 5, "https://ok.test");
    assert_eq!(
        strict.judge(&f.signed(&long, &f.stranger)),
        Judgement::Refused(Refusal::LifetimeTooLong)
    );
    let counts = judge.refusals();
    assert_eq!(counts["seq_ahead"], 2);
    assert_eq!(counts["lifetime_too_long"], 1);
}

#[test]
fn a_registration_belongs_to_the_key_that_first_signed_it() {
    let f = fixture();
    let judge = f.judge();
    let owner = SigningKey::from_bytes(&[4; 32]);
    let first = f.registration("weather-bot", 10, "https://weather.example");
    assert!(matches!(
        judge.judge(&f.signed(&first, &owner)),
        Judgement::Stored { .. }
    ));
    // Another registry, however trusted, with a higher seq.
    for other in [&f.stranger, &f.friend] {
        let takeover = f.registration("weather-bot", 11, "https://evil.test");
        assert_eq!(
            judge.judge(&f.signed(&takeover, other)),
            Judgement::Refused(Refusal::NotOwner)
        );
        assert_eq!(
            judge.judge(&f.tombstone_of(
                "weather-bot",
                12,
                other,
                record::TombstoneReason::Deleted
            )),
            Judgement::Refused(Refusal::TombstoneNotAuthorised)
        );
    }
    let held = f.store.blocking().get("weather-bot").unwrap().unwrap();
    assert_eq!(held.record.signer(), &owner.verifying_key());
    // The owner's own update and deletion stand.
    let update = f.registration("weather-bot", 13, "https://weather.example/v2");
    assert!(matches!(
        judge.judge(&f.signed(&update, &owner)),
        Judgement::Stored { .. }
    ));
    assert!(matches!(
        judge.judge(&f.tombstone_of("weather-bot", 14, &owner, record::TombstoneReason::Deleted)),
        Judgement::Stored { .. }
    ));
    // After the deletion the id is still the owner's here.
    let squat = f.registration("weather-bot", 15, "https://evil.test");
    assert_eq!(
        judge.judge(&f.signed(&squat, &f.stranger)),
        Judgement::Refused(Refusal::NotOwner)
    );
    assert_eq!(judge.refusals()["not_owner"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_record_never_replaces_a_local_registration() {
    let f = fixture();
    let issuer = crate::issuer::Issuer::new(
        f.store.clone(),
        std::sync::Arc::new(f.own.clone()),
        std::time::Duration::from_secs(3600),
    );
    let mut d = crate::record::tests::sample_descriptor("weather-bot");
    d.endpoint = Some("https://weather.example".into());
    issuer
        .descriptor(crate::issuer::DescriptorIssue {
            descriptor: d,
            document: "{}".into(),
            evidence: Evidence::default(),
            origin: Origin::Local,
            expect: Expect::LocalOrAbsent,
            durability: crate::issuer::Durability::Flushed,
        })
        .await
        .unwrap();
    let judge = f.judge();
    let takeover = f.registration("weather-bot", max_seq_now(), "https://evil.test");
    let bytes = f.signed(&takeover, &f.stranger);
    let judged = tokio::task::spawn_blocking(move || judge.judge(&bytes))
        .await
        .unwrap();
    assert_eq!(judged, Judgement::Refused(Refusal::LocalRegistration));
    let compact = f.store.blocking().compact("weather-bot").unwrap().unwrap();
    assert!(compact.local);
    assert_eq!(compact.endpoint.as_deref(), Some("https://weather.example"));
}

#[test]
fn a_revocation_by_the_agent_key_is_final_for_that_key() {
    let f = fixture();
    let judge = f.judge();
    let held = f.descriptor(&f.friend, 100, &f.agent_key);
    assert!(matches!(
        judge.judge(&f.signed(&held, &f.friend)),
        Judgement::Stored { .. }
    ));
    // The agent revokes its key with a seq below the held one (a record
    // pinned ahead, or a slow clock): it still stands.
    assert!(matches!(
        judge.judge(&f.tombstone(50, &f.agent_key)),
        Judgement::Stored { .. }
    ));
    assert!(matches!(
        f.store.blocking().get(&f.agent_id).unwrap().unwrap().body,
        RecordBody::Tombstone(_)
    ));
    // A later descriptor under the revoked key, from anyone, is refused.
    for signer in [&f.friend, &f.own, &f.stranger] {
        let back = f.descriptor(signer, 200, &f.agent_key);
        assert_eq!(
            judge.judge(&f.signed(&back, signer)),
            Judgement::Refused(Refusal::KeyRevoked)
        );
    }
    // Nobody but the key's holder can revoke a key: the stranger's
    // "revocation" of another agent's key is not one.
    let fp = identity::fingerprint(&f.agent_key.verifying_key());
    assert!(f.store.blocking().revocation(&fp).unwrap().is_some());
    assert!(f
        .store
        .blocking()
        .revocation(&identity::fingerprint(&f.stranger.verifying_key()))
        .unwrap()
        .is_none());
}

#[test]
fn the_revoked_key_list_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fp = "ed25519:00ff";
    {
        let store = Store::open(dir.path(), 8 << 20).unwrap();
        assert!(store.blocking().revoke_key(fp, "agent:a.test").unwrap());
        assert!(!store.blocking().revoke_key(fp, "agent:a.test").unwrap());
        store.close_blocking().unwrap();
    }
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    let r = store.blocking().revocation(fp).unwrap().unwrap();
    assert_eq!(r.agent_id, "agent:a.test");
}

#[test]
fn records_are_classified_again_when_the_trusted_peers_change() {
    let f = fixture();
    let body = f.descriptor(&f.stranger, 10, &f.agent_key);
    // Held as a claim: the stranger was not trusted.
    assert!(matches!(
        f.judge().judge(&f.signed(&body, &f.stranger)),
        Judgement::Stored { trusted: false, .. }
    ));
    let mut vouched = f.judge().vouched();
    let done = f.store.blocking().reassess(&vouched).unwrap();
    assert_eq!(done.reclassified, 0, "already classified against this set");
    // The operator trusts the stranger now.
    vouched.insert(f.stranger.verifying_key().to_bytes());
    let done = f.store.blocking().reassess(&vouched).unwrap();
    assert_eq!(done.reclassified, 1);
    assert!(
        !f.store
            .blocking()
            .get(&f.agent_id)
            .unwrap()
            .unwrap()
            .claimed
    );
    assert_eq!(f.store.trust_count(TrustLevel::KeyVerified), 1);
    assert_eq!(
        f.store.blocking().reassess(&vouched).unwrap(),
        crate::store::Reassessed::default(),
        "the same set again costs nothing"
    );
    // And no longer.
    vouched.remove(&f.stranger.verifying_key().to_bytes());
    assert_eq!(
        f.store.blocking().reassess(&vouched).unwrap().reclassified,
        1
    );
    assert_eq!(f.store.trust_count(TrustLevel::KeyVerified), 0);
    assert_eq!(
        f.store
            .blocking()
            .compact(&f.agent_id)
            .unwrap()
            .unwrap()
            .level,
        TrustLevel::Unverified
    );
}

#[test]
fn untrusted_signers_are_held_to_their_quotas_and_trusted_ones_are_not() {
    let f = fixture();
    let judge = f.judge().with_claim_quotas(ClaimQuotas {
        per_signer: 2,
        total: 3,
    });
    let other = SigningKey::from_bytes(&[5; 32]);
    let now = record::next_seq(None);
    let put = |id: &str, seq: u64, signer: &SigningKey| {
        judge.judge(&f.signed(&f.registration(id, seq, "https://x.test"), signer))
    };
    assert!(matches!(
        put("a", now, &f.stranger),
        Judgement::Stored { .. }
    ));
    assert!(matches!(
        put("b", now, &f.stranger),
        Judgement::Stored { .. }
    ));
    assert_eq!(
        put("c", now, &f.stranger),
        Judgement::Refused(Refusal::SignerQuota)
    );
    // An update of its own claim takes no more room.
    assert!(matches!(
        put("a", now + 1, &f.stranger),
        Judgement::Stored { .. }
    ));
    assert!(matches!(put("d", now, &other), Judgement::Stored { .. }));
    assert_eq!(
        put("e", now, &other),
        Judgement::Refused(Refusal::ClaimsFull)
    );
    // This node's trusted partners are not counted against the quotas.
    assert!(matches!(put("f", now, &f.friend), Judgement::Stored { .. }));
    // A withdrawn claim frees its room.
    assert!(matches!(
        judge.judge(&f.tombstone_of("b", now + 2, &f.stranger, record::TombstoneReason::Deleted)),
        Judgement::Stored { .. }
    ));
    assert!(matches!(
        put("c", now + 3, &f.stranger),
        Judgement::Stored { .. }
    ));
    assert_eq!(
        f.store
            .blocking()
            .claims(f.stranger.verifying_key().as_bytes()),
        (2, 3)
    );
    let counts = judge.refusals();
    assert_eq!((counts["signer_quota"], counts["claims_full"]), (1, 1));
}

#[test]
fn claim_counts_are_read_again_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixture();
    {
        let store = Store::open(dir.path(), 8 << 20).unwrap();
        let judge = Judge::new(store.clone(), f.own.verifying_key(), []);
        for id in ["a", "b"] {
            let body = f.registration(id, record::next_seq(None), "https://x.test");
            assert!(matches!(
                judge.judge(&f.signed(&body, &f.stranger)),
                Judgement::Stored { .. }
            ));
        }
        drop(judge);
        store.close_blocking().unwrap();
    }
    let store = Store::open(dir.path(), 8 << 20).unwrap();
    assert_eq!(
        store
            .blocking()
            .claims(f.stranger.verifying_key().as_bytes()),
        (2, 2)
    );
}

mod seq_order {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// However an owner's records arrive (reordered, repeated), the
        /// one held is the highest seq, and nothing lower replaced it.
        #[test]
        fn the_highest_seq_stands_whatever_the_order(
            seqs in proptest::collection::vec(1u64..1_000, 1..12),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path(), 8 << 20).unwrap();
            let owner = SigningKey::from_bytes(&[4; 32]);
            let judge = Judge::new(store.clone(), SigningKey::from_bytes(&[1; 32]).verifying_key(), []);
            let mut highest = 0;
            for seq in &seqs {
                let mut d = crate::record::tests::sample_descriptor("prop-agent");
                d.name = format!("v{seq}");
                let body = DescriptorRecord::new(d, "{}".into(), *seq, record::unix_now(), 3600, Evidence::default());
                let bytes = SignedRecord::sign_descriptor(&body, &owner).unwrap().encode();
                let judged = judge.judge(&bytes);
                if *seq > highest {
                    prop_assert!(matches!(judged, Judgement::Stored { .. }), "{:?}", judged);
                    highest = *seq;
                } else {
                    prop_assert!(matches!(judged, Judgement::Stale | Judgement::Duplicate), "{:?}", judged);
                }
                let held = store.blocking().get("prop-agent").unwrap().unwrap();
                prop_assert_eq!(held.body.seq(), highest);
            }
        }
    }
}

#[test]
fn an_owner_can_hand_its_id_to_another_registry_and_nobody_else_can() {
    let f = fixture();
    let judge = f.judge();
    let owner = SigningKey::from_bytes(&[4; 32]);
    let heir = SigningKey::from_bytes(&[5; 32]);
    let first = f.registration("weather-bot", 10, "https://weather.example");
    assert!(matches!(
        judge.judge(&f.signed(&first, &owner)),
        Judgement::Stored { .. }
    ));
    let moved = |seq: u64, transfer: Transfer| {
        let mut d = f.registration("weather-bot", seq, "https://heir.example");
        d.transfer = Some(transfer);
        d
    };
    let heir_key = heir.verifying_key();
    // Signed by someone other than the owner; for another id; to another
    // key than the record's signer; a tampered bound: each refused.
    let forged = [
        (
            Transfer::sign("weather-bot", &heir_key, 10, &f.stranger),
            &heir,
        ),
        (Transfer::sign("other-bot", &heir_key, 10, &owner), &heir),
        (
            Transfer::sign("weather-bot", &heir_key, 10, &owner),
            &f.stranger,
        ),
        (
            Transfer {
                up_to_seq: 99,
                ..Transfer::sign("weather-bot", &heir_key, 10, &owner)
            },
            &heir,
        ),
    ];
    for (transfer, signer) in forged {
        assert_eq!(
            judge.judge(&f.signed(&moved(11, transfer), signer)),
            Judgement::Refused(Refusal::BadTransfer)
        );
    }
    // The owner's consent, covering its record at seq 10: the heir owns
    // the id from now on, and the old owner does not.
    let consent = Transfer::sign("weather-bot", &heir_key, 10, &owner);
    assert!(matches!(
        judge.judge(&f.signed(&moved(11, consent.clone()), &heir)),
        Judgement::Stored { .. }
    ));
    let held = f.store.blocking().get("weather-bot").unwrap().unwrap();
    assert_eq!(held.record.signer(), &heir_key);
    let back = f.registration("weather-bot", 12, "https://weather.example");
    assert_eq!(
        judge.judge(&f.signed(&back, &owner)),
        Judgement::Refused(Refusal::NotOwner)
    );
    // The heir's later records need no transfer; carrying it is harmless.
    let later = f.registration("weather-bot", 13, "https://heir.example/v2");
    assert!(matches!(
        judge.judge(&f.signed(&later, &heir)),
        Judgement::Stored { .. }
    ));
    // Handed back, the id is the owner's again; the old consent cannot
    // be replayed to take it once more (the owner wrote after it).
    let returned = {
        let mut d = f.registration("weather-bot", 14, "https://weather.example");
        d.transfer = Some(Transfer::sign(
            "weather-bot",
            &owner.verifying_key(),
            13,
            &heir,
        ));
        d
    };
    assert!(matches!(
        judge.judge(&f.signed(&returned, &owner)),
        Judgement::Stored { .. }
    ));
    assert_eq!(
        judge.judge(&f.signed(&moved(15, consent), &heir)),
        Judgement::Refused(Refusal::BadTransfer)
    );
    // An ADP id moves with its DNS, never by transfer.
    let mut adp = f.descriptor(&f.friend, 20, &f.agent_key);
    adp.transfer = Some(Transfer::sign(
        &f.agent_id,
        &f.friend.verifying_key(),
        20,
        &owner,
    ));
    assert_eq!(
        judge.judge(&f.signed(&adp, &f.friend)),
        Judgement::Refused(Refusal::BadTransfer)
    );
    assert_eq!(judge.refusals()["bad_transfer"], 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_handed_over_by_this_node_stops_being_local() {
    let f = fixture();
    let issuer = crate::issuer::Issuer::new(
        f.store.clone(),
        std::sync::Arc::new(f.own.clone()),
        std::time::Duration::from_secs(3600),
    );
    let registry = crate::registry::Registry::new(issuer);
    let doc = serde_json::json!({
        "id": "weather-bot",
        "name": "Weather",
        "description": "Forecasts.",
        "version": "1.0.0",
        "capabilities": ["weather"],
        "endpoint": "https://weather.example",
        "supported_languages": ["en"],
        "authentication": {"type": "api_key"},
        "inputs": {"type": "object"},
        "outputs": {"type": "object"}
    });
    registry.register(doc.clone()).await.unwrap();
    let heir = SigningKey::from_bytes(&[5; 32]);
    let consent = registry
        .hand_over("weather-bot", &heir.verifying_key())
        .await
        .unwrap();
    let mut d = f.registration("weather-bot", max_seq_now() - 1000, "https://heir.example");
    d.transfer = Some(consent);
    let judge = f.judge();
    let bytes = f.signed(&d, &heir);
    let judged = tokio::task::spawn_blocking(move || judge.judge(&bytes))
        .await
        .unwrap();
    assert!(matches!(judged, Judgement::Stored { .. }), "{judged:?}");
    let compact = f.store.blocking().compact("weather-bot").unwrap().unwrap();
    assert!(!compact.local, "no longer registered here");
    assert_eq!(compact.endpoint.as_deref(), Some("https://heir.example"));
    // This node's own update is now refused: the id is the heir's.
    let update = registry.update("weather-bot", doc).await;
    assert!(
        matches!(update, Err(crate::registry::RegistryError::NotLocal { .. })),
        "{update:?}"
    );
}
