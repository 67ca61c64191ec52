//! A card key anchored in DNS: an A2A Agent Card whose JWS signature
//! verifies with the Ed25519 key the domain's AID record publishes (`k`
//! at `_agent.{domain}`, [`aid`]).
//!
//! The card's own signature check ([`OtherFormats::card`]) takes the key
//! from the key set its `jku` names on the card's host, over HTTPS: that
//! proves no more than fetching the card over HTTPS does, so on its own it
//! earns nothing. When that key is the one the AID record publishes, the
//! domain's DNS names the card's signer: the card's agent gets the
//! `fingerprint` flag, and `dnssec` as well when the `_agent` TXT RRset
//! validates Secure. Its level then follows [`Evidence::level`]:
//! dns-verified with `dnssec`, unverified with `fingerprint` alone (no
//! challenge was signed).
//!
//! The AID record is read as ADP's lookup reads its own
//! (`crawl/lookup.rs`): from the records that validated when the verdict
//! is Secure, else from the plain answer. A Bogus RRset anchors nothing:
//! its `dnssec` step fails beside the card, which is stored unverified.
//! The steps the report gets: `signature` (what the key is anchored by,
//! or why it is not), then `dns_txt` (the AID record's key) and `dnssec`
//! (its RRset's verdict) when an Ed25519 key was looked for.

use std::time::Instant;

use super::OtherFormats;
use crate::crawl::dns::{DnsError, Dnssec};
use crate::crawl::error::CrawlError;
use crate::crawl::report::{Run, StepName};
use crate::formats::{a2a, aid};
use crate::trust::Evidence;

/// A card signature that verified, and with which key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Signed {
    /// The JWS `alg`.
    pub(super) alg: String,
    /// The JWS `kid`.
    pub(super) kid: String,
    /// The key set the key came from.
    pub(super) jku: String,
    /// The key.
    pub(super) key: a2a::SignerKey,
}

/// What the domain's `_agent` TXT RRset says of a card key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Anchor {
    /// No AID record publishes a key: why.
    Absent(String),
    /// The key an AID record publishes, and the RRset's verdict.
    Key {
        /// `k`, an Ed25519 public key.
        key: [u8; 32],
        /// The record's `v` and, in aid1, its `i`.
        record: String,
        /// `None` when the TXT RRset validated Secure; else why not (the
        /// `dnssec` step's line).
        unvalidated: Option<String>,
        /// The DNSSEC chain that proved the RRset, when it was Secure and
        /// one could be carried.
        chain: Option<Vec<u8>>,
    },
    /// The RRset fails DNSSEC validation: nothing in it is used.
    Bogus(String),
}

impl OtherFormats<'_> {
    /// Records the `signature` step of a card whose signature verified
    /// (`took_ms`), and for an Ed25519 key what the domain's AID record
    /// says of it (`dns_txt`, `dnssec`); answers the evidence the card
    /// earns.
    pub(super) async fn anchor(
        &self,
        domain: &str,
        signed: &Signed,
        took_ms: f64,
        run: &mut Run,
    ) -> Evidence {
        let owner = format!("_agent.{domain}");
        let by = format!(
            "{} signature by key {} from {}",
            signed.alg, signed.kid, signed.jku
        );
        if signed.key == a2a::SignerKey::P256 {
            run.pass(
                StepName::Signature,
                took_ms,
                format!(
                    "{by}; a P-256 key cannot be the Ed25519 key AID's k publishes, so it is not \
                     anchored in DNS: {HTTPS_ONLY}"
                ),
            );
            return Evidence::default();
        }
        let started = Instant::now();
        let anchor = self.aid_key(&owner).await;
        let took = started.elapsed().as_secs_f64() * 1000.0;
        let (evidence, why) = judge(&signed.key, &anchor, &owner);
        run.pass(StepName::Signature, took_ms, format!("{by}; {why}"));
        match anchor {
            Anchor::Absent(why) => run.report.skipped(StepName::DnsTxt, took, why),
            Anchor::Key {
                record,
                unvalidated,
                ..
            } => {
                run.pass(
                    StepName::DnsTxt,
                    took,
                    format!("{record} at {owner} publishes an Ed25519 key (k)"),
                );
                match unvalidated {
                    None => run.pass(
                        StepName::Dnssec,
                        took,
                        "the TXT RRset validates Secure from the trust anchor",
                    ),
                    Some(line) => run.skip(StepName::Dnssec, line),
                }
            }
            Anchor::Bogus(detail) => {
                let e = CrawlError::DnssecBogus {
                    name: owner.clone(),
                    detail,
                };
                run.report.failed_aside(StepName::Dnssec, took, &e);
            }
        }
        evidence
    }

    /// The key the AID record at `owner` publishes, read from the records
    /// that validated when the RRset is Secure.
    async fn aid_key(&self, owner: &str) -> Anchor {
        let (answer, verdict) = tokio::join!(self.dns.txt(owner), self.dns.txt_dnssec(owner));
        let mut chain = None;
        let (records, unvalidated) = match verdict {
            Dnssec::Secure {
                records,
                chain: proved,
            } => {
                chain = proved;
                (Ok(records), None)
            }
            Dnssec::Bogus { detail } => return Anchor::Bogus(detail),
            Dnssec::Insecure => (
                answer.map(|(r, _)| r),
                Some("the zone is not signed (Insecure)".to_owned()),
            ),
            Dnssec::Indeterminate { detail } => (
                answer.map(|(r, _)| r),
                Some(format!("not validated: {detail}")),
            ),
        };
        let records = match records {
            Ok(records) => records,
            Err(DnsError::NxDomain { .. } | DnsError::NoRecords { .. }) => {
                return Anchor::Absent(format!("no TXT record at {owner}"))
            }
            Err(e) => return Anchor::Absent(format!("{owner}: {e}")),
        };
        match aid::select(&records) {
            None => Anchor::Absent(format!("no AID record at {owner}")),
            Some(Err(e)) => Anchor::Absent(format!(
                "the AID record at {owner} does not read ({}: {})",
                e.reason, e.message
            )),
            Some(Ok(record)) => match record.pka {
                None => Anchor::Absent(format!("the AID record at {owner} publishes no key (k)")),
                Some(key) => Anchor::Key {
                    key,
                    record: match &record.kid {
                        Some(kid) => format!("v={} (i={kid})", record.version.as_str()),
                        None => format!("v={}", record.version.as_str()),
                    },
                    unvalidated,
                    chain,
                },
            },
        }
    }
}

