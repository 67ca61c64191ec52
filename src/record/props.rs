//! Property tests of the record layer and the judge's seq order: any
//! record round-trips through its bytes, no byte string makes decoding
//! panic, and a changed byte never yields another valid record (the
//! judge's seq order is a property test of `federation::tests`).

use proptest::prelude::*;

use super::*;
use crate::descriptor::DocumentFormat;

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, short: the bound is the record size, not the string.
    "\\PC{0,40}"
}

fn descriptor() -> impl Strategy<Value = Descriptor> {
    (
        "[a-z0-9-]{1,30}",
        text(),
        text(),
        proptest::option::of(text()),
        proptest::collection::vec("[a-z0-9-]{1,20}", 0..6),
        proptest::collection::vec("[a-z]{2}", 0..4),
    )
        .prop_map(
            |(id, name, description, endpoint, capabilities, languages)| Descriptor {
                id,
                name,
                description,
                version: None,
                publisher: None,
                endpoint,
                capabilities,
                tags: Vec::new(),
                languages,
                status: None,
                auth: None,
                format: DocumentFormat::Aidip,
            },
        )
}

fn key() -> impl Strategy<Value = SigningKey> {
    any::<[u8; 32]>().prop_map(|b| SigningKey::from_bytes(&b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_signed_descriptor_round_trips_through_its_bytes(
        d in descriptor(),
        document in text(),
        seq in any::<u64>(),
        issued_at in 0u64..4_000_000_000,
        ttl in 0u64..100_000_000,
        key in key(),
    ) {
        let body = DescriptorRecord::new(d, document, seq, issued_at, ttl, Evidence::default());
        let record = SignedRecord::sign_descriptor(&body, &key).unwrap();
        let bytes = record.encode();
        let back = SignedRecord::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &record);
        prop_assert_eq!(back.descriptor().unwrap(), body);
        prop_assert_eq!(back.encode(), bytes, "one record, one byte string");
    }

    #[test]
    fn a_signed_tombstone_round_trips_through_its_bytes(
        id in "\\PC{1,60}",
        seq in any::<u64>(),
        issued_at in any::<u64>(),
        reason in prop_oneof![
            Just(TombstoneReason::Deleted),
            Just(TombstoneReason::Revoked),
            Just(TombstoneReason::Suspended),
        ],
        key in key(),
    ) {
        let body = TombstoneRecord { agent_id: id, seq, issued_at, reason };
        let record = SignedRecord::sign_tombstone(&body, &key).unwrap();
        let back = SignedRecord::decode(&record.encode()).unwrap();
        prop_assert_eq!(back.tombstone().unwrap(), body);
    }

    #[test]
    fn no_byte_string_makes_decoding_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(record) = SignedRecord::decode(&bytes) {
            // Whatever decodes is canonical and its body check never panics.
            prop_assert_eq!(&record.encode(), &bytes);
            let _ = record.body();
        }
        let _ = SignedRecord::trusted_document(&bytes);
    }

    #[test]
    fn a_changed_byte_never_yields_another_valid_record(
        d in descriptor(),
        key in key(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let body = DescriptorRecord::new(d, "{}".into(), 7, 1_700_000_000, 3600, Evidence::default());
        let record = SignedRecord::sign_descriptor(&body, &key).unwrap();
        let mut bytes = record.encode();
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        // Either refused, or (a byte the envelope does not sign, changed
        // into an equal encoding) never a different signed payload.
        if let Ok(other) = SignedRecord::decode(&bytes) {
            prop_assert_eq!(other.payload(), record.payload());
            prop_assert_eq!(other.signer(), record.signer());
        }
    }
}
