//! DNSSEC trust anchors: what `--trust-anchor FILE` (config
//! `crawl.dnssec_trust_anchors`) holds, read into [`TrustAnchorSet`].
//!
//! A file is either
//! - zone-file syntax: DS or DNSKEY records, one or more, for any zone
//!   (the `K*.key` file `dnssec-keygen` writes, the `dsset-*` file
//!   `dnssec-signzone` writes, `dnssec-dsfromkey`'s output, unbound's
//!   `root.key`); `;` comments, blank lines, parentheses around a record
//!   that spans lines and a `$TTL` line are allowed; owner names are
//!   absolute (a final dot); or
//! - IANA's `root-anchors.xml` (RFC 9718): a `<TrustAnchor>` with its
//!   `<Zone>` and `<KeyDigest>` elements (`KeyTag`, `Algorithm`,
//!   `DigestType`, `Digest`), each a DS record for the zone; a digest
//!   outside its `validFrom`/`validUntil` window is left out. The format
//!   is small and fixed, so it is read by a scanner for exactly these
//!   elements, not by a general XML parser.
//!
//! A file is at most [`MAX_FILE_BYTES`]; all files together hold at most
//! [`MAX_RECORDS`] anchors for at most [`MAX_ZONES`] zones. Every error
//! names the file, and the line where there is one.
//!
//! The root's key-signing keys that hickory ships
//! ([`TrustAnchorSet::builtin_root`]) are always in the set; the files'
//! anchors are added beside them. [`super::dnssec`] says how each kind is
//! used.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{
    Algorithm, DigestType, PublicKey, PublicKeyBuf, TrustAnchors, Verifier,
};
use hickory_proto::rr::Name;

/// Largest trust anchor file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most anchors (DS or DNSKEY records, or valid key digests) in all files.
pub const MAX_RECORDS: usize = 64;
/// Most zones the anchors are for, in all files.
pub const MAX_ZONES: usize = 16;
/// Longest record (its text, parentheses joined) in a zone-file anchor.
const MAX_RECORD_CHARS: usize = 4096;

/// Why trust anchors could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnchorError {
    /// The file cannot be read.
    #[error("trust anchor {file}: {reason}")]
    Read {
        /// The file.
        file: PathBuf,
        /// What the system says.
        reason: String,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("trust anchor {file}: {size} bytes, more than the {limit} allowed")]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        size: u64,
        /// [`MAX_FILE_BYTES`].
        limit: u64,
    },
    /// More than [`MAX_RECORDS`] anchors, or for more than [`MAX_ZONES`]
    /// zones.
    #[error("trust anchor {file}: more than {limit} {what}")]
    TooMany {
        /// The file whose anchor went over the limit.
        file: PathBuf,
        /// `anchors` or `zones`.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// A record or element that is not a usable anchor.
    #[error("trust anchor {file}, line {line}: {reason}")]
    Syntax {
        /// The file.
        file: PathBuf,
        /// The line (1-based) where the record or element starts.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The file holds no anchor (in the XML form: none valid now).
    #[error("trust anchor {file}: {reason}")]
    Empty {
        /// The file.
        file: PathBuf,
        /// What was missing.
        reason: String,
    },
}

/// What an anchor pins: a key, or a digest of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorKey {
    /// A DS record: the digest of a key of the zone.
    Ds(DS),
    /// A DNSKEY record: the key itself.
    Dnskey(DNSKEY),
}

/// One trust anchor: a zone and the key (or key digest) that signs its
/// DNSKEY RRset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The zone (absolute, lowercase).
    pub zone: Name,
    /// The key or its digest.
    pub key: AnchorKey,
}

impl Anchor {
    /// Whether `key`, a DNSKEY published at this anchor's zone, is the
    /// anchored key: a zone key, not revoked, equal to the anchor's key
    /// or with the anchor's digest (RFC 4034 5.1.4; its key tag and
    /// algorithm must match too).
    pub fn matches(&self, key: &DNSKEY) -> bool {
        if !key.zone_key() || key.revoke() {
            return false;
        }
        match &self.key {
            AnchorKey::Dnskey(anchor) => {
                anchor.algorithm() == key.algorithm()
                    && anchor.public_key().public_bytes() == key.public_key().public_bytes()
            }
            AnchorKey::Ds(ds) => {
                ds.algorithm() == key.algorithm()
                    && key.calculate_key_tag().ok() == Some(ds.key_tag())
                    && ds.covers(&self.zone, key).unwrap_or(false)
            }
        }
    }

