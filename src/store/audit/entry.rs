//! One audit entry: what happened ([`AuditEvent`]), as kept in the chain
//! ([`AuditEntry`]), its canonical encoding and its hash
//! (docs/protocol.md#audit), and the signed checkpoint that stands for
//! the entries retention pruned ([`AuditCheckpoint`]).

use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The hash every chain starts from: the `prev` of entry 1.
pub const GENESIS: [u8; 32] = [0; 32];

/// What the hash of an entry covers first (domain separation).
const ENTRY_DOMAIN: &[u8] = b"agentmesh/audit/v1\n";
/// What a checkpoint's signature covers first.
const CHECKPOINT_DOMAIN: &[u8] = b"agentmesh/audit-checkpoint/v1\n";
/// The stored form's version byte.
const STORED_V1: u8 = 1;

/// Longest field kept (actor, address, target, outcome, request id),
/// bytes: longer values are cut at a character boundary, so an
/// adversary's long id cannot make the log large.
pub const MAX_FIELD_BYTES: usize = 512;

/// What an entry says was done. The strings never change (they are
/// hashed into the chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AuditAction {
    /// `POST /agents`: a registration (or a take-over by transfer).
    Register,
    /// `PUT /agents/{id}`.
    Update,
    /// `DELETE /agents/{id}`.
    Delete,
    /// A bulk import (`POST /admin/import` or `agentmesh import`).
    Import,
    /// `POST /crawl`.
    CrawlRequest,
    /// An operator suspension.
    Suspend,
    /// A suspension lifted.
    Unsuspend,
    /// An id handed over to another registry.
    Transfer,
    /// A tombstone accepted (a revocation or a remote deletion).
    Revoke,
    /// Records from peers refused by the judge (aggregated, see
    /// [`AuditAction::RemoteRefused`]'s entries' `count`).
    RemoteRefused,
    /// Another admin action.
    Admin,
    /// An API key made.
    KeyCreate,
    /// An API key revoked.
    KeyRevoke,
    /// Credentials missing or refused on a route that needs them.
    AuthFailed,
    /// A call to an agent through the gateway (its target is
    /// `{agent id}#{operation}`; the payload is never kept).
    Invoke,
}

impl AuditAction {
    /// Every action, in the order of their strings' documentation.
    pub const ALL: [AuditAction; 15] = [
        Self::Register,
        Self::Update,
        Self::Delete,
        Self::Import,
        Self::CrawlRequest,
        Self::Suspend,
        Self::Unsuspend,
        Self::Transfer,
        Self::Revoke,
        Self::RemoteRefused,
        Self::Admin,
        Self::KeyCreate,
        Self::KeyRevoke,
        Self::AuthFailed,
        Self::Invoke,
    ];

    /// The stable string form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Register => "register",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Import => "import",
            Self::CrawlRequest => "crawl_request",
            Self::Suspend => "suspend",
            Self::Unsuspend => "unsuspend",
            Self::Transfer => "transfer",
            Self::Revoke => "revoke",
            Self::RemoteRefused => "remote_refused",
            Self::Admin => "admin",
            Self::KeyCreate => "key_create",
            Self::KeyRevoke => "key_revoke",
            Self::AuthFailed => "auth_failed",
            Self::Invoke => "invoke",
        }
    }

    /// The action named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the action ended. Its string form is `ok`, `refused:<code>` or
/// `error:<code>`, the code being the API's error code or the judge's
/// refusal code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditOutcome {
    /// Done.
    Ok,
    /// Refused (bad input, not allowed, stale...), with its code.
    Refused(String),
    /// Failed on this node's side, with its code.
    Error(String),
}

impl AuditOutcome {
    /// The string form (hashed into the chain).
    pub fn to_wire(&self) -> String {
        match self {
            Self::Ok => "ok".to_owned(),
            Self::Refused(code) => format!("refused:{code}"),
            Self::Error(code) => format!("error:{code}"),
        }
    }

    /// The outcome of string form `s` (an unknown form reads as an error
    /// carrying it, so nothing stored is lost).
    pub fn from_wire(s: &str) -> Self {
        if s == "ok" {
            Self::Ok
        } else if let Some(code) = s.strip_prefix("refused:") {
            Self::Refused(code.to_owned())
        } else if let Some(code) = s.strip_prefix("error:") {
            Self::Error(code.to_owned())
        } else {
            Self::Error(s.to_owned())
        }
    }
}

/// What a caller asks the log to keep: who, from where, what, on what,
/// how it ended, under which request, and for a record write the signed
/// record as it stands after the write (kept content-addressed, so old
/// versions stay readable through the trail). Never a secret, a token
/// or a request body.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    /// `anonymous`, `admin-token`, `key:<id>`, `jwt:<subject>`, or `mesh`
    /// for what peers sent, `cli` for a command run on the data directory.
    pub actor: String,
    /// The client's address, when known.
    pub addr: Option<String>,
    /// What was done.
    pub action: AuditAction,
    /// On what: an agent id, a domain, a key id, a refusal code.
    pub target: String,
    /// How it ended.
    pub outcome: AuditOutcome,
    /// The request id (`x-request-id`), when there was a request.
    pub request_id: Option<String>,
    /// How many occurrences the entry stands for (1 but for aggregated
    /// refusals and imports).
    pub count: u64,
    /// The signed record bytes the write left (its envelope), if any.
    pub record: Option<Vec<u8>>,
    /// How long the action took, milliseconds, for the actions that
    /// measure it (a call through the gateway: until its answer's head).
    pub duration_ms: Option<u64>,
}

