//! Filter posting lists in memory, over agent ordinals.
//!
//! Every agent the store has seen gets an ordinal (a `u32`, in order of
//! first arrival, never reused: the `ordinals` tree maps id -> ordinal,
//! the `compact` tree ordinal -> compact record). A live descriptor's
//! compact record carries what its terms come from (capabilities, tags,
//! languages, trust level); at open the `compact` tree is read once, in
//! ordinal order, into one roaring bitmap per term, kept in memory and
//! updated after each commit. (Up to layout version 2 an `index` tree
//! kept one key per term and ordinal: eight or so sled inserts per write
//! that only the open read back.) A filter is then
//! an AND of bitmaps (microseconds, whatever the lists' sizes, the empty
//! intersection of two common terms included), and a page is the first
//! ordinals after the cursor's: results come in order of first arrival,
//! so an agent that arrives while a client pages lands on a later page
//! and never shifts the pages already read.
//!
//! Terms: capability (`c`), tag (`t`), language (`l`: the full tag and
//! its primary subtag), trust level (`v`), and `*` (every live
//! descriptor).

use std::collections::{BTreeSet, HashMap};

use roaring::RoaringBitmap;

use super::claims::ClaimCounts;
use super::compact::{decode_as, Filed};
use super::error::StoreError;
use crate::descriptor::{self, Descriptor};
use crate::record::RecordBody;
use crate::trust::TrustLevel;

pub(super) const FIELD_CAPABILITY: u8 = b'c';
pub(super) const FIELD_TAG: u8 = b't';
pub(super) const FIELD_LANGUAGE: u8 = b'l';
pub(super) const FIELD_TRUST: u8 = b'v';
pub(super) const FIELD_LIVE: u8 = b'*';

/// The index prefix of a term: field byte, term, `0x00`.
pub(super) fn prefix(field: u8, term: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(term.len() + 2);
    k.push(field);
    k.extend_from_slice(term.as_bytes());
    k.push(0);
    k
}

/// The prefix every live descriptor carries.
pub(super) fn live_prefix() -> Vec<u8> {
    prefix(FIELD_LIVE, "")
}

/// The prefix of a trust level.
pub(super) fn trust_prefix(level: TrustLevel) -> Vec<u8> {
    prefix(FIELD_TRUST, level.as_str())
}

/// A stored ordinal (the `ordinals` tree's values, the `compact` tree's
/// keys).
pub(super) fn decode_ord(key: &str, bytes: &[u8]) -> Result<u32, StoreError> {
    <[u8; 4]>::try_from(bytes)
        .map(u32::from_be_bytes)
        .map_err(|_| StoreError::Corrupt {
            key: key.to_owned(),
            reason: format!("an ordinal of {} bytes", bytes.len()),
        })
}

/// The filter terms a descriptor is indexed under (without trust and
/// liveness).
pub(super) fn terms_of(d: &Descriptor) -> BTreeSet<Vec<u8>> {
    filter_terms(&d.capabilities, &d.tags, &d.languages)
}

/// The filter terms of declared capabilities, tags and languages: each
/// capability and tag, each language's full tag and primary subtag
/// (lowercased).
fn filter_terms(
    capabilities: &[String],
    tags: &[String],
    languages: &[String],
) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    out.extend(capabilities.iter().map(|t| prefix(FIELD_CAPABILITY, t)));
    out.extend(tags.iter().map(|t| prefix(FIELD_TAG, t)));
    for lang in languages {
        out.insert(prefix(FIELD_LANGUAGE, &lang.to_ascii_lowercase()));
        out.insert(prefix(
            FIELD_LANGUAGE,
            &descriptor::primary_language(lang).to_ascii_lowercase(),
        ));
    }
    out
}

/// Every term a live descriptor is indexed under: its filter terms, its
/// trust level and liveness.
fn live_terms(filter: BTreeSet<Vec<u8>>, level: TrustLevel) -> BTreeSet<Vec<u8>> {
    let mut out = filter;
    out.insert(trust_prefix(level));
    out.insert(live_prefix());
    out
}

