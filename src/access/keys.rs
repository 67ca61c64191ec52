//! The node's API keys. A key is given out once, as a token
//! `amk_<id>_<secret>` (the id 16 hex digits, the secret 32 random bytes
//! in unpadded base64url); the node keeps its id, name, scopes, times and
//! the SHA-256 of its secret, never the secret. A fast hash is enough:
//! the secret has 256 bits of entropy, so no dictionary helps, and the
//! stored hash is compared in constant time.
//!
//! The keys live in [`KEYS_FILE`] in the data directory, written whole
//! to a temporary file and renamed (never half-written), under an
//! advisory lock so two `agentmesh keys` runs do not lose each other's
//! change. A running node reads the file again when it changes (checked
//! at most once per [`RECHECK`]), so a key created or revoked with
//! `agentmesh keys` takes effect within that time, without a restart.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Scopes;

/// The key file's name in the data directory.
pub const KEYS_FILE: &str = "api-keys.json";

/// The prefix of every API key token.
pub const TOKEN_PREFIX: &str = "amk_";

/// How often a running node looks whether the key file changed.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Most keys one file holds.
pub const MAX_KEYS: usize = 10_000;

/// Largest key file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 8 << 20;

/// Longest key name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// What is kept of one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredKey {
    /// Its id: 16 hex digits, also in the token.
    pub id: String,
    /// The name the operator gave it (who holds it).
    pub name: String,
    /// What it allows.
    pub scopes: Scopes,
    /// When it was made (Unix seconds).
    pub created: u64,
    /// When it stops working (Unix seconds), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// When it was revoked (Unix seconds), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<u64>,
    /// SHA-256 of the secret, hex.
    pub secret_sha256: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    version: u32,
    keys: Vec<StoredKey>,
}

/// A key just made: what is stored, and the token, shown once.
#[derive(Debug)]
pub struct NewKey {
    /// What is stored.
    pub key: StoredKey,
    /// The token to hand to the client: not kept anywhere.
    pub token: String,
}

/// What checking a presented API key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyVerdict {
    /// A live key: its id and scopes.
    Valid {
        /// The key's id.
        id: String,
        /// What it allows.
        scopes: Scopes,
    },
    /// Not a token of the key form, or no key has its id, or the secret
    /// is not the key's.
    Unknown,
    /// The key expired.
    Expired {
        /// The key's id.
        id: String,
    },
    /// The key was revoked.
    Revoked {
        /// The key's id.
        id: String,
    },
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The key file is not what this version writes.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A name or scope set that cannot be stored.
    #[error("{0}")]
    Invalid(String),
    /// No key has this id.
    #[error("no API key has the id {0:?}")]
    NoSuchKey(String),
}

/// The node's API keys, read from (and written to) [`KEYS_FILE`].
#[derive(Debug)]
pub struct KeyRing {
    path: PathBuf,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    checked: Option<Instant>,
    stamp: Option<Stamp>,
    keys: HashMap<String, StoredKey>,
    /// Why the last read failed, if it did (the keys then stay as they
    /// were last read).
    error: Option<String>,
    /// What changed in the file since it was first read, not yet taken.
    changes: Vec<KeyChange>,
}

/// A change to the key file a running node noticed (made by `agentmesh
/// keys` beside it), for its audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyChange {
    /// A key appeared.
    Created {
        /// Its id.
        id: String,
        /// Its name.
        name: String,
    },
    /// A key was revoked, or removed from the file.
    Revoked {
        /// Its id.
        id: String,
    },
}

/// Most changes kept until taken.
const MAX_CHANGES: usize = 1024;