impl AuditEvent {
    /// An event with one occurrence, no address, request or record.
    pub fn new(
        actor: impl Into<String>,
        action: AuditAction,
        target: impl Into<String>,
        outcome: AuditOutcome,
    ) -> Self {
        Self {
            actor: actor.into(),
            addr: None,
            action,
            target: target.into(),
            outcome,
            request_id: None,
            count: 1,
            record: None,
            duration_ms: None,
        }
    }
}

/// One entry of the chain, as stored and as `GET /admin/audit` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Its position, from 1, without gaps.
    pub seq: u64,
    /// When, Unix milliseconds.
    pub time_ms: u64,
    /// Who ([`AuditEvent::actor`]).
    pub actor: String,
    /// From where.
    pub addr: Option<String>,
    /// What ([`AuditAction::as_str`]).
    pub action: String,
    /// On what.
    pub target: String,
    /// How it ended ([`AuditOutcome::to_wire`]).
    pub outcome: String,
    /// The request id.
    pub request_id: Option<String>,
    /// Occurrences the entry stands for.
    pub count: u64,
    /// SHA-256 of the signed record bytes the write left, hex: the key of
    /// the version kept (`agentmesh audit show`).
    pub record: Option<String>,
    /// How long the action took, milliseconds (a call through the
    /// gateway); absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The previous entry's hash, hex ([`GENESIS`] for the first).
    pub prev: String,
    /// This entry's hash, hex: SHA-256 over the domain, `prev` and the
    /// canonical encoding.
    pub hash: String,
}

/// Cuts `s` to [`MAX_FIELD_BYTES`] at a character boundary.
pub(crate) fn bounded(s: &str) -> String {
    if s.len() <= MAX_FIELD_BYTES {
        return s.to_owned();
    }
    let mut end = MAX_FIELD_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The entry's fields in their canonical order, before hashing.
pub(crate) struct Body<'a> {
    pub(crate) seq: u64,
    pub(crate) time_ms: u64,
    pub(crate) actor: &'a str,
    pub(crate) addr: &'a str,
    pub(crate) action: &'a str,
    pub(crate) target: &'a str,
    pub(crate) outcome: &'a str,
    pub(crate) request_id: &'a str,
    pub(crate) count: u64,
    pub(crate) record: Option<[u8; 32]>,
    pub(crate) duration_ms: Option<u64>,
}

impl Body<'_> {
    /// The canonical encoding: `seq`, `time_ms` (u64 big-endian), each
    /// string as a u32 big-endian byte length and its UTF-8 (an absent
    /// address or request id as the empty string), `count` (u64), then
    /// 0, or 1 and the 32-byte record hash; then, only for an entry with
    /// a duration, 1 and the milliseconds (u64), so that the entries
    /// written before durations were kept hash as they did.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.time_ms.to_be_bytes());
        for s in [
            self.actor,
            self.addr,
            self.action,
            self.target,
            self.outcome,
            self.request_id,
        ] {
            let len = u32::try_from(s.len()).expect("fields are bounded to MAX_FIELD_BYTES");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out.extend_from_slice(&self.count.to_be_bytes());
        match self.record {
            None => out.push(0),
            Some(h) => {
                out.push(1);
                out.extend_from_slice(&h);
            }
        }
        if let Some(ms) = self.duration_ms {
            out.push(1);
            out.extend_from_slice(&ms.to_be_bytes());
        }
        out
    }
}

/// The hash of an entry whose canonical encoding is `body`, after the
/// entry whose hash is `prev`.
pub(crate) fn chain_hash(prev: &[u8; 32], body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(ENTRY_DOMAIN);
    h.update(prev);
    h.update(body);
    h.finalize().into()
}

/// The stored value of an entry: a version byte, the canonical encoding,
/// the previous hash and the entry's hash.
pub(crate) fn encode_stored(body: &[u8], prev: &[u8; 32], hash: &[u8; 32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + body.len() + 64);
    out.push(STORED_V1);
    out.extend_from_slice(body);
    out.extend_from_slice(prev);
    out.extend_from_slice(hash);
    out
}

/// Reads fields off a byte string, failing on any shortfall.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{n} bytes wanted, {} left", self.0.len()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("took 8 bytes"),
        ))
    }

    fn string(&mut self) -> Result<String, String> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().expect("took 4 bytes"));
        let len = usize::try_from(len).map_err(|_| "length overflows".to_owned())?;
        if len > MAX_FIELD_BYTES {
            return Err(format!("a field of {len} bytes"));
        }
        String::from_utf8(self.take(len)?.to_vec()).map_err(|e| e.to_string())
    }

    fn hash(&mut self) -> Result<[u8; 32], String> {
        Ok(self.take(32)?.try_into().expect("took 32 bytes"))
    }
}

