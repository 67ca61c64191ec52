use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::access::Scope;

fn ring() -> (tempfile::TempDir, KeyRing) {
    let dir = tempfile::tempdir().unwrap();
    let ring = KeyRing::in_dir(dir.path());
    (dir, ring)
}

fn read_only() -> Scopes {
    Scopes::from_iter([Scope::Read])
}

#[test]
fn a_new_key_works_and_its_secret_is_stored_only_as_a_hash() {
    let (_dir, ring) = ring();
    let made = ring.create("ci", read_only(), None).unwrap();
    assert_eq!(
        ring.verify(&made.token, unix_now()),
        KeyVerdict::Valid {
            id: made.key.id.clone(),
            scopes: read_only()
        }
    );
    // The secret is everything after the id (base64url: it may hold `_`
    // itself, so not just what follows the last one).
    let secret = made
        .token
        .strip_prefix(&format!("{TOKEN_PREFIX}{}_", made.key.id))
        .unwrap();
    assert!(secret.len() >= 43, "{secret}");
    let file = fs::read_to_string(ring.path()).unwrap();
    assert!(!file.contains(secret), "the secret is in the key file");
    assert!(file.contains(&made.key.secret_sha256));
    let mode = fs::metadata(ring.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the key file is readable by others");
}

#[test]
fn a_wrong_secret_or_a_malformed_token_is_unknown() {
    let (_dir, ring) = ring();
    let made = ring.create("ci", read_only(), None).unwrap();
    let wrong = format!("{TOKEN_PREFIX}{}_{}", made.key.id, "A".repeat(43));
    let empty_secret = format!("{TOKEN_PREFIX}{}_", made.key.id);
    let now = unix_now();
    for token in [
        wrong.as_str(),
        "amk_",
        "amk_0123_abc",
        "amk_zzzzzzzzzzzzzzzz_abc",
        empty_secret.as_str(),
        &made.token[1..],
        "",
    ] {
        assert_eq!(ring.verify(token, now), KeyVerdict::Unknown, "{token:?}");
    }
}

#[test]
fn revoked_and_expired_keys_are_refused_by_name() {
    let (_dir, ring) = ring();
    let day = ring
        .create("a day", read_only(), Some(Duration::from_secs(86_400)))
        .unwrap();
    let now = unix_now();
    assert!(matches!(
        ring.verify(&day.token, now),
        KeyVerdict::Valid { .. }
    ));
    assert_eq!(
        ring.verify(&day.token, now + 86_401),
        KeyVerdict::Expired {
            id: day.key.id.clone()
        }
    );
    assert!(ring.revoke(&day.key.id).unwrap());
    assert!(!ring.revoke(&day.key.id).unwrap(), "revoked already");
    assert_eq!(
        ring.verify(&day.token, now),
        KeyVerdict::Revoked {
            id: day.key.id.clone()
        }
    );
    assert!(matches!(
        ring.revoke("0000000000000000"),
        Err(KeyError::NoSuchKey(_))
    ));
}

#[test]
fn another_reader_sees_a_change_once_the_recheck_time_has_passed() {
    let (dir, writer) = ring();
    let reader = KeyRing::in_dir(dir.path());
    let first = writer.create("first", read_only(), None).unwrap();
    assert!(matches!(
        reader.verify(&first.token, unix_now()),
        KeyVerdict::Valid { .. }
    ));
    writer.revoke(&first.key.id).unwrap();
    // Until RECHECK has passed the reader goes on with what it read.
    assert!(matches!(
        reader.verify(&first.token, unix_now()),
        KeyVerdict::Valid { .. }
    ));
    // Put its last look back in time instead of waiting.
    reader.cache.lock().unwrap().checked = Some(Instant::now() - RECHECK);
    assert!(matches!(
        reader.verify(&first.token, unix_now()),
        KeyVerdict::Revoked { .. }
    ));
    // The key it found at its first read is no change; the revocation is.
    assert_eq!(
        reader.take_changes(),
        [KeyChange::Revoked {
            id: first.key.id.clone()
        }]
    );
    let second = writer.create("second", read_only(), None).unwrap();
    reader.cache.lock().unwrap().checked = Some(Instant::now() - RECHECK);
    assert!(reader.any());
    assert_eq!(
        reader.take_changes(),
        [KeyChange::Created {
            id: second.key.id,
            name: "second".into()
        }]
    );
    assert!(reader.take_changes().is_empty());
}

#[test]
fn a_corrupt_file_keeps_the_keys_read_before_and_says_why() {
    let (_dir, ring) = ring();
    let made = ring.create("ci", read_only(), None).unwrap();
    assert!(ring.any());
    fs::write(ring.path(), b"{ not json").unwrap();
    ring.cache.lock().unwrap().checked = None;
    assert!(matches!(
        ring.verify(&made.token, unix_now()),
        KeyVerdict::Valid { .. }
    ));
    assert!(ring.last_error().is_some());
    assert!(matches!(ring.list(), Err(KeyError::Corrupt { .. })));
    assert!(matches!(
        ring.create("other", read_only(), None),
        Err(KeyError::Corrupt { .. })
    ));
}

#[test]
fn names_and_scopes_are_checked() {
    let (_dir, ring) = ring();
    let long = "x".repeat(MAX_NAME_BYTES + 1);
    for name in ["", "  ", "a\nb", long.as_str()] {
        assert!(
            matches!(
                ring.create(name, read_only(), None),
                Err(KeyError::Invalid(_))
            ),
            "{name:?}"
        );
    }
    assert!(matches!(
        ring.create("none", Scopes::NONE, None),
        Err(KeyError::Invalid(_))
    ));
    assert!(!ring.any());
}

#[test]
fn an_oversized_file_is_not_read() {
    let (_dir, ring) = ring();
    let f = File::create(ring.path()).unwrap();
    f.set_len(MAX_FILE_BYTES + 1).unwrap();
    assert!(matches!(ring.list(), Err(KeyError::Corrupt { .. })));
}
