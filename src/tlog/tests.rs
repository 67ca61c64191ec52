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
