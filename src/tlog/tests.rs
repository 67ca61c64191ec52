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

/// An in-memory RFC 6962 tree of `entries`, for proofs.
struct MemoryTree(Vec<Hash>);

impl tlog_tiles::HashReader for MemoryTree {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        Ok(indexes.iter().map(|i| self.0[*i as usize]).collect())
    }
}

impl MemoryTree {
    fn of(entries: &[&[u8]]) -> Self {
        let mut tree = Self(Vec::new());
        for (n, e) in entries.iter().enumerate() {
            let added = tlog_tiles::stored_hashes(n as u64, e, &tree).unwrap();
            tree.0.extend(added);
        }
        tree
    }

    fn root(&self, size: u64) -> Hash {
        tlog_tiles::tree_hash(size, self).unwrap()
    }

    fn proof(&self, from: u64, to: u64) -> TreeProof {
        tlog_tiles::prove_tree(to, from, self).unwrap()
    }
}

/// A checkpoint of `size` and `root` signed by `notary`, opened.
fn signed(notary: &Notary, size: u64, root: Hash) -> (Checkpoint, String) {
    let note = notary.sign(size, root);
    let vkey = notary.verifier_key();
    let cp = Checkpoint::open(&note, &vkey, None).unwrap();
    (cp, String::from_utf8(note.to_vec()).unwrap())
}

#[test]
fn a_witness_tells_an_extension_from_a_fork_and_its_proof_verifies_offline() {
    use witness::{relate, Equivocation, EquivocationError, Fork, Relation};
    let (notary, key) = new_notary();
    let peer = crate::identity::peer_id_of(&key);
    let honest = MemoryTree::of(&[b"a", b"b", b"c", b"d", b"e", b"f", b"g"]);
    let forked = MemoryTree::of(&[b"a", b"b", b"X", b"d", b"e", b"f", b"g"]);
    let old = signed(&notary, 3, honest.root(3));
    let grown = signed(&notary, 7, honest.root(7));
    let extends = relate(
        &peer,
        (&old.0, &old.1),
        (&grown.0, &grown.1),
        honest.root(3),
        &honest.proof(3, 7),
    );
    assert_eq!(extends, Some(Relation::Extends));
    // A proof that leads nowhere proves nothing either way.
    let nothing = relate(
        &peer,
        (&old.0, &old.1),
        (&grown.0, &grown.1),
        honest.root(3),
        &honest.proof(2, 7),
    );
    assert_eq!(nothing, None);

    // The log signs a tree whose first 3 entries differ: its own proof
    // from its own prefix convicts it.
    let lie = signed(&notary, 7, forked.root(7));
    let Some(Relation::Forked(evidence)) = relate(
        &peer,
        (&old.0, &old.1),
        (&lie.0, &lie.1),
        forked.root(3),
        &forked.proof(3, 7),
    ) else {
        panic!("the fork was not seen");
    };
    assert_eq!(evidence.verify(), Ok(Fork::NotExtension { from: 3, to: 7 }));
    // Through JSON, as it is kept and served.
    let json = serde_json::to_string(&evidence).unwrap();
    let back: Equivocation = serde_json::from_str(&json).unwrap();
    assert_eq!(back.verify(), Ok(Fork::NotExtension { from: 3, to: 7 }));

    // One size, two roots.
    let twin = signed(&notary, 7, forked.root(7));
    let Some(Relation::Forked(same)) = relate(
        &peer,
        (&grown.0, &grown.1),
        (&twin.0, &twin.1),
        forked.root(7),
        &Vec::new(),
    ) else {
        panic!("two roots for one size were not seen");
    };
    assert_eq!(same.verify(), Ok(Fork::SameSize { size: 7 }));

    // Tampered evidence does not convict.
    let mut wrong_peer = evidence.clone();
    wrong_peer.peer = crate::identity::peer_id_of(&crate::identity::generate());
    assert!(matches!(
        wrong_peer.verify(),
        Err(EquivocationError::Checkpoint(_))
    ));
    let mut honest_prefix = evidence.clone();
    honest_prefix.prefix_root = Some(encode_hash(&honest.root(3)));
    assert!(matches!(
        honest_prefix.verify(),
        Err(EquivocationError::Proof(_))
    ));
    let mut agreeing = evidence.clone();
    agreeing.second = grown.1.clone();
    agreeing.prefix_root = Some(encode_hash(&honest.root(3)));
    agreeing.proof = honest.proof(3, 7).iter().map(encode_hash).collect();
    assert!(matches!(
        agreeing.verify(),
        Err(EquivocationError::Consistent(_))
    ));
    let mut no_proof = evidence;
    no_proof.proof.clear();
    assert!(matches!(
        no_proof.verify(),
        Err(EquivocationError::Proof(_))
    ));
    let mut one_root = same;
    one_root.second = one_root.first.clone();
    assert!(matches!(
        one_root.verify(),
        Err(EquivocationError::Consistent(_))
    ));
}
