//! Filter posting lists in memory, over agent ordinals.
//!
//! Every agent the store has seen gets an ordinal (a `u32`, in order of
//! first arrival, never reused: the `ordinals` tree maps id -> ordinal,
//! the `compact` tree ordinal -> compact record). The `index` tree keeps
//! one key per (term, ordinal) of each live descriptor, written in the
//! record's transaction; at open those keys become one roaring bitmap per
//! term, kept in memory and updated after each commit. A filter is then
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

use super::{descriptor, Descriptor, RecordBody, StoreError};
use crate::verify::TrustLevel;

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

/// The `index` key of a term of one agent: its prefix and the agent's
/// ordinal, big-endian (so a term's keys sort in ordinal order).
pub(super) fn index_key(prefix: &[u8], ord: u32) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 4);
    k.extend_from_slice(prefix);
    k.extend_from_slice(&ord.to_be_bytes());
    k
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
    let mut out = BTreeSet::new();
    out.extend(d.capabilities.iter().map(|t| prefix(FIELD_CAPABILITY, t)));
    out.extend(d.tags.iter().map(|t| prefix(FIELD_TAG, t)));
    for lang in &d.languages {
        out.insert(prefix(FIELD_LANGUAGE, &lang.to_ascii_lowercase()));
        out.insert(prefix(
            FIELD_LANGUAGE,
            &descriptor::primary_language(lang).to_ascii_lowercase(),
        ));
    }
    out
}

/// Every term a stored record is indexed under: a live descriptor's
/// filter terms, its trust level and liveness; nothing for a tombstone.
pub(super) fn body_terms(body: &RecordBody) -> BTreeSet<Vec<u8>> {
    match body {
        RecordBody::Descriptor(d) => {
            let mut out = terms_of(&d.descriptor);
            out.insert(trust_prefix(d.evidence.level()));
            out.insert(live_prefix());
            out
        }
        RecordBody::Tombstone(_) => BTreeSet::new(),
    }
}

/// The posting lists: one bitmap of ordinals per term.
#[derive(Debug, Default)]
pub(super) struct Postings {
    lists: HashMap<Vec<u8>, RoaringBitmap>,
}

impl Postings {
    /// The lists of an `index` tree, read key by key.
    pub(super) fn load(index: &sled::Tree) -> Result<Self, StoreError> {
        let mut out = Self::default();
        let mut last: Option<(Vec<u8>, Vec<u32>)> = None;
        for key in index.iter().keys() {
            let key = key?;
            let Some(split) = key.len().checked_sub(4).filter(|s| *s >= 2) else {
                return Err(StoreError::Corrupt {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    reason: "an index key too short to hold a term and an ordinal".into(),
                });
            };
            let (p, ord) = key.split_at(split);
            let ord = u32::from_be_bytes(ord.try_into().expect("split 4 bytes from the end"));
            // Keys arrive sorted: a term's ordinals come together, in
            // order, and are added in one sorted run.
            match &mut last {
                Some((held, ords)) if held.as_slice() == p => ords.push(ord),
                _ => {
                    if let Some((held, ords)) = last.take() {
                        out.add_run(held, &ords);
                    }
                    last = Some((p.to_vec(), vec![ord]));
                }
            }
        }
        if let Some((held, ords)) = last {
            out.add_run(held, &ords);
        }
        Ok(out)
    }

    fn add_run(&mut self, prefix: Vec<u8>, sorted: &[u32]) {
        let list = self.lists.entry(prefix).or_default();
        // Sorted and distinct (sled keys are), so this cannot fail; fall
        // back to one by one if it ever did.
        if list.append(sorted.iter().copied()).is_err() {
            list.extend(sorted.iter().copied());
        }
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
    fn lists_load_from_index_keys_and_a_short_key_is_corrupt() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let index = db.open_tree("index").unwrap();
        let cap = prefix(FIELD_CAPABILITY, "ocr");
        for ord in [5u32, 70_000, 1] {
            index.insert(index_key(&cap, ord), &[][..]).unwrap();
            index
                .insert(index_key(&live_prefix(), ord), &[][..])
                .unwrap();
        }
        let p = Postings::load(&index).unwrap();
        assert_eq!(
            p.select(std::slice::from_ref(&cap), None)
                .iter()
                .collect::<Vec<_>>(),
            [1, 5, 70_000]
        );
        assert_eq!(p.live(), 3);
        index.insert(b"c\x00", &[][..]).unwrap();
        assert!(matches!(
            Postings::load(&index),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
