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
use crate::verify::Reason;

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
mod tests {
    use super::*;

    /// The PKA vector's key (`protocol/pka_vectors.json`), base64url.
    const V2_KEY: &str = "ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60ElmQ";
    /// The same 32 bytes as multibase base58btc (the aid1 form).
    const V1_KEY: &str = "z9C6hybhQ6Aycep9jaUnP6uL9ZYvDjUp1aSkFWPUFJtpj";
    const KEY_BYTES: [u8; 32] = [
        121, 181, 86, 46, 143, 230, 84, 249, 64, 120, 177, 18, 232, 169, 139, 167, 144, 31, 133,
        58, 230, 149, 190, 215, 224, 227, 145, 11, 173, 4, 150, 100,
    ];

    fn reason(record: &str) -> &'static str {
        parse(record).unwrap_err().reason.as_str()
    }

    fn set(records: &[&str]) -> Option<Result<AidRecord, FormatError>> {
        select(&records.iter().map(|r| r.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn golden_valid_records_parse() {
        // golden.json `records`.
        let r = parse("v=aid1;uri=https://api.example.com/mcp;p=mcp").unwrap();
        assert_eq!(
            (r.version, r.uri.as_str(), r.proto.as_str()),
            (AidVersion::Aid1, "https://api.example.com/mcp", "mcp")
        );
        let r = parse("v=aid1;uri=docker://myimage;proto=local;desc=Local Docker Agent").unwrap();
        assert_eq!(
            (r.proto.as_str(), r.desc.as_deref()),
            ("local", Some("Local Docker Agent"))
        );
        let r = parse("v=aid1;uri=https://api.example.com/mcp;p=mcp;d=https://docs.example.com/agent;e=2099-01-01T00:00:00Z").unwrap();
        assert_eq!(r.docs.as_deref(), Some("https://docs.example.com/agent"));
        assert_eq!(r.dep.as_deref(), Some("2099-01-01T00:00:00Z"));
        let r = parse("v=aid1;p=ucp;u=https://shop.example.com/ucp").unwrap();
        assert_eq!(r.proto, "ucp");
        let r = parse("v=aid2;u=https://api.example.com/mcp;p=mcp;a=oauth2_code").unwrap();
        assert_eq!(
            (r.version, r.auth.as_deref()),
            (AidVersion::Aid2, Some("oauth2_code"))
        );
        // v2-with-pka: the key decodes to the vector's 32 bytes.
        let r = parse(&format!(
            "v=aid2;u=https://api.example.com/mcp;p=mcp;k={V2_KEY}"
        ))
        .unwrap();
        assert_eq!(r.pka, Some(KEY_BYTES));
        assert_eq!(r.kid, None);
        let r = parse(&format!(
            "v=aid2;u=https://[2001:db8::1]:8443/mcp;p=mcp;k={V2_KEY}"
        ))
        .unwrap();
        assert_eq!(r.uri, "https://[2001:db8::1]:8443/mcp");
    }

    #[test]
    fn an_aid1_key_is_base58btc_of_the_same_32_bytes() {
        let r = parse(&format!(
            "v=aid1;u=https://api.example.com/mcp;p=mcp;k={V1_KEY};i=g1"
        ))
        .unwrap();
        assert_eq!(r.pka, Some(KEY_BYTES));
        assert_eq!(r.kid.as_deref(), Some("g1"));
        // Leading `1`s are zero bytes.
        assert_eq!(base58btc(&"1".repeat(32)), Some(vec![0; 32]));
        assert_eq!(base58btc("1112"), Some(vec![0, 0, 0, 1]));
        assert_eq!(base58btc("0OIl"), None);
        // golden `v1.1-with-pka-kid` carries a placeholder key of 31 bytes:
        // the reference parser defers the check to the PKA handshake,
        // which refuses it; this parser refuses it at once.
        assert_eq!(
            reason("v=aid1;uri=https://api.example.com/mcp;p=mcp;k=z7rW8rTq8o4mM6vVf7w1k3m4uQn9p2YxCAbcDeFgHiJ;i=g1"),
            "aid_malformed"
        );
    }

    #[test]
    fn keys_are_case_insensitive_trimmed_and_aliased() {
        let long = parse(
            " version = aid2 ; URI=https://a.test/mcp ;Proto=a2a; AUTH=pat; desc=Hi; docs=https://a.test/d; dep=2030-01-01T00:00:00Z ",
        )
        .unwrap();
        let short = parse(
            "v=aid2;u=https://a.test/mcp;p=a2a;a=pat;s=Hi;d=https://a.test/d;e=2030-01-01T00:00:00Z",
        )
        .unwrap();
        assert_eq!(long, short);
        assert_eq!(short.proto, "a2a");
        // Empty pairs are skipped, unknown keys ignored, the value is
        // everything after the first `=`.
        let r = parse("v=aid2;;u=https://a.test/x?q=1;p=mcp;future=yes;").unwrap();
        assert_eq!(r.uri, "https://a.test/x?q=1");
        // The other protocols and their schemes.
        for (proto, uri) in [
            ("websocket", "wss://a.test/ws"),
            ("local", "npx:some-agent"),
            ("local", "pip:agent"),
            ("zeroconf", "zeroconf:_mcp._tcp"),
            ("grpc", "https://a.test"),
            ("graphql", "https://a.test/graphql"),
            ("openapi", "https://a.test/openapi.json"),
        ] {
            let r = parse(&format!("v=aid2;u={uri};p={proto}")).unwrap();
            assert_eq!((r.proto.as_str(), r.uri.as_str()), (proto, uri));
        }
    }

    #[test]
    fn golden_invalid_records_are_refused() {
        // golden.json `invalid`, all ERR_INVALID_TXT there except
        // unsupported-proto (ERR_UNSUPPORTED_PROTO); here aid_malformed,
        // and aid_unsupported_version for a version this node does not read.
        let k = V2_KEY;
        for (name, raw) in [
            ("pka-missing-kid", "v=aid1;uri=https://api.example.com/mcp;p=mcp;k=z111".to_owned()),
            ("duplicate-proto-fields", "v=aid1;uri=https://api.example.com/mcp;proto=mcp;p=mcp".to_owned()),
            ("unsupported-proto", "v=aid1;uri=https://api.example.com/mcp;proto=unknown".to_owned()),
            ("remote-non-https", "v=aid1;uri=http://api.example.com/mcp;proto=mcp".to_owned()),
            ("v2-stale-kid", format!("v=aid2;uri=https://api.example.com/mcp;proto=mcp;k={k};i=g1")),
            ("v2-legacy-multibase-pka", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=z1111111111111111111111111111111111111111111".to_owned()),
            ("v2-padded-pka", format!("v=aid2;uri=https://api.example.com/mcp;proto=mcp;k={k}=")),
            ("v2-invalid-base64url-character", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=ebVWLo_mVPlAeLES6KmLp5AfhTrmlb7X4OORC60Elm+".to_owned()),
            ("v2-pka-decodes-to-31-bytes", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHw".to_owned()),
            ("v2-pka-decodes-to-33-bytes", "v=aid2;uri=https://api.example.com/mcp;proto=mcp;k=AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAh".to_owned()),
            ("v2-duplicate-pka-alias", format!("v=aid2;uri=https://api.example.com/mcp;proto=mcp;k={k};pka={k}")),
            ("malformed-pair-missing-equals", "v=aid2;garbage;u=https://x/mcp;p=mcp".to_owned()),
            ("empty-key-in-pair", "=foo;v=aid2;u=https://x/mcp;p=mcp".to_owned()),
            ("empty-value-in-pair", "v=;u=https://x/mcp;p=mcp".to_owned()),
            ("duplicate-canonical-key", "v=aid1;v=aid2;u=https://x/mcp;p=mcp".to_owned()),
        ] {
            assert_eq!(reason(&raw), "aid_malformed", "{name}");
        }
        assert_eq!(
            reason("v=aid3;uri=https://api.example.com/mcp;proto=mcp"),
            "aid_unsupported_version",
            "unknown-future-version"
        );
        let e = parse("v=aid1;uri=https://api.example.com/mcp;proto=unknown").unwrap_err();
        assert!(e.message.contains("\"unknown\""), "{}", e.message);
    }

    #[test]
    fn every_other_refusal_has_its_reason() {
        for raw in [
            // Required keys.
            "u=https://a.test/;p=mcp",
            "v=aid2;p=mcp",
            "v=aid2;u=https://a.test/",
            // A key and its long form.
            "v=aid2;version=aid2;u=https://a.test/;p=mcp",
            "v=aid2;u=https://a.test/;uri=https://a.test/;p=mcp",
            "v=aid2;u=https://a.test/;p=mcp;a=pat;auth=pat",
            "v=aid2;u=https://a.test/;p=mcp;s=x;desc=x",
            "v=aid2;u=https://a.test/;p=mcp;d=https://a.test/;D=https://a.test/",
            "v=aid2;u=https://a.test/;p=mcp;e=2030-01-01T00:00:00Z;dep=2030-01-01T00:00:00Z",
            // Values.
            "v=aid2;u=https://a.test/;p=mcp;a=password",
            "v=aid2;u=https://a.test/;p=MCP",
            "v=aid2;u=https:///mcp;p=mcp",
            "v=aid2;u=https://a.test/a b;p=mcp",
            "v=aid2;u=https://a.test/;p=websocket",
            "v=aid2;u=ws://a.test/;p=websocket",
            "v=aid2;u=docker;p=local",
            "v=aid2;u=curl:x;p=local",
            "v=aid2;u=zeroconf:;p=zeroconf",
            "v=aid2;u=https://a.test/;p=mcp;d=http://a.test/docs",
            "v=aid2;u=https://a.test/;p=mcp;e=2030-01-01",
            "v=aid2;u=https://a.test/;p=mcp;e=2030-01-01T00:00:00+01:00",
            "v=aid2;u=https://a.test/;p=mcp;kid=g1",
            // aid1 keys.
            &format!("v=aid1;u=https://a.test/;p=mcp;k={V1_KEY}"),
            &format!("v=aid1;u=https://a.test/;p=mcp;k={V1_KEY};i=toolong"),
            &format!("v=aid1;u=https://a.test/;p=mcp;k={V1_KEY};i=G1"),
            &format!("v=aid1;u=https://a.test/;p=mcp;k={V2_KEY};i=g1"),
            "v=aid1;u=https://a.test/;p=mcp;k=z;i=g1",
        ] {
            assert_eq!(reason(raw), "aid_malformed", "{raw}");
        }
        assert_eq!(
            reason("v=AID2;u=https://a.test/;p=mcp"),
            "aid_unsupported_version"
        );
        // desc: 60 bytes pass, 61 do not (bytes, not characters).
        let ok = format!("v=aid2;u=https://a.test/;p=mcp;s={}", "é".repeat(30));
        assert!(parse(&ok).is_ok());
        let over = format!("v=aid2;u=https://a.test/;p=mcp;s={}x", "é".repeat(30));
        assert_eq!(reason(&over), "aid_malformed");
        // Bounds: record length and pair count.
        let long = format!(
            "v=aid2;u=https://a.test/;p=mcp;x={}",
            "a".repeat(MAX_RECORD_BYTES)
        );
        assert_eq!(reason(&long), "aid_malformed");
        let at_limit = format!(
            "v=aid2;u=https://a.test/;p=mcp;{}",
            (3..MAX_PAIRS)
                .map(|i| format!("x{i}=1;"))
                .collect::<String>()
        );
        assert!(parse(&at_limit).is_ok());
        assert_eq!(reason(&format!("{at_limit}y=1")), "aid_malformed");
    }

    #[test]
    fn is_aid_recognises_aid_records_only() {
        assert!(is_aid("v=aid2;u=https://a.test/;p=mcp"));
        assert!(is_aid(" p=mcp ; V = AID1 "));
        assert!(is_aid("version=aid2;u=x"));
        assert!(is_aid("v=aid3"));
        assert!(!is_aid("v=ADP1; pk=ed25519:00; wk=https://a.test/"));
        assert!(!is_aid("google-site-verification=aid"));
        assert!(!is_aid("kv=aid2"));
        assert!(!is_aid("v=ai"));
    }

    #[test]
    fn select_follows_the_multi_record_rule() {
        // golden.json `recordSets`.
        let pick = |records: &[&str]| set(records).unwrap().unwrap();
        let r = pick(&[
            "v=aid1;u=https://v1.example.com/mcp;p=mcp",
            "v=aid2;u=https://v2.example.com/mcp;p=mcp",
        ]);
        assert_eq!(
            (r.version, r.uri.as_str()),
            (AidVersion::Aid2, "https://v2.example.com/mcp")
        );
        let r = pick(&[
            "v=aid3;u=https://future.example.com/mcp;p=mcp",
            "v=aid2;u=https://v2.example.com/mcp;p=mcp",
        ]);
        assert_eq!(r.uri, "https://v2.example.com/mcp");
        let r = pick(&[
            "v=aid2;u=http://bad.example.com/mcp;p=mcp",
            "v=aid2;u=https://v2.example.com/mcp;p=mcp",
        ]);
        assert_eq!(r.uri, "https://v2.example.com/mcp");
        let r = pick(&[
            "v=aid2;u=http://bad.example.com/mcp;p=mcp",
            "v=aid1;u=https://v1.example.com/mcp;p=mcp",
        ]);
        assert_eq!(
            (r.version, r.uri.as_str()),
            (AidVersion::Aid1, "https://v1.example.com/mcp")
        );
        // unknown-future-version-only / only-malformed-aid-like-txt: an
        // error, not "no record" (so no .well-known fallback).
        let e = set(&["v=aid3;u=https://future.example.com/mcp;p=mcp"])
            .unwrap()
            .unwrap_err();
        assert_eq!(e.reason.as_str(), "aid_unsupported_version");
        // No valid record: the first error.
        let e = set(&["v=aid2;p=mcp", "v=aid9;u=https://a.test/;p=mcp"])
            .unwrap()
            .unwrap_err();
        assert_eq!(e.reason.as_str(), "aid_malformed");
        // Two valid records of the chosen version: ambiguous, never
        // chosen by order.
        let e = set(&[
            "v=aid2;u=https://a.example.com/mcp;p=mcp",
            "v=aid2;u=https://b.example.com/mcp;p=mcp",
            "v=aid1;u=https://c.example.com/mcp;p=mcp",
        ])
        .unwrap()
        .unwrap_err();
        assert_eq!(e.reason.as_str(), "aid_malformed");
        assert!(e.message.contains("ambiguous"), "{}", e.message);
        let e = set(&[
            "v=aid1;u=https://a.example.com/mcp;p=mcp",
            "v=aid1;u=https://b.example.com/mcp;p=mcp",
        ])
        .unwrap()
        .unwrap_err();
        assert!(
            e.message.contains("ambiguous") && e.message.contains("aid1"),
            "{}",
            e.message
        );
        // No AID record at all.
        assert!(set(&[]).is_none());
        assert!(set(&["v=spf1 -all", "v=ADP1; pk=x; wk=y"]).is_none());
        // Bounded.
        let many: Vec<String> = (0..=MAX_RECORDS)
            .map(|i| format!("v=aid2;u=https://{i}.test/;p=mcp"))
            .collect();
        assert_eq!(
            select(&many).unwrap().unwrap_err().reason.as_str(),
            "aid_malformed"
        );
    }

    #[test]
    fn an_adp_record_and_an_aid_record_coexist_at_one_name() {
        let fp = "ed25519:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let rrset = vec![
            format!("v=ADP1; pk={fp}; wk=https://a.test/.well-known/agent.json"),
            "v=aid2;u=https://a.test/mcp;p=mcp".to_owned(),
        ];
        let aid = select(&rrset).unwrap().unwrap();
        assert_eq!(aid.uri, "https://a.test/mcp");
        let adp = crate::adp::txt::parse("a.test", &rrset).unwrap();
        assert_eq!(adp.fingerprint, fp);
        assert_eq!(adp.well_known, "https://a.test/.well-known/agent.json");
    }

    #[test]
    fn the_descriptor_carries_the_record() {
        let r =
            parse("v=aid2;u=https://api.example.com/mcp;p=mcp;a=oauth2_code;s=Weather").unwrap();
        let d = r.to_descriptor("Example.COM.");
        assert_eq!(d.id, "aid:example.com");
        assert_eq!(d.name, "example.com");
        assert_eq!(d.description, "Weather");
        assert_eq!(d.endpoint.as_deref(), Some("https://api.example.com/mcp"));
        assert_eq!(d.tags, ["mcp"]);
        assert!(d.capabilities.is_empty());
        assert_eq!(d.auth.as_deref(), Some("oauth2_code"));
        assert_eq!(d.format, DocumentFormat::Aid);
        assert_eq!(r.to_descriptor("").name, "aid:");
        let bare = parse("v=aid1;u=https://a.test/;p=a2a")
            .unwrap()
            .to_descriptor("a.test");
        assert_eq!((bare.description.as_str(), bare.auth), ("", None));
    }
}