    /// The key tag of the anchored key.
    pub fn key_tag(&self) -> Option<u16> {
        match &self.key {
            AnchorKey::Dnskey(key) => key.calculate_key_tag().ok(),
            AnchorKey::Ds(ds) => Some(ds.key_tag()),
        }
    }
}

/// The trust anchors the crawler validates from: the root's built-in
/// anchor, and beside it those the configured files hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchorSet {
    anchors: Vec<Anchor>,
    /// The zones a configured file holds an anchor for.
    configured: Vec<Name>,
}

impl TrustAnchorSet {
    /// The root zone's key-signing keys that hickory ships (KSK-2017,
    /// tag 20326, and KSK-2024, tag 38696), as DNSKEY anchors: what the
    /// crawler uses when no anchor is configured.
    pub fn builtin_root() -> Self {
        let shipped = TrustAnchors::default();
        let anchors = (0..shipped.len())
            .filter_map(|i| shipped.get(i))
            .map(|key| Anchor {
                zone: Name::root(),
                key: AnchorKey::Dnskey(DNSKEY::new(
                    true,
                    true,
                    false,
                    PublicKeyBuf::new(key.public_bytes().to_vec(), key.algorithm()),
                )),
            })
            .collect();
        Self {
            anchors,
            configured: Vec::new(),
        }
    }

    /// [`TrustAnchorSet::builtin_root`] and, beside it, the anchors in
    /// `files`.
    ///
    /// # Errors
    /// [`AnchorError`], naming the file (and the line) at fault.
    pub fn load(files: &[PathBuf]) -> Result<Self, AnchorError> {
        let mut set = Self::builtin_root();
        let now = crate::record::unix_now();
        let mut added = 0usize;
        for file in files {
            let text = read_bounded(file)?;
            for anchor in parse(&text, file, now)? {
                if added == MAX_RECORDS {
                    return Err(AnchorError::TooMany {
                        file: file.clone(),
                        what: "anchors",
                        limit: MAX_RECORDS,
                    });
                }
                if !set.configured.contains(&anchor.zone) {
                    if set.configured.len() == MAX_ZONES {
                        return Err(AnchorError::TooMany {
                            file: file.clone(),
                            what: "zones",
                            limit: MAX_ZONES,
                        });
                    }
                    set.configured.push(anchor.zone.clone());
                }
                added += 1;
                if !set.anchors.contains(&anchor) {
                    set.anchors.push(anchor);
                }
            }
        }
        Ok(set)
    }

    /// Whether no file gave an anchor: the root's built-in one alone.
    pub fn is_builtin(&self) -> bool {
        self.configured.is_empty()
    }

    /// Whether `zone`'s anchors are all built in (no configured file
    /// names it).
    pub fn is_builtin_zone(&self, zone: &Name) -> bool {
        !self.configured.contains(zone)
    }

    /// Every anchor.
    pub fn anchors(&self) -> &[Anchor] {
        &self.anchors
    }

    /// The zones anchored, each once, in the order first given.
    pub fn zones(&self) -> Vec<Name> {
        let mut out: Vec<Name> = Vec::new();
        for a in &self.anchors {
            if !out.contains(&a.zone) {
                out.push(a.zone.clone());
            }
        }
        out
    }

    /// The anchors for `zone`.
    pub fn for_zone<'a>(&'a self, zone: &'a Name) -> impl Iterator<Item = &'a Anchor> + 'a {
        self.anchors.iter().filter(move |a| &a.zone == zone)
    }

    /// The closest anchored zone at or above `name` (the name itself or
    /// its nearest anchored ancestor), if any anchor covers it.
    pub fn covering(&self, name: &Name) -> Option<Name> {
        let name = name.to_lowercase();
        self.anchors
            .iter()
            .map(|a| &a.zone)
            .filter(|zone| zone.zone_of(&name))
            .max_by_key(|zone| zone.num_labels())
            .cloned()
    }
}

