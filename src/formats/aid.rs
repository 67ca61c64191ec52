//! AID (Agent Identity & Discovery, v2.1): the TXT record at
//! `_agent.{domain}`, `v=aid2` or the legacy `v=aid1`, read into an
//! [`AidRecord`] and a [`Descriptor`].
//!
//! The record is one string of `key=value` pairs separated by `;` (the
//! character-strings of one TXT record joined first). Pairs and their
//! parts are trimmed, keys compare case-insensitively, each key has a
//! one-letter alias, and unknown keys are ignored. [`parse`] reads one
//! record; [`select`] applies the rule for an RRset that holds several
//! (spec section 2.3): only AID records count, aid2 is preferred, and two
//! valid records of the chosen version are ambiguous. The same RRset may
//! hold an ADP record (`v=ADP1`, [`crate::adp::txt`]); each reader skips
//! the other's record.
//!
//! Pure code: the crawler looks the name up and hands the records here.
//! Checking the endpoint's proof of key (PKA) is not done here; the key is
//! decoded to its 32 bytes so that code can use it.

use base64::Engine as _;

use crate::descriptor::{Descriptor, DocumentFormat};
use crate::formats::{bounded, terms, FormatError, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS};
use crate::trust::Reason;

/// Largest record read, bytes (the spec asks for under 255 when possible).
pub const MAX_RECORD_BYTES: usize = 1024;
/// Most non-empty `key=value` pairs read from one record.
pub const MAX_PAIRS: usize = 32;
/// Most AID records considered in one RRset.
pub const MAX_RECORDS: usize = 16;
/// Longest `desc`, UTF-8 bytes (spec section 2.1).
pub const MAX_DESC_BYTES: usize = 60;

/// The protocol tokens (spec section 7.2) with the URI schemes each allows.
pub const PROTOCOLS: [(&str, &[&str]); 9] = [
    ("mcp", &["https://"]),
    ("a2a", &["https://"]),
    ("openapi", &["https://"]),
    ("grpc", &["https://"]),
    ("graphql", &["https://"]),
    ("ucp", &["https://"]),
    ("websocket", &["wss://"]),
    ("local", &["docker:", "npx:", "pip:"]),
    ("zeroconf", &["zeroconf:"]),
];

/// The `auth` tokens (spec section 2.1).
pub const AUTH_TOKENS: [&str; 8] = [
    "none",
    "pat",
    "apikey",
    "basic",
    "oauth2_device",
    "oauth2_code",
    "mtls",
    "custom",
];

/// The record's major version (`v`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AidVersion {
    /// `aid1`: the v1.x record (legacy, multibase `k` with a `kid`).
    Aid1,
    /// `aid2`: the current record (base64url `k`, no `kid`).
    Aid2,
}

impl AidVersion {
    /// The `v` value (`aid1`, `aid2`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aid1 => "aid1",
            Self::Aid2 => "aid2",
        }
    }
}

/// A valid AID record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AidRecord {
    /// `v`.
    pub version: AidVersion,
    /// `uri` / `u`: where the agent is reached.
    pub uri: String,
    /// `proto` / `p`: one of [`PROTOCOLS`].
    pub proto: String,
    /// `auth` / `a`: one of [`AUTH_TOKENS`].
    pub auth: Option<String>,
    /// `desc` / `s`: at most [`MAX_DESC_BYTES`].
    pub desc: Option<String>,
    /// `docs` / `d`: an `https://` URL.
    pub docs: Option<String>,
    /// `dep` / `e`: the deprecation time, `YYYY-MM-DDTHH:MM:SSZ`. Whether
    /// it has passed is for the caller (this code has no clock).
    pub dep: Option<String>,
    /// `pka` / `k`: the endpoint's Ed25519 public key.
    pub pka: Option<[u8; 32]>,
    /// `kid` / `i` (aid1 only): the key id.
    pub kid: Option<String>,
}

