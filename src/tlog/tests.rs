use std::sync::Arc;

use super::*;

#[test]
fn tile_paths_print_and_parse_as_tlog_tiles_spells_them() {
    let cases = [
        ("0/000", Some(0), 0, TILE_WIDTH),
        ("0/000.p/7", Some(0), 0, 7),
        ("1/x001/x234/067", Some(1), 1_234_067, TILE_WIDTH),
        ("63/x001/x234/067.p/255", Some(63), 1_234_067, 255),
        ("entries/272", None, 272, TILE_WIDTH),
        ("entries/x001/000.p/1", None, 1000, 1),
    ];
    for (text, level, index, width) in cases {
        let tile = TilePath::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            (tile.level, tile.index, tile.width),
            (level, index, width),
            "{text}"
        );
        assert_eq!(tile.to_string(), text);
    }
}

#[test]
fn non_canonical_or_out_of_range_tile_paths_are_refused() {
    for bad in [
        "",
        "0",
        "64/000",
        "00/000",
        "0/0",
        "0/1234",
        "0/001/002",
        "0/x1/002",
        "0/x000/002",
        "0/000.p/0",
        "0/000.p/256",
        "0/000.p/07",
        "0/000.p/",
        "data/000",
        "0/x018/x446/x744/x073/x709/x551/616",
        "entries/000/",
        "0/-01",
    ] {
        assert!(TilePath::parse(bad).is_err(), "{bad:?} parsed");
    }
}

fn new_notary() -> (Notary, Arc<ed25519_dalek::SigningKey>) {
    let key = Arc::new(crate::identity::generate());
    let notary = Notary::new("agentmesh/test-node", key.clone()).expect("a good origin");
    (notary, key)
}

#[test]
fn a_signed_checkpoint_opens_with_the_node_verifier_key_only() {
    let (notary, _) = new_notary();
    let root = leaf_hash(b"one entry");
    let note = notary.sign(1, root);
    let text = String::from_utf8(note.to_vec()).expect("a note is text");
    assert!(text.starts_with(&format!(
        "agentmesh/test-node\n1\n{}\n\n— agentmesh/test-node ",
        encode_hash(&root)
    )));
    let opened = Checkpoint::open(&note, &notary.verifier_key(), Some("agentmesh/test-node"))
        .expect("it opens");
    assert_eq!((opened.size, opened.root), (1, root));

    let (other, _) = new_notary();
    assert_eq!(
        Checkpoint::open(&note, &other.verifier_key(), None),
        Err(CheckpointError::Unsigned("agentmesh/test-node".into())),
        "another key of the same name"
    );
    assert!(matches!(
        Checkpoint::open(&note, &notary.verifier_key(), Some("agentmesh/other")),
        Err(CheckpointError::WrongOrigin { .. })
    ));
    let forged = text.replacen("\n1\n", "\n2\n", 1);
    assert_eq!(
        Checkpoint::open(forged.as_bytes(), &notary.verifier_key(), None),
        Err(CheckpointError::BadSignature("agentmesh/test-node".into()))
    );
    assert!(matches!(
        Checkpoint::open(b"not a note", &notary.verifier_key(), None),
        Err(CheckpointError::Malformed(_))
    ));
    assert_eq!(
        Checkpoint::open(&vec![b'a'; 20_000], &notary.verifier_key(), None),
        Err(CheckpointError::TooLarge)
    );
}

#[test]
fn origins_a_note_cannot_carry_are_refused() {
    let key = Arc::new(crate::identity::generate());
    for bad in ["", "has space", "a+b", "new\nline", &"x".repeat(201)] {
        assert!(Notary::new(bad, key.clone()).is_err(), "{bad:?}");
    }
}

#[test]
fn a_sealed_entry_commits_to_the_record_without_showing_it() {
    let record = b"a private agent's record";
    let sealed = entry_of(record, true);
    assert!(sealed.starts_with(SEALED_PREFIX));
    assert!(!sealed.windows(record.len()).any(|w| w == record));
    assert_eq!(sealed.len(), SEALED_PREFIX.len() + 32);
    assert_eq!(entry_of(record, false), record.to_vec());
}

#[test]
fn a_witness_cosignature_is_c2sp_tlog_cosignature_v1() {
    use base64::Engine as _;
    use ed25519_dalek::Verifier as _;
    use sha2::{Digest, Sha256};

    let (log, _) = new_notary();
    let note = log.sign(7, leaf_hash(b"seven"));
    let witness = ed25519_dalek::SigningKey::from_bytes(&[31; 32]);
    let name = "witness.example/w1";
    let cosigned = cosign::cosign(&note, name, &witness, 1_700_000_000).expect("it cosigns");
    // The log's own signature still opens it; the cosignature checks.
    assert!(Checkpoint::open(&cosigned, &log.verifier_key(), None).is_ok());
    assert_eq!(
        cosign::cosigned_at(&cosigned, name, &witness.verifying_key(), 1_700_000_000),
        Ok(Some(1_700_000_000))
    );
    assert_eq!(
        cosign::cosigned_at(&note, name, &witness.verifying_key(), 1_700_000_000),
        Ok(None),
        "no cosignature yet"
    );

    // The line, read as the C2SP text says, not through our code.
    let text = String::from_utf8(cosigned.clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("— {name} ")))
        .expect("a signature line under the witness's name");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(line.rsplit(' ').next().unwrap())
        .unwrap();
    assert_eq!(raw.len(), 4 + 8 + 64);
    let mut id = Sha256::new();
    id.update(name.as_bytes());
    id.update(b"\n");
    id.update([0x04]);
    id.update(witness.verifying_key().as_bytes());
    assert_eq!(raw[..4], id.finalize()[..4], "key id");
    assert_eq!(
        u64::from_be_bytes(raw[4..12].try_into().unwrap()),
        1_700_000_000
    );
    let body = text.split("\n\n").next().unwrap();
    let signed = format!("cosignature/v1\ntime 1700000000\n{body}\n");
    let sig = ed25519_dalek::Signature::from_bytes(&raw[12..].try_into().unwrap());
    witness
        .verifying_key()
        .verify(signed.as_bytes(), &sig)
        .expect("Ed25519 over the header, the time line and the checkpoint body");

    // Another time in the same line, a time in the future, another key.
    let mut forged = raw.clone();
    forged[11] ^= 1;
    let forged_line = format!(
        "— {name} {}",
        base64::engine::general_purpose::STANDARD.encode(&forged)
    );
    let forged_note = text.replace(line, &forged_line);
    assert!(matches!(
        cosign::cosigned_at(
            forged_note.as_bytes(),
            name,
            &witness.verifying_key(),
            1_700_000_000
        ),
        Err(CheckpointError::BadSignature(_))
    ));
    let early = cosign::cosign(&note, name, &witness, 1_700_001_000).unwrap();
    assert!(cosign::cosigned_at(&early, name, &witness.verifying_key(), 1_700_000_000).is_err());
    let other = ed25519_dalek::SigningKey::from_bytes(&[32; 32]);
    assert_eq!(
        cosign::cosigned_at(&cosigned, name, &other.verifying_key(), 1_700_000_000),
        Ok(None),
        "another key of the same name has not cosigned"
    );
}