/// Why a key set served over HTTPS earns nothing.
const HTTPS_ONLY: &str = "a key set the card's host serves over HTTPS proves no more than \
                          fetching the card over HTTPS does, so the card stays unverified";

/// The evidence a card signed with `key` earns from what `owner` (the
/// domain's `_agent` name) publishes, and the signature step's reason.
fn judge(key: &a2a::SignerKey, anchor: &Anchor, owner: &str) -> (Evidence, String) {
    match (key, anchor) {
        (
            a2a::SignerKey::Ed25519(signer),
            Anchor::Key {
                key,
                unvalidated,
                chain,
                ..
            },
        ) if signer == key => {
            let secure = unvalidated.is_none();
            let evidence = Evidence {
                fingerprint: true,
                dnssec: secure,
                dnssec_chain: chain.clone().filter(|_| secure),
                ..Evidence::default()
            };
            let why = if secure {
                format!(
                    "the key is the one the AID record at {owner} publishes (k), and that record \
                     validates under DNSSEC: anchored in DNS (dns-verified)"
                )
            } else {
                format!(
                    "the key is the one the AID record at {owner} publishes (k): anchored in DNS, \
                     which is not validated, so the fingerprint flag alone (unverified)"
                )
            };
            (evidence, why)
        }
        (_, Anchor::Key { .. }) => (
            Evidence::default(),
            format!(
                "the AID record at {owner} publishes another key (k): not anchored in DNS; \
                 {HTTPS_ONLY}"
            ),
        ),
        (_, Anchor::Absent(why)) => (
            Evidence::default(),
            format!("{why}: not anchored in DNS; {HTTPS_ONLY}"),
        ),
        (_, Anchor::Bogus(_)) => (
            Evidence::default(),
            format!(
                "the TXT RRset at {owner} fails DNSSEC validation, so its AID record anchors \
                 nothing; {HTTPS_ONLY}"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::TrustLevel;

    const OWNER: &str = "_agent.example.com";

    fn key(secure: bool) -> Anchor {
        Anchor::Key {
            key: [7; 32],
            record: "v=aid2".into(),
            unvalidated: (!secure).then(|| "the zone is not signed (Insecure)".into()),
            chain: secure.then(|| vec![1, 2, 3]),
        }
    }

    #[test]
    fn the_aid_key_anchors_the_card_and_dnssec_raises_it() {
        let signer = a2a::SignerKey::Ed25519([7; 32]);
        let (e, why) = judge(&signer, &key(true), OWNER);
        assert!(e.fingerprint && e.dnssec);
        assert_eq!(e.dnssec_chain, Some(vec![1, 2, 3]), "the chain travels");
        assert_eq!(e.level(), TrustLevel::DnsVerified);
        assert!(why.contains("anchored in DNS (dns-verified)"), "{why}");
        let (e, why) = judge(&signer, &key(false), OWNER);
        assert!(e.fingerprint && !e.dnssec);
        assert_eq!(e.level(), TrustLevel::Unverified, "no challenge was signed");
        assert!(why.contains("fingerprint flag alone"), "{why}");
    }

    #[test]
    fn another_key_no_record_or_a_bogus_rrset_earn_nothing() {
        let signer = a2a::SignerKey::Ed25519([8; 32]);
        for (anchor, said) in [
            (key(true), "publishes another key"),
            (Anchor::Absent("no AID record at x".into()), "no AID record"),
            (Anchor::Bogus("sig".into()), "fails DNSSEC validation"),
        ] {
            let (e, why) = judge(&signer, &anchor, OWNER);
            assert_eq!(e, Evidence::default(), "{anchor:?}");
            assert!(why.contains(said), "{why}");
            assert!(why.contains("stays unverified"), "{why}");
        }
        let (e, _) = judge(&a2a::SignerKey::P256, &key(true), OWNER);
        assert_eq!(e, Evidence::default());
    }
}