/// Every term a stored record is indexed under: a live descriptor's
/// filter terms, the trust level this node counts (`unverified` when its
/// evidence is only `claimed`) and liveness; nothing for a tombstone.
pub(super) fn body_terms(body: &RecordBody, claimed: bool) -> BTreeSet<Vec<u8>> {
    match body {
        RecordBody::Descriptor(d) => {
            let level = if claimed {
                TrustLevel::Unverified
            } else {
                d.evidence.level()
            };
            live_terms(terms_of(&d.descriptor), level)
        }
        RecordBody::Tombstone(_) => BTreeSet::new(),
    }
}

/// Every term the compact record of a live descriptor is indexed under:
/// the same as [`body_terms`] of the record it was made from.
fn filed_terms(f: &Filed) -> BTreeSet<Vec<u8>> {
    live_terms(
        filter_terms(&f.capabilities, &f.tags, &f.languages),
        f.level,
    )
}

/// The posting lists: one bitmap of ordinals per term.
#[derive(Debug, Default, Clone)]
#[cfg_attr(test, derive(PartialEq))]
pub(super) struct Postings {
    lists: HashMap<Vec<u8>, RoaringBitmap>,
}

impl Postings {
    /// The lists of a `compact` tree, read record by record, and the
    /// live claimed records by signer. Keys come in ordinal order, so each
    /// list grows at its end.
    pub(super) fn load(compact: &sled::Tree) -> Result<(Self, ClaimCounts), StoreError> {
        let mut out = Self::default();
        let mut claims = ClaimCounts::default();
        for entry in compact.iter() {
            let (key, value) = entry?;
            let ord = decode_ord("compact", &key)?;
            let Some(filed) = decode_as::<Filed>(&format!("ordinal {ord}"), &value)? else {
                continue;
            };
            if let Some(signer) = filed.claimant() {
                claims.add(signer);
            }
            for term in filed_terms(&filed) {
                let list = out.lists.entry(term).or_default();
                // In order, so a push; should it ever not be, an insert.
                if list.try_push(ord).is_err() {
                    list.insert(ord);
                }
            }
        }
        Ok((out, claims))
    }

    pub(super) fn insert(&mut self, prefix: Vec<u8>, ord: u32) {
        self.lists.entry(prefix).or_default().insert(ord);
    }

    pub(super) fn remove(&mut self, prefix: &[u8], ord: u32) {
        if let Some(list) = self.lists.get_mut(prefix) {
            list.remove(ord);
            if list.is_empty() {
                self.lists.remove(prefix);
            }
        }
    }

    /// How many live descriptors carry the term.
    pub(super) fn len(&self, prefix: &[u8]) -> u64 {
        self.lists.get(prefix).map_or(0, RoaringBitmap::len)
    }

    /// The ordinals that carry every one of `prefixes` (every live
    /// descriptor when there are none) and, with `min_trust`, a trust
    /// level at least that.
    pub(super) fn select(
        &self,
        prefixes: &[Vec<u8>],
        min_trust: Option<TrustLevel>,
    ) -> RoaringBitmap {
        let empty = RoaringBitmap::new();
        let mut lists: Vec<&RoaringBitmap> = Vec::with_capacity(prefixes.len().max(1));
        if prefixes.is_empty() {
            lists.push(self.lists.get(&live_prefix()).unwrap_or(&empty));
        }
        for p in prefixes {
            match self.lists.get(p) {
                Some(list) => lists.push(list),
                None => return RoaringBitmap::new(),
            }
        }
        lists.sort_by_key(|l| l.len());
        let mut acc = match lists.as_slice() {
            [one] => (*one).clone(),
            [a, b, ..] => *a & *b,
            [] => unreachable!("at least the live list or one term"),
        };
        for list in lists.iter().skip(2) {
            if acc.is_empty() {
                return acc;
            }
            acc &= *list;
        }
        if let Some(min) = min_trust.filter(|m| *m > TrustLevel::Unverified) {
            let mut trusted = RoaringBitmap::new();
            for level in [
                TrustLevel::DnsVerified,
                TrustLevel::KeyVerified,
                TrustLevel::PeerVerified,
            ] {
                if level >= min {
                    if let Some(list) = self.lists.get(&trust_prefix(level)) {
                        trusted |= list;
                    }
                }
            }
            acc &= trusted;
        }
        acc
    }