/// A stored entry read back: the entry, and the bytes its hash covers.
pub(crate) struct Decoded {
    pub(crate) entry: AuditEntry,
    pub(crate) body: Vec<u8>,
    pub(crate) prev: [u8; 32],
    pub(crate) hash: [u8; 32],
}

/// Decodes a stored entry.
///
/// # Errors
/// A sentence saying what does not parse.
pub(crate) fn decode_stored(bytes: &[u8]) -> Result<Decoded, String> {
    let Some((&STORED_V1, rest)) = bytes.split_first() else {
        return Err("unknown stored form".to_owned());
    };
    if rest.len() < 64 {
        return Err("too short".to_owned());
    }
    let (body, hashes) = rest.split_at(rest.len() - 64);
    let mut r = Reader(body);
    let seq = r.u64()?;
    let time_ms = r.u64()?;
    let actor = r.string()?;
    let addr = r.string()?;
    let action = r.string()?;
    let target = r.string()?;
    let outcome = r.string()?;
    let request_id = r.string()?;
    let count = r.u64()?;
    let record = match r.take(1)?[0] {
        0 => None,
        1 => Some(r.hash()?),
        other => return Err(format!("record flag {other}")),
    };
    let duration_ms = match r.0.first() {
        None => None,
        Some(1) => {
            r.take(1)?;
            Some(r.u64()?)
        }
        Some(other) => return Err(format!("duration flag {other}")),
    };
    if !r.0.is_empty() {
        return Err(format!("{} trailing bytes", r.0.len()));
    }
    let mut h = Reader(hashes);
    let prev = h.hash()?;
    let hash = h.hash()?;
    let some = |s: String| (!s.is_empty()).then_some(s);
    Ok(Decoded {
        entry: AuditEntry {
            seq,
            time_ms,
            actor,
            addr: some(addr),
            action,
            target,
            outcome,
            request_id: some(request_id),
            count,
            record: record.map(hex::encode),
            duration_ms,
            prev: hex::encode(prev),
            hash: hex::encode(hash),
        },
        body: body.to_vec(),
        prev,
        hash,
    })
}

/// What retention pruned, signed with the node's key: every entry up to
/// `through` is gone, and the last of them hashed to `last_hash`, which
/// the entry after it links to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCheckpoint {
    /// The last pruned entry's seq.
    pub through: u64,
    /// Its hash, hex.
    pub last_hash: String,
    /// When the checkpoint was made, Unix milliseconds.
    pub time_ms: u64,
    /// The signing key (the node key), hex.
    pub signer: String,
    /// Ed25519 over the checkpoint's canonical bytes, hex.
    pub signature: String,
}

impl AuditCheckpoint {
    /// The bytes signed: the domain, `through`, the 32-byte hash,
    /// `time_ms` (u64 big-endian).
    fn signed_bytes(through: u64, last_hash: &[u8; 32], time_ms: u64) -> Vec<u8> {
        let mut out = CHECKPOINT_DOMAIN.to_vec();
        out.extend_from_slice(&through.to_be_bytes());
        out.extend_from_slice(last_hash);
        out.extend_from_slice(&time_ms.to_be_bytes());
        out
    }

    /// A checkpoint for entries through `through`, signed by `key`.
    pub fn sign(through: u64, last_hash: &[u8; 32], time_ms: u64, key: &SigningKey) -> Self {
        let signature = key.sign(&Self::signed_bytes(through, last_hash, time_ms));
        Self {
            through,
            last_hash: hex::encode(last_hash),
            time_ms,
            signer: hex::encode(key.verifying_key().as_bytes()),
            signature: hex::encode(signature.to_bytes()),
        }
    }

    /// The last pruned hash, when the checkpoint's signature verifies
    /// for its signer (and the signer is `expected`, when given).
    ///
    /// # Errors
    /// A sentence saying what does not hold.
    pub fn check(&self, expected: Option<&VerifyingKey>) -> Result<[u8; 32], String> {
        let hash: [u8; 32] = hex::decode(&self.last_hash)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or("its last_hash is not 32 bytes of hex")?;
        let signer: [u8; 32] = hex::decode(&self.signer)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or("its signer is not 32 bytes of hex")?;
        let signer = VerifyingKey::from_bytes(&signer).map_err(|e| e.to_string())?;
        if expected.is_some_and(|k| k != &signer) {
            return Err("it is signed by another key than this node's".to_owned());
        }
        let signature: [u8; 64] = hex::decode(&self.signature)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or("its signature is not 64 bytes of hex")?;
        signer
            .verify(
                &Self::signed_bytes(self.through, &hash, self.time_ms),
                &Signature::from_bytes(&signature),
            )
            .map_err(|_| "its signature does not verify".to_owned())?;
        Ok(hash)
    }
}
