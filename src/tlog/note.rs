//! Checkpoints: the log's tree head (origin, size, root hash) as a C2SP
//! tlog-checkpoint, signed with the node's Ed25519 key as a C2SP signed
//! note (algorithm 0x01). [`Notary`] signs them; [`Checkpoint::open`]
//! checks one against a verifier key, as any client can.

use std::sync::{Arc, Mutex};

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use signed_note::{Note, StandardVerifier, VerifierList};

use super::Hash;

/// The longest origin (and key name) a node takes.
const MAX_ORIGIN_CHARS: usize = 200;

/// The most bytes of a checkpoint note this node reads (a checkpoint
/// with a few dozen cosignatures is a few KiB).
pub const MAX_CHECKPOINT_BYTES: usize = 16 * 1024;

/// Why a checkpoint (or an origin) was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CheckpointError {
    /// The origin is empty, too long, or has a space, a `+` or a control
    /// character.
    #[error("the log origin {0:?} must be 1 to 200 characters without spaces, '+' or control characters")]
    Origin(String),
    /// The verifier key does not parse.
    #[error("the verifier key is malformed")]
    VerifierKey,
    /// Over [`MAX_CHECKPOINT_BYTES`].
    #[error("the checkpoint is over {MAX_CHECKPOINT_BYTES} bytes")]
    TooLarge,
    /// Not a signed note, or its text not a checkpoint.
    #[error("the checkpoint is malformed: {0}")]
    Malformed(String),
    /// No valid signature by the key asked for.
    #[error("the checkpoint is not signed by {0}")]
    Unsigned(String),
    /// A signature by the key asked for does not verify.
    #[error("a signature by {0} on the checkpoint does not verify")]
    BadSignature(String),
    /// Signed, but for another log.
    #[error("the checkpoint's origin is {found:?}, not {expected:?}")]
    WrongOrigin {
        /// The origin asked for.
        expected: String,
        /// The checkpoint's.
        found: String,
    },
}

/// A checked checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The log's origin line.
    pub origin: String,
    /// How many entries the tree holds.
    pub size: u64,
    /// Its RFC 6962 root hash.
    pub root: Hash,
}

impl Checkpoint {
    /// Opens a signed checkpoint `note`: it must carry a valid signature
    /// by the verifier key `vkey` (`<name>+<hex id>+<base64 key>`) and,
    /// when `origin` is given, be that log's. Other signatures (witness
    /// cosignatures, other keys) are left unchecked.
    ///
    /// # Errors
    /// [`CheckpointError`], naming what failed.
    pub fn open(note: &[u8], vkey: &str, origin: Option<&str>) -> Result<Self, CheckpointError> {
        if note.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge);
        }
        let verifier = StandardVerifier::new(vkey).map_err(|_| CheckpointError::VerifierKey)?;
        let name = signed_note::Verifier::name(&verifier).to_owned();
        let parsed =
            Note::from_bytes(note).map_err(|e| CheckpointError::Malformed(e.to_string()))?;
        match parsed.verify(&VerifierList::new(vec![Box::new(verifier)])) {
            Ok(_) => {}
            Err(signed_note::NoteError::UnverifiedNote) => {
                return Err(CheckpointError::Unsigned(name))
            }
            Err(signed_note::NoteError::InvalidSignature { .. }) => {
                return Err(CheckpointError::BadSignature(name))
            }
            Err(e) => return Err(CheckpointError::Malformed(e.to_string())),
        }
        let body = tlog_tiles::Checkpoint::from_bytes(parsed.text())
            .map_err(|e| CheckpointError::Malformed(e.to_string()))?;
        if !body.extension().is_empty() {
            return Err(CheckpointError::Malformed(
                "a checkpoint of this log has three lines, no extension".into(),
            ));
        }
        if let Some(expected) = origin {
            if body.origin() != expected {
                return Err(CheckpointError::WrongOrigin {
                    expected: expected.to_owned(),
                    found: body.origin().to_owned(),
                });
            }
        }
        Ok(Self {
            origin: body.origin().to_owned(),
            size: body.size(),
            root: *body.hash(),
        })
    }
}

/// A tree head (size, root) and its signed note.
type Signed = (u64, Hash, Arc<Vec<u8>>);

/// Signs this node's checkpoints: its log's origin and the node key.
/// The latest note is kept, so that asking again for the same tree head
/// signs nothing (Ed25519 is deterministic: the bytes would be the same).
pub struct Notary {
    origin: String,
    key: Arc<SigningKey>,
    latest: Mutex<Option<Signed>>,
}

impl Notary {
    /// The notary of the log named `origin`, signing with `key`.
    ///
    /// # Errors
    /// [`CheckpointError::Origin`] for an origin a note cannot carry.
    pub fn new(origin: &str, key: Arc<SigningKey>) -> Result<Self, CheckpointError> {
        check_origin(origin)?;
        Ok(Self {
            origin: origin.to_owned(),
            key,
            latest: Mutex::new(None),
        })
    }

    /// The default origin of a node's log: `agentmesh/` and its peer id.
    pub fn default_origin(peer_id: &str) -> String {
        format!("agentmesh/{peer_id}")
    }

    /// The node key it signs with (signed answers are signed with it too).
    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    /// The log's origin, which is also the name of its key.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The verifier key clients check checkpoints with, in the note
    /// format: `<origin>+<hex key id>+<base64(0x01 || public key)>`.
    pub fn verifier_key(&self) -> String {
        verifier_key(&self.origin, &self.key.verifying_key())
    }

    /// The signed checkpoint of the tree of `size` entries with root `root`.
    pub fn sign(&self, size: u64, root: Hash) -> Arc<Vec<u8>> {
        let mut latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((s, r, note)) = latest.as_ref() {
            if *s == size && *r == root {
                return note.clone();
            }
        }
        let text = tlog_tiles::Checkpoint::new(&self.origin, size, root, "")
            .expect("a checked origin and no extension make a checkpoint")
            .to_bytes();
        let mut note = Note::new(&text, &[]).expect("a checkpoint's text is a note's");
        let signer = NoteSigner {
            name: &self.origin,
            key: &self.key,
        };
        note.add_sigs(&[&signer])
            .expect("a checked origin is a valid key name");
        let note = Arc::new(note.to_bytes());
        *latest = Some((size, root, note.clone()));
        note
    }
}

/// The note verifier key of `key` under `name`.
pub fn verifier_key(name: &str, key: &VerifyingKey) -> String {
    signed_note::new_ed25519_verifier_key(name, key)
}

/// Refuses an origin a note cannot carry as its first line and key name.
///
/// # Errors
/// [`CheckpointError::Origin`].
pub fn check_origin(origin: &str) -> Result<(), CheckpointError> {
    let fine = !origin.is_empty()
        && origin.chars().count() <= MAX_ORIGIN_CHARS
        && signed_note::is_key_name_valid(origin)
        && !origin.chars().any(char::is_control);
    if fine {
        Ok(())
    } else {
        Err(CheckpointError::Origin(origin.to_owned()))
    }
}

/// The node key as a signed-note signer (Ed25519, algorithm 0x01).
struct NoteSigner<'a> {
    name: &'a str,
    key: &'a SigningKey,
}

impl signed_note::Signer for NoteSigner<'_> {
    fn name(&self) -> &str {
        self.name
    }

    fn key_id(&self) -> u32 {
        let mut encoded = vec![0x01];
        encoded.extend_from_slice(self.key.verifying_key().as_bytes());
        signed_note::key_id(self.name, &encoded)
    }

    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, ed25519_dalek::SignatureError> {
        Ok(self.key.sign(msg).to_bytes().to_vec())
    }
}