fn read_bounded(file: &Path) -> Result<String, AnchorError> {
    let read = |e: std::io::Error| AnchorError::Read {
        file: file.to_owned(),
        reason: e.to_string(),
    };
    let size = std::fs::metadata(file).map_err(read)?.len();
    if size > MAX_FILE_BYTES {
        return Err(AnchorError::TooLarge {
            file: file.to_owned(),
            size,
            limit: MAX_FILE_BYTES,
        });
    }
    let bytes = std::fs::read(file).map_err(read)?;
    // Read again in case it grew between the two calls.
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(AnchorError::TooLarge {
            file: file.to_owned(),
            size: bytes.len() as u64,
            limit: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|e| AnchorError::Syntax {
        file: file.to_owned(),
        line: 1,
        reason: format!("not UTF-8 text ({e})"),
    })
}

/// The anchors in `text`, the contents of `file`: IANA's XML form when it
/// starts with `<`, zone-file syntax otherwise. `now` (Unix seconds)
/// decides which XML key digests are valid.
///
/// # Errors
/// [`AnchorError::Syntax`] at the first record or element that is not a
/// usable anchor, [`AnchorError::Empty`] when there is none,
/// [`AnchorError::TooMany`] past [`MAX_RECORDS`].
pub fn parse(text: &str, file: &Path, now: u64) -> Result<Vec<Anchor>, AnchorError> {
    let anchors = if text.trim_start().starts_with('<') {
        xml::parse(text, file, now)?
    } else {
        zone_file(text, file)?
    };
    if anchors.is_empty() {
        return Err(AnchorError::Empty {
            file: file.to_owned(),
            reason: "no DS or DNSKEY record".into(),
        });
    }
    Ok(anchors)
}

fn syntax(file: &Path, line: usize, reason: impl Into<String>) -> AnchorError {
    AnchorError::Syntax {
        file: file.to_owned(),
        line,
        reason: reason.into(),
    }
}

/// The records of a zone file: each record's tokens and the line it
/// starts on, comments dropped and parentheses joined.
fn records(text: &str, file: &Path) -> Result<Vec<(usize, Vec<String>)>, AnchorError> {
    let mut out = Vec::new();
    let mut tokens: Vec<String> = Vec::new();
    let mut chars = 0usize;
    let mut start = 0usize;
    let mut open: Option<usize> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let code = raw.split(';').next().unwrap_or_default();
        if code.contains('"') {
            return Err(syntax(
                file,
                line,
                "quoted text is not part of a DS or DNSKEY record",
            ));
        }
        for piece in code.split_inclusive(['(', ')']) {
            let (words, paren) = match piece.chars().last() {
                Some(c @ ('(' | ')')) => (&piece[..piece.len() - 1], Some(c)),
                _ => (piece, None),
            };
            for word in words.split_whitespace() {
                if tokens.is_empty() {
                    start = line;
                }
                chars += word.len() + 1;
                if chars > MAX_RECORD_CHARS {
                    return Err(syntax(
                        file,
                        start,
                        format!("a record longer than {MAX_RECORD_CHARS} characters"),
                    ));
                }
                tokens.push(word.to_owned());
            }
            match paren {
                Some('(') if open.is_some() => {
                    return Err(syntax(file, line, "nested parentheses"));
                }
                Some('(') => {
                    if tokens.is_empty() {
                        start = line;
                    }
                    open = Some(line);
                }
                Some(_) if open.is_none() => {
                    return Err(syntax(file, line, "a ')' without its '('"));
                }
                Some(_) => open = None,
                None => {}
            }
        }
        if open.is_none() && !tokens.is_empty() {
            out.push((start, std::mem::take(&mut tokens)));
            chars = 0;
        }
    }
    if let Some(line) = open {
        return Err(syntax(file, line, "a '(' that is never closed"));
    }
    Ok(out)
}

fn zone_file(text: &str, file: &Path) -> Result<Vec<Anchor>, AnchorError> {
    let mut anchors = Vec::new();
    for (line, tokens) in records(text, file)? {
        let first = tokens[0].as_str();
        if first.eq_ignore_ascii_case("$TTL") {
            continue;
        }
        if first.starts_with('$') {
            return Err(syntax(
                file,
                line,
                format!("{first} is not supported in a trust anchor file (only $TTL)"),
            ));
        }
        if anchors.len() == MAX_RECORDS {
            return Err(AnchorError::TooMany {
                file: file.to_owned(),
                what: "anchors",
                limit: MAX_RECORDS,
            });
        }
        anchors.push(record(&tokens, file, line)?);
    }
    Ok(anchors)
}