/// The keys read, each with its alias, in this order in [`Pairs`].
const KEYS: [(&str, &str); 9] = [
    ("version", "v"),
    ("uri", "u"),
    ("proto", "p"),
    ("auth", "a"),
    ("desc", "s"),
    ("docs", "d"),
    ("dep", "e"),
    ("pka", "k"),
    ("kid", "i"),
];
const V: usize = 0;
const URI: usize = 1;
const PROTO: usize = 2;
const AUTH: usize = 3;
const DESC: usize = 4;
const DOCS: usize = 5;
const DEP: usize = 6;
const PKA: usize = 7;
const KID: usize = 8;

type Pairs<'a> = [Option<&'a str>; KEYS.len()];

fn malformed(message: impl Into<String>) -> FormatError {
    FormatError::new(Reason::AidMalformed, message)
}

/// Whether a TXT record (its strings joined) is an AID record: it has a
/// `v` (or `version`) pair, key in any case, whose value starts with
/// `aid` in any case. Such a record counts in [`select`] even when it is
/// not valid; any other record (ADP's `v=ADP1`, site verifications) does
/// not.
pub fn is_aid(record: &str) -> bool {
    record.split(';').any(|pair| {
        pair.split_once('=').is_some_and(|(k, v)| {
            let k = k.trim();
            let v = v.trim().as_bytes();
            (k.eq_ignore_ascii_case("v") || k.eq_ignore_ascii_case("version"))
                && v.len() >= 3
                && v[..3].eq_ignore_ascii_case(b"aid")
        })
    })
}

/// Reads one AID record (its strings joined).
///
/// The spec's table names the full key of `v` as `version`; the reference
/// parsers read only `v`. Both are read here, and both together are a key
/// given twice.
///
/// # Errors
/// [`Reason::AidUnsupportedVersion`] when `v` is neither `aid1` nor `aid2`
/// (compared exactly); [`Reason::AidMalformed`] for anything else wrong: too
/// long, too many pairs, a pair without `=` or with an empty key or value,
/// a key given twice (itself or with its alias), a missing `v`, `uri` or
/// `proto`, an unknown `proto` or `auth`, a URI scheme the protocol does
/// not allow, a `desc` over 60 bytes, a `docs` that is not `https://`, a
/// `dep` not in `YYYY-MM-DDTHH:MM:SSZ` form, a bad `k`, a `kid` in aid2, or
/// an aid1 `k` without a `kid`.
pub fn parse(record: &str) -> Result<AidRecord, FormatError> {
    if record.len() > MAX_RECORD_BYTES {
        return Err(malformed(format!(
            "{} bytes, over the {MAX_RECORD_BYTES}-byte limit",
            record.len()
        )));
    }
    let pairs = pairs(record)?;
    let version = match pairs[V] {
        None => return Err(malformed("no v= pair")),
        Some("aid1") => AidVersion::Aid1,
        Some("aid2") => AidVersion::Aid2,
        Some(other) => {
            return Err(FormatError::new(
                Reason::AidUnsupportedVersion,
                format!("v={other:?}; this node reads aid1 and aid2"),
            ))
        }
    };
    let uri = pairs[URI].ok_or_else(|| malformed("no uri= (u=) pair"))?;
    let proto = pairs[PROTO].ok_or_else(|| malformed("no proto= (p=) pair"))?;
    let (_, schemes) = PROTOCOLS
        .iter()
        .find(|(token, _)| *token == proto)
        .ok_or_else(|| malformed(format!("unsupported proto {proto:?}")))?;
    if !schemes.iter().any(|s| has_scheme(uri, s)) {
        return Err(malformed(format!(
            "uri {:?} is not a {} URI (proto {proto})",
            bounded(uri, 64),
            schemes.join(" or ")
        )));
    }
    if let Some(auth) = pairs[AUTH] {
        if !AUTH_TOKENS.contains(&auth) {
            return Err(malformed(format!("unknown auth {auth:?}")));
        }
    }
    if let Some(desc) = pairs[DESC] {
        if desc.len() > MAX_DESC_BYTES {
            return Err(malformed(format!(
                "desc is {} bytes, over {MAX_DESC_BYTES}",
                desc.len()
            )));
        }
    }
    if let Some(docs) = pairs[DOCS] {
        if !has_scheme(docs, "https://") {
            return Err(malformed("docs must be an absolute https:// URL"));
        }
    }
    if let Some(dep) = pairs[DEP] {
        if !is_utc_timestamp(dep) {
            return Err(malformed(format!(
                "dep {dep:?} is not YYYY-MM-DDTHH:MM:SSZ"
            )));
        }
    }
    let pka = match version {
        AidVersion::Aid2 => {
            if pairs[KID].is_some() {
                return Err(malformed("kid (i) is not allowed in an aid2 record"));
            }
            pairs[PKA].map(aid2_key).transpose()?
        }
        AidVersion::Aid1 => {
            if let Some(kid) = pairs[KID] {
                let ok = (1..=6).contains(&kid.len())
                    && kid
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
                if !ok {
                    return Err(malformed(format!("kid {kid:?} is not 1-6 of [a-z0-9]")));
                }
            }
            let pka = pairs[PKA].map(aid1_key).transpose()?;
            if pka.is_some() && pairs[KID].is_none() {
                return Err(malformed("an aid1 record with k needs a kid (i)"));
            }
            pka
        }
    };
    let owned = |i: usize| pairs[i].map(str::to_owned);
    Ok(AidRecord {
        version,
        uri: uri.to_owned(),
        proto: proto.to_owned(),
        auth: owned(AUTH),
        desc: owned(DESC),
        docs: owned(DOCS),
        dep: owned(DEP),
        pka,
        kid: owned(KID),
    })
}

