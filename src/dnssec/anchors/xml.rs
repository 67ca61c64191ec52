//! Trust anchors in IANA's `root-anchors.xml` (RFC 9718 section 2): a
//! `<TrustAnchor>` with its `<Zone>` and `<KeyDigest>` elements, each a DS
//! record for the zone, read by a scanner for exactly these elements.

use std::path::Path;

use super::anchor::{syntax, Anchor, AnchorError, AnchorKey, MAX_RECORDS};
use super::zone_file::{ds_of, number, owner};

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