/// One `owner [ttl] [class] type rdata` record.
fn record(tokens: &[String], file: &Path, line: usize) -> Result<Anchor, AnchorError> {
    let zone = owner(&tokens[0], file, line)?;
    let mut rest = tokens[1..].iter().map(String::as_str).peekable();
    // TTL and class, in either order, both optional.
    for _ in 0..2 {
        match rest.peek() {
            Some(t) if t.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
                rest.next();
            }
            Some(t) if t.eq_ignore_ascii_case("IN") => {
                rest.next();
            }
            Some(t) if ["CH", "HS", "CS"].iter().any(|c| t.eq_ignore_ascii_case(c)) => {
                return Err(syntax(file, line, format!("class {t}: only IN")));
            }
            _ => {}
        }
    }
    let rtype = rest
        .next()
        .ok_or_else(|| syntax(file, line, "no record type"))?;
    let rdata: Vec<&str> = rest.collect();
    let key = if rtype.eq_ignore_ascii_case("DS") {
        AnchorKey::Ds(ds(&rdata, file, line)?)
    } else if rtype.eq_ignore_ascii_case("DNSKEY") {
        AnchorKey::Dnskey(dnskey(&rdata, file, line)?)
    } else {
        return Err(syntax(
            file,
            line,
            format!("a {rtype} record is not a trust anchor (DS or DNSKEY)"),
        ));
    };
    Ok(Anchor { zone, key })
}

fn owner(text: &str, file: &Path, line: usize) -> Result<Name, AnchorError> {
    if !text.ends_with('.') {
        return Err(syntax(
            file,
            line,
            format!("the owner name {text:?} is relative: write it absolute, with a final dot"),
        ));
    }
    Name::from_ascii(text)
        .map(|n| n.to_lowercase())
        .map_err(|e| syntax(file, line, format!("the owner name {text:?}: {e}")))
}

fn number<T: std::str::FromStr>(
    token: Option<&&str>,
    what: &str,
    file: &Path,
    line: usize,
) -> Result<T, AnchorError> {
    let token = token.ok_or_else(|| syntax(file, line, format!("no {what}")))?;
    token.parse().map_err(|_| {
        syntax(
            file,
            line,
            format!("the {what} {token:?} is not a number in range"),
        )
    })
}

fn algorithm(number: u8, file: &Path, line: usize) -> Result<Algorithm, AnchorError> {
    let algorithm = Algorithm::from_u8(number);
    if !algorithm.is_supported() {
        return Err(syntax(
            file,
            line,
            format!("algorithm {number} is not supported"),
        ));
    }
    Ok(algorithm)
}

/// A DS record's digest: `digest` in hex for `digest_type` (SHA-1,
/// SHA-256 or SHA-384), of the length that type makes.
fn ds_of(
    key_tag: u16,
    algorithm_number: u8,
    digest_type: u8,
    digest: &str,
    file: &Path,
    line: usize,
) -> Result<DS, AnchorError> {
    let algorithm = algorithm(algorithm_number, file, line)?;
    let (kind, len) = match DigestType::from(digest_type) {
        DigestType::SHA1 => (DigestType::SHA1, 20),
        DigestType::SHA256 => (DigestType::SHA256, 32),
        DigestType::SHA384 => (DigestType::SHA384, 48),
        _ => {
            return Err(syntax(
                file,
                line,
                format!("digest type {digest_type} is not supported (1, 2 or 4)"),
            ))
        }
    };
    let bytes = hex::decode(digest)
        .map_err(|e| syntax(file, line, format!("the digest is not hex ({e})")))?;
    if bytes.len() != len {
        return Err(syntax(
            file,
            line,
            format!(
                "the digest is {} bytes; digest type {digest_type} makes {len}",
                bytes.len()
            ),
        ));
    }
    Ok(DS::new(key_tag, algorithm, kind, bytes))
}

fn ds(rdata: &[&str], file: &Path, line: usize) -> Result<DS, AnchorError> {
    let key_tag: u16 = number(rdata.first(), "key tag", file, line)?;
    let algorithm: u8 = number(rdata.get(1), "algorithm", file, line)?;
    let digest_type: u8 = number(rdata.get(2), "digest type", file, line)?;
    let digest: String = rdata.iter().skip(3).copied().collect();
    if digest.is_empty() {
        return Err(syntax(file, line, "no digest"));
    }
    ds_of(key_tag, algorithm, digest_type, &digest, file, line)
}

