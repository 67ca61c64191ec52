//! A peer's record that carries a DNSSEC chain: stored when the chain
//! proves the flags it backs, refused as `bad_evidence` when it proves
//! nothing, proves another key or comes without the `dnssec` flag, so no
//! stored record makes a signed answer about its agent fail.

use super::*;
use crate::testbed::dns::Zone;
use crate::testbed::dnssec::ZoneKey;
use hickory_proto::rr::{LowerName, Name, Record, RecordType};

/// The `test.` zone holding the agent's `_agent` TXT record naming
/// `fingerprint`, signed by `key`; the chain that proves that record.
fn chain_naming(f: &Fixture, key: &ZoneKey, fingerprint: &str) -> Vec<u8> {
    let owner = format!("_agent.{}.", f.domain());
    let text = format!(
        "v=ADP1; pk={fingerprint}; wk=https://{}/.well-known/agent.json",
        f.domain()
    );
    let mut zone = Zone::new();
    zone.add_txt(&owner, vec![text]).unwrap();
    key.sign(&mut zone).unwrap();
    let mut chain = Vec::new();
    for (name, rtype) in [
        (owner.as_str(), RecordType::TXT),
        ("test.", RecordType::DNSKEY),
    ] {
        let name = LowerName::from(Name::from_ascii(name).unwrap());
        let crate::testbed::dns::Answer::Records(records) = zone.lookup(&name, rtype) else {
            panic!("the zone holds {name} {rtype}");
        };
        chain.extend(records.iter().cloned());
        chain.extend(zone.signatures(&name, rtype).iter().cloned());
    }
    crate::dnssec::chain::encode(&chain).unwrap()
}

/// A key-verified descriptor at `seq` whose evidence claims `dnssec` and
/// carries `chain`.
fn with_chain(f: &Fixture, seq: u64, dnssec: bool, chain: Vec<u8>) -> DescriptorRecord {
    let mut d = f.descriptor(&f.stranger, seq, &f.agent_key);
    d.evidence.dnssec = dnssec;
    d.evidence.dnssec_chain = Some(chain);
    d
}

fn cut(records: &[u8], drop: RecordType) -> Vec<u8> {
    let kept: Vec<Record> = crate::dnssec::chain::decode(records)
        .unwrap()
        .into_iter()
        .filter(|r| r.record_type() != drop)
        .collect();
    crate::dnssec::chain::encode(&kept).unwrap()
}

#[test]
fn a_peers_dnssec_chain_is_checked_before_its_record_is_stored() {
    let f = fixture();
    let judge = f.judge();
    let key = ZoneKey::generate().unwrap();
    let agents_key = identity::fingerprint(&f.agent_key.verifying_key());
    let good = chain_naming(&f, &key, &agents_key);

    // Each lie, signed by a stranger: refused, nothing stored.
    let lies = [
        (
            "a chain without the dnssec flag",
            with_chain(&f, 10, false, good.clone()),
        ),
        (
            "a chain whose proved TXT record names another key",
            with_chain(
                &f,
                11,
                true,
                chain_naming(
                    &f,
                    &key,
                    &identity::fingerprint(&f.stranger.verifying_key()),
                ),
            ),
        ),
        (
            "a chain cut short (no DNSKEY RRset)",
            with_chain(&f, 12, true, cut(&good, RecordType::DNSKEY)),
        ),
        (
            "a chain whose zone key is another zone's",
            with_chain(&f, 13, true, {
                let other = ZoneKey::generate().unwrap();
                let theirs =
                    crate::dnssec::chain::decode(&chain_naming(&f, &other, &agents_key)).unwrap();
                let mut ours = crate::dnssec::chain::decode(&good).unwrap();
                // Our TXT RRset and signature beside the other zone's keys.
                ours.retain(|r| r.name.num_labels() > 1);
                ours.extend(theirs.into_iter().filter(|r| r.name.num_labels() == 1));
                crate::dnssec::chain::encode(&ours).unwrap()
            }),
        ),
        (
            "bytes that are no chain",
            with_chain(&f, 14, true, vec![0xff; 40]),
        ),
    ];
    for (what, lie) in &lies {
        assert_eq!(
            judge.judge(&f.signed(lie, &f.stranger)),
            Judgement::Refused(Refusal::BadEvidence),
            "{what}"
        );
    }
    assert_eq!(judge.refusals()["bad_evidence"], 5);
    assert!(f.store.blocking().get(&f.agent_id).unwrap().is_none());

    // The chain that proves the flag, from the zone's own key (no anchor
    // this node holds): stored as the stranger's claim, chain and all.
    let honest = with_chain(&f, 20, true, good.clone());
    assert!(matches!(
        judge.judge(&f.signed(&honest, &f.stranger)),
        Judgement::Stored { .. }
    ));
    let held = f.store.blocking().get(&f.agent_id).unwrap().unwrap();
    let RecordBody::Descriptor(d) = &held.body else {
        panic!("a descriptor is held");
    };
    assert_eq!(d.evidence.dnssec_chain.as_deref(), Some(good.as_slice()));
}
