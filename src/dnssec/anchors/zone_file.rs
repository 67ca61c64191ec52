//! Trust anchors in zone-file syntax: DS or DNSKEY records, one or more,
//! for any zone; `;` comments, blank lines, parentheses around a record
//! that spans lines and a `$TTL` line allowed; owner names absolute. The
//! record-level readers (owner, numbers, algorithm, digest) serve the XML
//! form too.

use std::path::Path;

use base64::Engine as _;
use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{Algorithm, DigestType, PublicKeyBuf};
use hickory_proto::rr::Name;

use super::anchor::{syntax, Anchor, AnchorError, AnchorKey, MAX_RECORDS};

/// Longest record (its text, parentheses joined) in a zone-file anchor.
const MAX_RECORD_CHARS: usize = 4096;

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

pub(super) fn read(text: &str, file: &Path) -> Result<Vec<Anchor>, AnchorError> {
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

pub(super) fn owner(text: &str, file: &Path, line: usize) -> Result<Name, AnchorError> {
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

pub(super) fn number<T: std::str::FromStr>(
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
pub(super) fn ds_of(
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