/// What tells that the file changed: inode, size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl KeyRing {
    /// The key ring of a data directory (the file need not exist).
    pub fn in_dir(data_dir: &Path) -> KeyRing {
        KeyRing {
            path: data_dir.join(KEYS_FILE),
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The key file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes a key named `name` with `scopes`, valid for `lifetime` when
    /// given, and stores it.
    ///
    /// # Errors
    /// [`KeyError::Invalid`] for an empty or overlong name or no scope,
    /// or when the file already holds [`MAX_KEYS`]; [`KeyError::Io`] and
    /// [`KeyError::Corrupt`] from the file.
    pub fn create(
        &self,
        name: &str,
        scopes: Scopes,
        lifetime: Option<Duration>,
    ) -> Result<NewKey, KeyError> {
        if name.trim().is_empty()
            || name.len() > MAX_NAME_BYTES
            || name.chars().any(char::is_control)
        {
            return Err(KeyError::Invalid(format!(
                "a key's name must be 1 to {MAX_NAME_BYTES} bytes of printable text"
            )));
        }
        if scopes.is_empty() {
            return Err(KeyError::Invalid("a key needs at least one scope".into()));
        }
        let id = hex::encode(rand::random::<[u8; 8]>());
        let secret =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let now = unix_now();
        let key = StoredKey {
            id: id.clone(),
            name: name.to_owned(),
            scopes,
            created: now,
            expires: lifetime.map(|d| now.saturating_add(d.as_secs())),
            revoked: None,
            secret_sha256: hex::encode(Sha256::digest(secret.as_bytes())),
        };
        self.change(|file| {
            if file.keys.len() >= MAX_KEYS {
                return Err(KeyError::Invalid(format!(
                    "the key file holds {MAX_KEYS} keys, the most it may"
                )));
            }
            file.keys.push(key.clone());
            Ok(())
        })?;
        Ok(NewKey {
            key,
            token: format!("{TOKEN_PREFIX}{id}_{secret}"),
        })
    }

    /// Revokes the key `id` (it stays listed, marked revoked). Returns
    /// false when it was revoked already.
    ///
    /// # Errors
    /// [`KeyError::NoSuchKey`]; [`KeyError::Io`] and
    /// [`KeyError::Corrupt`] from the file.
    pub fn revoke(&self, id: &str) -> Result<bool, KeyError> {
        let mut changed = false;
        self.change(|file| {
            let key = file
                .keys
                .iter_mut()
                .find(|k| k.id == id)
                .ok_or_else(|| KeyError::NoSuchKey(id.to_owned()))?;
            if key.revoked.is_none() {
                key.revoked = Some(unix_now());
                changed = true;
            }
            Ok(())
        })?;
        Ok(changed)
    }

    /// Every key, in the order they were made.
    ///
    /// # Errors
    /// [`KeyError::Io`] and [`KeyError::Corrupt`] from the file.
    pub fn list(&self) -> Result<Vec<StoredKey>, KeyError> {
        Ok(read_file(&self.path)?.keys)
    }

    /// Whether any key is stored (revoked and expired ones count: the
    /// operator set keys up).
    pub fn any(&self) -> bool {
        self.refresh();
        !self.cache.lock().expect("key cache").keys.is_empty()
    }

    /// Checks a presented token at `now` (Unix seconds). The file is
    /// read again first when it changed and [`RECHECK`] has passed.
    pub fn verify(&self, token: &str, now: u64) -> KeyVerdict {
        let Some((id, secret)) = split_token(token) else {
            return KeyVerdict::Unknown;
        };
        self.refresh();
        let cache = self.cache.lock().expect("key cache");
        let Some(key) = cache.keys.get(id) else {
            return KeyVerdict::Unknown;
        };
        let presented = Sha256::digest(secret.as_bytes());
        let stored = hex::decode(&key.secret_sha256).unwrap_or_default();
        if !bool::from(presented.as_slice().ct_eq(&stored)) {
            return KeyVerdict::Unknown;
        }
        if key.revoked.is_some() {
            return KeyVerdict::Revoked { id: key.id.clone() };
        }
        if key.expires.is_some_and(|at| now >= at) {
            return KeyVerdict::Expired { id: key.id.clone() };
        }
        KeyVerdict::Valid {
            id: key.id.clone(),
            scopes: key.scopes,
        }
    }

    /// The changes to the key file noticed since the last call (none for
    /// the keys the first read found).
    pub fn take_changes(&self) -> Vec<KeyChange> {
        std::mem::take(&mut self.cache.lock().expect("key cache").changes)
    }

    /// Why the key file could not be read the last time, if it could
    /// not (the keys read before stay in force).
    pub fn last_error(&self) -> Option<String> {
        self.cache.lock().expect("key cache").error.clone()
    }

    /// Reads the file again if it changed and [`RECHECK`] has passed
    /// since the last look.
    fn refresh(&self) {
        let mut cache = self.cache.lock().expect("key cache");
        if cache.checked.is_some_and(|at| at.elapsed() < RECHECK) {
            return;
        }
        cache.checked = Some(Instant::now());
        let stamp = stamp(&self.path);
        if stamp == cache.stamp {
            return;
        }
        match read_file(&self.path) {
            Ok(file) => {
                let keys: HashMap<String, StoredKey> =
                    file.keys.into_iter().map(|k| (k.id.clone(), k)).collect();
                if cache.stamp.is_some() {
                    let changes = diff(&cache.keys, &keys);
                    let room = MAX_CHANGES.saturating_sub(cache.changes.len());
                    cache.changes.extend(changes.into_iter().take(room));
                }
                cache.keys = keys;
                cache.stamp = stamp;
                cache.error = None;
            }
            Err(e) => {
                tracing::error!(error = %e, "the API key file could not be read; the keys read before stay in force");
                cache.error = Some(e.to_string());
            }
        }
    }

    /// Reads, changes and writes the file back under its lock.
    fn change(
        &self,
        edit: impl FnOnce(&mut KeyFile) -> Result<(), KeyError>,
    ) -> Result<(), KeyError> {
        let io = |source| KeyError::Io {
            path: self.path.clone(),
            source,
        };
        let lock_path = self.path.with_extension("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor this function owns; the lock goes
        // with the descriptor when `lock` is dropped.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        let mut file = read_file(&self.path)?;
        edit(&mut file)?;
        file.version = 1;
        let mut bytes = serde_json::to_vec_pretty(&file).expect("keys serialise");
        bytes.push(b'\n');
        let tmp = self.path.with_extension("json.tmp");
        let mut out = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        out.write_all(&bytes).map_err(io)?;
        out.sync_all().map_err(io)?;
        fs::rename(&tmp, &self.path).map_err(io)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        drop(lock);
        // The next check reads the new file at once.
        self.cache.lock().expect("key cache").checked = None;
        Ok(())
    }
}

/// What changed from `before` to `after`.
fn diff(before: &HashMap<String, StoredKey>, after: &HashMap<String, StoredKey>) -> Vec<KeyChange> {
    let mut changes = Vec::new();
    for (id, key) in after {
        match before.get(id) {
            None => changes.push(KeyChange::Created {
                id: id.clone(),
                name: key.name.clone(),
            }),
            Some(old) if old.revoked.is_none() && key.revoked.is_some() => {
                changes.push(KeyChange::Revoked { id: id.clone() })
            }
            Some(_) => {}
        }
    }
    for id in before.keys().filter(|id| !after.contains_key(*id)) {
        changes.push(KeyChange::Revoked { id: id.clone() });
    }
    changes.sort_by(|a, b| change_id(a).cmp(change_id(b)));
    changes
}

fn change_id(change: &KeyChange) -> &str {
    match change {
        KeyChange::Created { id, .. } | KeyChange::Revoked { id } => id,
    }
}

/// The id and secret of a token of the key form.
fn split_token(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) && !secret.is_empty())
        .then_some((id, secret))
}