fn dnskey(rdata: &[&str], file: &Path, line: usize) -> Result<DNSKEY, AnchorError> {
    let flags: u16 = number(rdata.first(), "flags", file, line)?;
    let protocol: u8 = number(rdata.get(1), "protocol", file, line)?;
    if protocol != 3 {
        return Err(syntax(
            file,
            line,
            format!("protocol {protocol}: must be 3"),
        ));
    }
    let algorithm = algorithm(number(rdata.get(2), "algorithm", file, line)?, file, line)?;
    let encoded: String = rdata.iter().skip(3).copied().collect();
    if encoded.is_empty() {
        return Err(syntax(file, line, "no public key"));
    }
    let public = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_bytes())
        .map_err(|e| syntax(file, line, format!("the public key is not base64 ({e})")))?;
    let key = DNSKEY::with_flags(flags, PublicKeyBuf::new(public, algorithm));
    if !key.zone_key() {
        return Err(syntax(
            file,
            line,
            format!("flags {flags}: not a zone key (bit 7, 256, unset)"),
        ));
    }
    if key.revoke() {
        return Err(syntax(
            file,
            line,
            format!("flags {flags}: the key is revoked (bit 8, 128, set)"),
        ));
    }
    Ok(key)
}

/// IANA's `root-anchors.xml` (RFC 9718 section 2).
mod xml {
    use super::{ds_of, number, owner, syntax, Anchor, AnchorError, AnchorKey, MAX_RECORDS};
    use std::path::Path;

