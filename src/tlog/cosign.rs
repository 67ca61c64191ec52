//! Witness cosignatures of checkpoints, C2SP tlog-cosignature v1 with
//! Ed25519: a note signature (algorithm 0x04) whose signature is a
//! big-endian u64 POSIX timestamp then Ed25519 over `"cosignature/v1\n"`,
//! `"time <timestamp>\n"` and the checkpoint's whole text. A cosignature
//! states that, at that time, the cosigner had seen no tree of the log
//! larger than this one, and that this one extends every one it saw
//! before. The node's key cosigns under a name of its own; the prefix
//! keeps these messages apart from the checkpoints and records it signs.

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use signed_note::{Note, VerifierList};

use super::note::{check_origin, CheckpointError, MAX_CHECKPOINT_BYTES};

/// The signed-note algorithm byte of an Ed25519 cosignature.
const ALG_COSIGNATURE_V1: u8 = 0x04;

/// The most a cosignature's time may run ahead of the verifier's clock.
pub const MAX_FUTURE_SECS: u64 = 300;

/// The key id of an Ed25519 cosigner `name` with `key`:
/// `SHA-256(name || "\n" || 0x04 || key)[:4]`.
pub fn key_id(name: &str, key: &VerifyingKey) -> u32 {
    signed_note::key_id(name, &encoded(key))
}

fn encoded(key: &VerifyingKey) -> Vec<u8> {
    let mut out = vec![ALG_COSIGNATURE_V1];
    out.extend_from_slice(key.as_bytes());
    out
}

/// The message a cosignature at `time` signs over a checkpoint's `text`.
fn message(time: u64, text: &[u8]) -> Vec<u8> {
    let mut m = format!("cosignature/v1\ntime {time}\n").into_bytes();
    m.extend_from_slice(text);
    m
}

/// Adds the cosignature of `name` with `key` at `time` to the signed
/// checkpoint `note` (a cosignature by the same key is replaced).
///
/// # Errors
/// [`CheckpointError::Origin`] for a name a note cannot carry,
/// [`CheckpointError::Malformed`] for a note that does not parse.
pub fn cosign(
    note: &[u8],
    name: &str,
    key: &SigningKey,
    time: u64,
) -> Result<Vec<u8>, CheckpointError> {
    check_origin(name)?;
    if note.len() > MAX_CHECKPOINT_BYTES {
        return Err(CheckpointError::TooLarge);
    }
    let mut parsed =
        Note::from_bytes(note).map_err(|e| CheckpointError::Malformed(e.to_string()))?;
    let signer = Cosigner { name, key, time };
    parsed
        .add_sigs(&[&signer])
        .map_err(|e| CheckpointError::Malformed(e.to_string()))?;
    Ok(parsed.to_bytes())
}

/// The time of `name`'s valid cosignature on `note`, by `key`: `None`
/// when it carries none; an error when it carries one that does not
/// verify, or whose time is more than [`MAX_FUTURE_SECS`] past `now`.
///
/// # Errors
/// [`CheckpointError::BadSignature`], [`CheckpointError::Malformed`].
pub fn cosigned_at(
    note: &[u8],
    name: &str,
    key: &VerifyingKey,
    now: u64,
) -> Result<Option<u64>, CheckpointError> {
    if note.len() > MAX_CHECKPOINT_BYTES {
        return Err(CheckpointError::TooLarge);
    }
    let parsed = Note::from_bytes(note).map_err(|e| CheckpointError::Malformed(e.to_string()))?;
    let verifier = CosignVerifier {
        name: name.to_owned(),
        id: key_id(name, key),
        key: *key,
    };
    match parsed.verify(&VerifierList::new(vec![Box::new(verifier)])) {
        Ok((verified, _)) => {
            let time = verified
                .iter()
                .find_map(|s| timestamp(s.signature()))
                .ok_or_else(|| {
                    CheckpointError::Malformed("a cosignature without its time".into())
                })?;
            if time > now.saturating_add(MAX_FUTURE_SECS) {
                return Err(CheckpointError::Malformed(format!(
                    "{name}'s cosignature is dated {time}, in the future"
                )));
            }
            Ok(Some(time))
        }
        Err(signed_note::NoteError::UnverifiedNote) => Ok(None),
        Err(signed_note::NoteError::InvalidSignature { .. }) => {
            Err(CheckpointError::BadSignature(name.to_owned()))
        }
        Err(e) => Err(CheckpointError::Malformed(e.to_string())),
    }
}

/// The timestamp of a cosignature's 72 bytes.
fn timestamp(sig: &[u8]) -> Option<u64> {
    (sig.len() == 72).then(|| u64::from_be_bytes(sig[..8].try_into().expect("8 bytes")))
}

struct Cosigner<'a> {
    name: &'a str,
    key: &'a SigningKey,
    time: u64,
}

impl signed_note::Signer for Cosigner<'_> {
    fn name(&self) -> &str {
        self.name
    }

    fn key_id(&self) -> u32 {
        key_id(self.name, &self.key.verifying_key())
    }

    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, ed25519_dalek::SignatureError> {
        let mut out = self.time.to_be_bytes().to_vec();
        out.extend_from_slice(&self.key.sign(&message(self.time, msg)).to_bytes());
        Ok(out)
    }
}

struct CosignVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
}

impl signed_note::Verifier for CosignVerifier {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.id
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Some(time) = timestamp(sig).filter(|t| *t <= i64::MAX as u64) else {
            return false;
        };
        let Ok(bytes) = <[u8; 64]>::try_from(&sig[8..]) else {
            return false;
        };
        self.key
            .verify_strict(&message(time, msg), &Signature::from_bytes(&bytes))
            .is_ok()
    }
}