/// Whether a bearer token has the API key form (so it is checked as a
/// key, not as a JWT or the admin token).
pub fn looks_like_key(token: &str) -> bool {
    token.starts_with(TOKEN_PREFIX)
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = fs::metadata(path).ok()?;
    Some(Stamp {
        ino: meta.ino(),
        len: meta.len(),
        mtime: meta.mtime(),
        mtime_nsec: meta.mtime_nsec(),
    })
}

fn read_file(path: &Path) -> Result<KeyFile, KeyError> {
    let corrupt = |reason: String| KeyError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let bytes = match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(KeyFile::default()),
        Err(source) => {
            return Err(KeyError::Io {
                path: path.to_owned(),
                source,
            })
        }
        Ok(meta) if meta.len() > MAX_FILE_BYTES => {
            return Err(corrupt(format!(
                "{} bytes; a key file holds at most {MAX_FILE_BYTES}",
                meta.len()
            )))
        }
        Ok(_) => fs::read(path).map_err(|source| KeyError::Io {
            path: path.to_owned(),
            source,
        })?,
    };
    let file: KeyFile = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if file.version != 1 {
        return Err(corrupt(format!(
            "version {}; this node reads version 1",
            file.version
        )));
    }
    if file.keys.len() > MAX_KEYS {
        return Err(corrupt(format!("more than {MAX_KEYS} keys")));
    }
    Ok(file)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