/// The AID record an RRset (each record's strings joined) gives, by the
/// spec's rule for several records (section 2.3): records that are not
/// AID records ([`is_aid`]) are skipped; each AID record is read; the
/// valid aid2 records are taken when there are any, the valid aid1 records
/// otherwise; exactly one is the answer. `None` when the RRset holds no
/// AID record. A caller that saw aid2 for this name before and now gets an
/// aid1 record should treat it as a downgrade (section 2.3).
///
/// # Errors
/// [`Reason::AidMalformed`] for more than [`MAX_RECORDS`] AID records or
/// more than one valid record of the chosen version ("ambiguous"); with
/// no valid record, the first record's error.
pub fn select(records: &[String]) -> Option<Result<AidRecord, FormatError>> {
    let aid: Vec<&String> = records.iter().filter(|r| is_aid(r)).collect();
    if aid.is_empty() {
        return None;
    }
    if aid.len() > MAX_RECORDS {
        return Some(Err(malformed(format!(
            "{} AID records, over the limit of {MAX_RECORDS}",
            aid.len()
        ))));
    }
    let mut first_error = None;
    let (mut aid1, mut aid2) = (Vec::new(), Vec::new());
    for record in aid {
        match parse(record) {
            Ok(r) if r.version == AidVersion::Aid2 => aid2.push(r),
            Ok(r) => aid1.push(r),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let mut chosen = if aid2.is_empty() { aid1 } else { aid2 };
    Some(match chosen.len() {
        0 => Err(first_error.expect("every AID record failed, so one error was kept")),
        1 => Ok(chosen.remove(0)),
        n => Err(malformed(format!(
            "ambiguous: {n} valid {} records",
            chosen[0].version.as_str()
        ))),
    })
}

impl AidRecord {
    /// The normalised descriptor for the record found at
    /// `_agent.{domain}`: id `aid:{domain}` (lower-cased, no trailing dot),
    /// the domain as name, `desc` as description, `uri` as endpoint, the
    /// protocol as tag, and `auth`.
    pub fn to_descriptor(&self, domain: &str) -> Descriptor {
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        let id = format!("aid:{domain}");
        let name = match bounded(&domain, MAX_NAME_CHARS) {
            n if n.is_empty() => id.clone(),
            n => n,
        };
        Descriptor {
            id,
            name,
            description: bounded(self.desc.as_deref().unwrap_or(""), MAX_DESCRIPTION_CHARS),
            version: None,
            publisher: None,
            endpoint: Some(self.uri.clone()),
            capabilities: Vec::new(),
            tags: terms([self.proto.as_str()]),
            languages: Vec::new(),
            status: None,
            auth: self.auth.clone(),
            format: DocumentFormat::Aid,
        }
    }
}

/// The known keys' values; unknown keys are checked for shape and dropped.
fn pairs(record: &str) -> Result<Pairs<'_>, FormatError> {
    let mut out: Pairs<'_> = [None; KEYS.len()];
    let mut count = 0;
    for pair in record.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        count += 1;
        if count > MAX_PAIRS {
            return Err(malformed(format!("more than {MAX_PAIRS} pairs")));
        }
        let shown = bounded(pair, 40);
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| malformed(format!("pair {shown:?} has no '='")))?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(malformed(format!(
                "pair {shown:?} has an empty key or value"
            )));
        }
        let Some(at) = KEYS
            .iter()
            .position(|(k, a)| key.eq_ignore_ascii_case(k) || key.eq_ignore_ascii_case(a))
        else {
            continue;
        };
        if out[at].is_some() {
            let (k, a) = KEYS[at];
            return Err(malformed(format!("{k} ({a}) is given twice")));
        }
        out[at] = Some(value);
    }
    Ok(out)
}