    /// An element: where it starts (byte offset), its attributes' text
    /// and its content.
    struct Element<'a> {
        at: usize,
        attributes: &'a str,
        content: &'a str,
        content_at: usize,
    }

    fn line_of(text: &str, at: usize) -> usize {
        text[..at].matches('\n').count() + 1
    }

    /// Every `<tag ...>content</tag>` in `text` (no nesting of `tag`);
    /// `base` is `text`'s offset in the file.
    fn elements<'a>(
        text: &'a str,
        base: usize,
        whole: &str,
        tag: &str,
        file: &Path,
    ) -> Result<Vec<Element<'a>>, AnchorError> {
        let open = format!("<{tag}");
        let close = format!("</{tag}>");
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(found) = text[from..].find(&open) {
            let at = from + found;
            let after = &text[at + open.len()..];
            // `<KeyTag` must not match `<KeyTagged`.
            if !after.starts_with(|c: char| c == '>' || c == '/' || c.is_whitespace()) {
                from = at + open.len();
                continue;
            }
            let end = after.find('>').ok_or_else(|| {
                syntax(
                    file,
                    line_of(whole, base + at),
                    format!("<{tag} is never closed"),
                )
            })?;
            let attributes = after[..end].trim_end_matches('/');
            if after[..end].ends_with('/') {
                out.push(Element {
                    at: base + at,
                    attributes,
                    content: "",
                    content_at: base + at,
                });
                from = at + open.len() + end + 1;
                continue;
            }
            let body_start = at + open.len() + end + 1;
            let body_len = text[body_start..].find(&close).ok_or_else(|| {
                syntax(
                    file,
                    line_of(whole, base + at),
                    format!("<{tag}> without </{tag}>"),
                )
            })?;
            out.push(Element {
                at: base + at,
                attributes,
                content: &text[body_start..body_start + body_len],
                content_at: base + body_start,
            });
            from = body_start + body_len + close.len();
        }
        Ok(out)
    }

    /// The text of the one `<tag>` child of `parent`.
    fn child<'a>(
        parent: &Element<'a>,
        whole: &str,
        tag: &str,
        file: &Path,
    ) -> Result<&'a str, AnchorError> {
        let found = elements(parent.content, parent.content_at, whole, tag, file)?;
        match found.as_slice() {
            [one] => Ok(one.content.trim()),
            [] => Err(syntax(
                file,
                line_of(whole, parent.at),
                format!("no <{tag}>"),
            )),
            _ => Err(syntax(
                file,
                line_of(whole, parent.at),
                format!("more than one <{tag}>"),
            )),
        }
    }

    /// The value of attribute `name` in an element's attribute text.
    fn attribute<'a>(attributes: &'a str, name: &str) -> Option<&'a str> {
        let mut rest = attributes;
        while let Some(eq) = rest.find('=') {
            let key = rest[..eq].trim();
            let value = rest[eq + 1..].trim_start();
            let quote = value.chars().next()?;
            if quote != '"' && quote != '\'' {
                return None;
            }
            let end = value[1..].find(quote)?;
            if key == name {
                return Some(&value[1..1 + end]);
            }
            rest = &value[end + 2..];
        }
        None
    }

    /// `YYYY-MM-DDThh:mm:ss` with `Z` or `±hh:mm`, optional fractional
    /// seconds, as Unix seconds.
    pub(super) fn timestamp(text: &str) -> Option<i64> {
        let b = text.as_bytes();
        if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<i64> {
            let s = text.get(range)?;
            s.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| s.parse().ok())
                .flatten()
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
            return None;
        }
        let mut rest = &text[19..];
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            rest = &frac[digits..];
        }
        let offset = match rest {
            "Z" | "z" | "" => 0,
            _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
                let sign = match rest.as_bytes()[0] {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let oh: i64 = rest[1..3].parse().ok()?;
                let om: i64 = rest[4..6].parse().ok()?;
                sign * (oh * 3600 + om * 60)
            }
            _ => return None,
        };
        // Days from the civil date (Howard Hinnant's algorithm).
        let (y, mo) = if mo <= 2 {
            (y - 1, mo + 9)
        } else {
            (y, mo - 3)
        };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * mo + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Some(days * 86_400 + h * 3600 + mi * 60 + s - offset)
    }

    pub(super) fn parse(text: &str, file: &Path, now: u64) -> Result<Vec<Anchor>, AnchorError> {
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        let roots = elements(text, 0, text, "TrustAnchor", file)?;
        let root = match roots.as_slice() {
            [one] => one,
            [] => return Err(syntax(file, 1, "no <TrustAnchor> element")),
            [_, second, ..] => {
                return Err(syntax(
                    file,
                    line_of(text, second.at),
                    "more than one <TrustAnchor>",
                ))
            }
        };
        let zone_text = child(root, text, "Zone", file)?;
        let zone = owner(zone_text, file, line_of(text, root.at))?;
        let mut anchors = Vec::new();
        let digests = elements(root.content, root.content_at, text, "KeyDigest", file)?;
        if digests.is_empty() {
            return Err(syntax(
                file,
                line_of(text, root.at),
                "no <KeyDigest> element",
            ));
        }
        for digest in &digests {
            let line = line_of(text, digest.at);
            let window = |name: &str| -> Result<Option<i64>, AnchorError> {
                attribute(digest.attributes, name)
                    .map(|v| {
                        timestamp(v).ok_or_else(|| {
                            syntax(file, line, format!("{name}={v:?} is not a date and time"))
                        })
                    })
                    .transpose()
            };
            let (from, until) = (window("validFrom")?, window("validUntil")?);
            let key_tag: u16 = number(
                Some(&child(digest, text, "KeyTag", file)?),
                "key tag",
                file,
                line,
            )?;
            let algorithm: u8 = number(
                Some(&child(digest, text, "Algorithm", file)?),
                "algorithm",
                file,
                line,
            )?;
            let digest_type: u8 = number(
                Some(&child(digest, text, "DigestType", file)?),
                "digest type",
                file,
                line,
            )?;
            let hex: String = child(digest, text, "Digest", file)?
                .split_whitespace()
                .collect();
            let ds = ds_of(key_tag, algorithm, digest_type, &hex, file, line)?;
            let valid = from.is_none_or(|f| f <= now) && until.is_none_or(|u| now < u);
            if !valid {
                continue;
            }
            if anchors.len() == MAX_RECORDS {
                return Err(AnchorError::TooMany {
                    file: file.to_owned(),
                    what: "anchors",
                    limit: MAX_RECORDS,
                });
            }
            anchors.push(Anchor {
                zone: zone.clone(),
                key: AnchorKey::Ds(ds),
            });
        }
        if anchors.is_empty() {
            return Err(AnchorError::Empty {
                file: file.to_owned(),
                reason: format!(
                    "none of its {} key digests is valid now (validFrom/validUntil)",
                    digests.len()
                ),
            });
        }
        Ok(anchors)
    }
}

#[cfg(test)]
mod tests;