    /// The live count (the `*` list).
    pub(super) fn live(&self) -> u64 {
        self.len(&live_prefix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postings(entries: &[(&[u8], u32)]) -> Postings {
        let mut p = Postings::default();
        for (prefix, ord) in entries {
            p.insert(prefix.to_vec(), *ord);
        }
        p
    }

    #[test]
    fn a_filter_is_the_intersection_of_its_terms_and_an_unknown_term_matches_nothing() {
        let cap = prefix(FIELD_CAPABILITY, "translation");
        let tag = prefix(FIELD_TAG, "legal");
        let live = live_prefix();
        let p = postings(&[
            (&live, 1),
            (&live, 2),
            (&live, 3),
            (&cap, 1),
            (&cap, 2),
            (&tag, 2),
            (&tag, 3),
        ]);
        let got = |prefixes: &[Vec<u8>]| p.select(prefixes, None).iter().collect::<Vec<_>>();
        assert_eq!(got(&[cap.clone(), tag.clone()]), [2]);
        assert_eq!(got(std::slice::from_ref(&cap)), [1, 2]);
        assert_eq!(got(&[]), [1, 2, 3]);
        assert!(got(&[cap, prefix(FIELD_TAG, "finance")]).is_empty());
    }

    #[test]
    fn a_trust_floor_keeps_the_levels_at_or_above_it() {
        let live = live_prefix();
        let p = postings(&[
            (&live, 1),
            (&live, 2),
            (&live, 3),
            (&trust_prefix(TrustLevel::Unverified), 1),
            (&trust_prefix(TrustLevel::KeyVerified), 2),
            (&trust_prefix(TrustLevel::PeerVerified), 3),
        ]);
        let got = |min| p.select(&[], Some(min)).iter().collect::<Vec<_>>();
        assert_eq!(got(TrustLevel::Unverified), [1, 2, 3]);
        assert_eq!(got(TrustLevel::DnsVerified), [2, 3]);
        assert_eq!(got(TrustLevel::PeerVerified), [3]);
    }

    #[test]
    fn lists_load_from_compact_records_and_a_damaged_one_is_corrupt() {
        use super::super::compact::{encode_live, encode_tombstone, sample};
        let db = sled::Config::new().temporary(true).open().unwrap();
        let compact = db.open_tree("compact").unwrap();
        for ord in [5u32, 70_000, 1] {
            compact
                .insert(ord.to_be_bytes(), encode_live(&sample()))
                .unwrap();
        }
        compact
            .insert(3u32.to_be_bytes(), encode_tombstone("gone", 2))
            .unwrap();
        let (p, _) = Postings::load(&compact).unwrap();
        let got = |term: Vec<u8>| p.select(&[term], None).iter().collect::<Vec<_>>();
        assert_eq!(got(prefix(FIELD_CAPABILITY, "translation")), [1, 5, 70_000]);
        assert_eq!(got(prefix(FIELD_TAG, "legal")), [1, 5, 70_000]);
        // The declared `en-GB`, lowercased, and its primary subtag.
        assert_eq!(got(prefix(FIELD_LANGUAGE, "en-gb")), [1, 5, 70_000]);
        assert_eq!(got(prefix(FIELD_LANGUAGE, "en")), [1, 5, 70_000]);
        assert_eq!(got(trust_prefix(TrustLevel::KeyVerified)), [1, 5, 70_000]);
        assert_eq!(p.live(), 3, "the tombstone is not live");
        compact.insert(9u32.to_be_bytes(), &[b'd'; 3][..]).unwrap();
        assert!(matches!(
            Postings::load(&compact),
            Err(StoreError::Corrupt { .. })
        ));
        compact.remove(9u32.to_be_bytes()).unwrap();
        compact.insert(b"ab", encode_live(&sample())).unwrap();
        assert!(matches!(
            Postings::load(&compact),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
