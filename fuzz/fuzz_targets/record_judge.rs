//! The CBOR record decoder and the federation judge: what a peer gossips,
//! puts in the DHT, answers a search with, or a stranger POSTs to
//! `/records`. The first byte picks how the rest is read:
//! - even: an envelope as received (`SignedRecord::decode`, then the judge);
//! - odd: a payload this target signs itself (as a stranger or as a
//!   trusted peer, a descriptor or a tombstone), so the judge's checks
//!   beyond the signature are reached; with bit 3 set, a payload that
//!   decodes has its times moved to now first, so the window lets it in.
#![no_main]

use agentmesh::record::DescriptorRecord;
use agentmesh::record::{RecordType, SignedRecord, TombstoneRecord};
use agentmesh_fuzz::{judge, selector, stranger_key, trusted_key};
use libfuzzer_sys::fuzz_target;

fn cbor<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("CBOR into a Vec");
    out
}

/// The payload with its seq and times moved to now, when it decodes.
fn retimed(kind: RecordType, payload: &[u8]) -> Option<Vec<u8>> {
    let now = agentmesh::record::unix_now();
    let seq = agentmesh::record::next_seq(None);
    match kind {
        RecordType::Descriptor => {
            let mut d: DescriptorRecord = ciborium::from_reader(payload).ok()?;
            let ttl = d.expires_at.saturating_sub(d.issued_at).min(86_400);
            (d.seq, d.issued_at, d.expires_at) = (seq, now, now + ttl);
            Some(cbor(&d))
        }
        _ => {
            let mut t: TombstoneRecord = ciborium::from_reader(payload).ok()?;
            (t.seq, t.issued_at) = (seq, now);
            Some(cbor(&t))
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = selector(data) else {
        return;
    };
    if mode & 1 == 0 {
        if let Ok(record) = SignedRecord::decode(rest) {
            let again = SignedRecord::decode(&record.encode())
                .expect("a decoded record encodes to bytes that decode");
            assert_eq!(again, record, "decode(encode(r)) == r");
            let _ = record.body();
        }
        let _ = judge().judge_offered(rest, None);
        return;
    }
    let kind = if mode & 2 == 0 {
        RecordType::Descriptor
    } else {
        RecordType::Tombstone
    };
    let key = if mode & 4 == 0 {
        stranger_key()
    } else {
        trusted_key()
    };
    let payload = match mode & 8 {
        0 => rest.to_vec(),
        _ => match retimed(kind, rest) {
            Some(p) => p,
            None => return,
        },
    };
    if let Ok(record) = SignedRecord::sign(kind, payload, &key) {
        let bytes = record.encode();
        let _ = judge().judge(&bytes);
    }
});