/// Whether `uri` starts with `scheme` (`https://`, `docker:`) and has
/// something after it: a host for `//` schemes, a name otherwise. A URI
/// holds no white space or control characters.
fn has_scheme(uri: &str, scheme: &str) -> bool {
    let Some(rest) = uri.strip_prefix(scheme) else {
        return false;
    };
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let first = if scheme.ends_with("//") {
        rest.split(['/', '?', '#']).next().unwrap_or("")
    } else {
        rest
    };
    !first.is_empty()
}

fn is_utc_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// aid2 `k`: 43 characters of unpadded base64url that decode to 32 bytes.
fn aid2_key(k: &str) -> Result<[u8; 32], FormatError> {
    let well_formed = k.len() == 43
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let bytes = well_formed
        .then(|| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(k)
                .ok()
        })
        .flatten();
    bytes
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| {
            malformed("aid2 k must be 43 characters of unpadded base64url (a 32-byte key)")
        })
}

/// aid1 `k`: multibase `z` + base58btc of the 32-byte key.
fn aid1_key(k: &str) -> Result<[u8; 32], FormatError> {
    k.strip_prefix('z')
        .and_then(base58btc)
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .ok_or_else(|| malformed("aid1 k must be z + base58btc of a 32-byte key"))
}

/// Decodes base58 (the Bitcoin alphabet): each leading `1` is a zero byte.
/// `None` for an empty or over-long input or a character outside the
/// alphabet.
fn base58btc(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    // 32 bytes take at most 44 characters; this only bounds the work.
    if text.is_empty() || text.len() > 64 {
        return None;
    }
    // Little-endian bytes of the number read so far.
    let mut number: Vec<u8> = Vec::with_capacity(text.len());
    for c in text.bytes() {
        let mut carry = ALPHABET.iter().position(|&a| a == c)? as u32;
        for byte in &mut number {
            carry += u32::from(*byte) * 58;
            *byte = carry as u8;
            carry >>= 8;
        }
        while carry > 0 {
            number.push(carry as u8);
            carry >>= 8;
        }
    }
    let zeros = text.bytes().take_while(|&c| c == b'1').count();
    number.extend(std::iter::repeat_n(0, zeros));
    number.reverse();
    Some(number)
}

#[cfg(test)]
mod tests;
