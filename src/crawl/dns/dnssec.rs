//! DNSSEC validation of the `_agent` TXT RRset (and of DNS-AID's SVCB
//! RRsets), from the trust anchors of
//! [`super::anchors`], by hickory's validator; never a resolver's AD bit.
//!
//! # Priming: an anchor becomes the keys hickory trusts
//!
//! hickory 0.26 takes trust anchors as DNSKEYs only, and trusts a zone's
//! DNSKEY RRset without its parent's DS only when every key in it is an
//! anchor; a zone below the root with one anchored key-signing key beside
//! its zone-signing key sends it to the (absent or unsigned) parent for a
//! DS, which fails. So each anchored zone is *primed* first (RFC 4035
//! 4.3's "authenticated DNSKEY RRset" from a trust anchor): its DNSKEY
//! RRset is asked for with its RRSIGs, one of its keys must be the
//! anchored key (the same key, or one whose digest is the anchor's DS:
//! RFC 4034 5.1.4) and that key's RRSIG over the whole RRset must verify
//! within its validity window. The keys of that RRset, and only those,
//! are handed to hickory as the anchors for the zone. The primed keys
//! are kept until the RRset's TTL (at most [`super::MAX_TTL`]) or the
//! signature's expiry, whichever comes first; a zone that could not be
//! primed is tried again after [`RETRY_PRIMING`].
//!
//! # The verdict: when Bogus is a failure
//!
//! A name is *covered* when an anchored zone is the name or one of its
//! ancestors; the closest such zone is its anchor zone.
//! - No anchor covers the name: Indeterminate. No chain can start, so
//!   there is nothing to prove and nothing to forge against: the answer
//!   is plain DNS, with no `dnssec` evidence. (The root's built-in anchor
//!   covers every name, so this is the case below for the root.)
//! - The anchor zone was primed: hickory's verdict for the TXT RRset is
//!   authoritative. Secure is Secure; Bogus, and any failure of the
//!   validating lookup, is Bogus (the chain from the anchor says the zone
//!   is signed and the answer is not validly signed, or could not be
//!   checked). Insecure (a provably unsigned delegation) is accepted under
//!   the root's anchor only: under an anchor below the root, hickory may
//!   prove insecurity from a zone *above* the anchor, which the anchor
//!   says nothing about, so there it is Bogus.
//! - The anchor zone could not be primed (its DNSKEY RRset is missing,
//!   unsigned, or not signed by the anchored key): Bogus for a zone a
//!   configured file anchors, since the operator said the zone is signed
//!   and stripped signatures look exactly like this. For the root with
//!   only its built-in anchor it is Indeterminate: resolvers that serve no root
//!   DNSKEY RRset signed by the root's key (a private authoritative
//!   server such as the testbed's, which does not answer for the root)
//!   cannot start any chain. An attacker between the crawler and its
//!   resolvers can produce the same, so with the built-in anchor DNSSEC
//!   earns evidence but cannot refuse an answer whose root is withheld;
//!   an operator who wants refusal configures the root's anchor
//!   explicitly (IANA's `root-anchors.xml` will do).
//!
//! Nothing in this decision asks an unvalidated lookup whether a zone is
//! signed: only the priming's verified RRset and hickory's verdict count.
//! When the verdict is Secure the crawler uses the records that validated,
//! not a second, unvalidated answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::dnssec::rdata::{DNSSECRData, DNSKEY};
use hickory_proto::dnssec::{Proof, TrustAnchors, Verifier};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_resolver::TokioResolver;
use tokio::sync::Mutex;

use super::answer::{joined, Dnssec, MAX_SVCB_RECORDS, MAX_TTL, MAX_TXT_RECORDS};
use super::resolver::build;
use super::TrustAnchorSet;
use crate::dnssec::chain::{self, expires_in};

/// How soon a zone whose priming failed is primed again.
pub const RETRY_PRIMING: Duration = Duration::from_secs(30);

/// What a priming's outcome is worth saying in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reporting {
    /// Nothing changed since it was last said (at debug only).
    Quiet,
    /// Primed after a failure that was said.
    Primed,
    /// The root's built-in anchor starts no chain: usual on a private DNS
    /// server, said once at info.
    BuiltinUnprimed,
    /// A configured anchor failed, or failed otherwise: a warning.
    Unprimed,
}

/// What to say of a zone's priming: `said` is the failure last said of
/// it (none when it was primed, or never failed), `failed` why this one
/// failed, `builtin` whether only the built-in anchor names the zone.
fn reporting(said: Option<&str>, failed: Option<&str>, builtin: bool) -> Reporting {
    match (said, failed) {
        (None, None) => Reporting::Quiet,
        (Some(_), None) => Reporting::Primed,
        (Some(before), Some(now)) if before == now => Reporting::Quiet,
        (_, Some(_)) if builtin => Reporting::BuiltinUnprimed,
        (_, Some(_)) => Reporting::Unprimed,
    }
}

/// The validating half of [`super::Dns`].
pub(super) struct Validator {
    servers: Vec<SocketAddr>,
    timeout: Duration,
    cache_size: u64,
    anchors: TrustAnchorSet,
    /// The crawler's non-validating resolver (the first priming lookup).
    plain: Arc<TokioResolver>,
    primed: Mutex<Option<Arc<Primed>>>,
    /// The reason each zone's priming last failed, as last logged: a
    /// failure is logged when it starts or its reason changes, not at
    /// every retry.
    reported: std::sync::Mutex<Vec<(Name, String)>>,
}

/// The anchored zones as last primed, and the resolver validating from
/// their keys.
struct Primed {
    resolver: Option<Arc<TokioResolver>>,
    zones: Vec<(Name, Result<(), String>)>,
    until: Instant,
}

impl Primed {
    fn zone(&self, zone: &Name) -> Option<&Result<(), String>> {
        self.zones.iter().find(|(z, _)| z == zone).map(|(_, r)| r)
    }
}

/// A zone's DNSKEY RRset, verified from its anchor.
struct ZoneKeys {
    keys: Vec<DNSKEY>,
    valid_for: Duration,
}

impl Validator {
    pub(super) fn new(
        servers: &[SocketAddr],
        timeout: Duration,
        anchors: TrustAnchorSet,
        cache_size: u64,
        plain: Arc<TokioResolver>,
    ) -> Self {
        Self {
            servers: servers.to_vec(),
            timeout,
            cache_size,
            anchors,
            plain,
            primed: Mutex::new(None),
            reported: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// What DNSSEC validation says of the TXT RRset at `name` (its
    /// records' strings joined).
    pub(super) async fn txt(&self, name: &str) -> Dnssec {
        self.rrset(name, RecordType::TXT, MAX_TXT_RECORDS, |data| match data {
            RData::TXT(t) => Some(joined(t)),
            _ => None,
        })
        .await
    }

    /// What DNSSEC validation says of the SVCB RRset at `name` (DNS-AID;
    /// its records in presentation format).
    pub(super) async fn svcb(&self, name: &str) -> Dnssec {
        self.rrset(
            name,
            RecordType::SVCB,
            MAX_SVCB_RECORDS,
            |data| match data {
                RData::SVCB(svcb) => Some(svcb.to_string()),
                _ => None,
            },
        )
        .await
    }

    /// What DNSSEC validation says of the `rtype` RRset at `name`; at
    /// most `max` of the records that validated, as `text` gives them.
    async fn rrset(
        &self,
        name: &str,
        rtype: RecordType,
        max: usize,
        text: impl Fn(&RData) -> Option<String>,
    ) -> Dnssec {
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        let Ok(owner) = Name::from_ascii(&fqdn) else {
            return Dnssec::Indeterminate {
                detail: format!("{name} is not a DNS name"),
            };
        };
        let Some(zone) = self.anchors.covering(&owner) else {
            return Dnssec::Indeterminate {
                detail: format!("no trust anchor covers {name}"),
            };
        };
        let primed = self.primed().await;
        match primed.zone(&zone) {
            Some(Ok(())) => {}
            Some(Err(reason)) if self.anchors.is_builtin_zone(&zone) => {
                return Dnssec::Indeterminate {
                    detail: format!(
                        "the root's built-in trust anchor starts no chain here: {reason}"
                    ),
                }
            }
            Some(Err(reason)) => {
                return Dnssec::Bogus {
                    detail: format!("trust anchor for {zone}: {reason}"),
                }
            }
            None => {
                return Dnssec::Bogus {
                    detail: format!("trust anchor for {zone}: not primed"),
                }
            }
        }
        let Some(resolver) = &primed.resolver else {
            return Dnssec::Bogus {
                detail: "no validating resolver".into(),
            };
        };
        match resolver.lookup(fqdn.as_str(), rtype).await {
            Ok(lookup) => {
                let rrset: Vec<&Record> = lookup
                    .answers()
                    .iter()
                    .filter(|r| r.record_type() == rtype)
                    .collect();
                match rrset.iter().map(|r| r.proof).min() {
                    Some(Proof::Secure) => Dnssec::Secure {
                        records: rrset
                            .iter()
                            .filter_map(|r| text(&r.data))
                            .take(max)
                            .collect(),
                        chain: self
                            .chain(resolver, &owner, rtype, lookup.answers(), &zone)
                            .await,
                    },
                    Some(Proof::Insecure) if zone.is_root() => Dnssec::Insecure,
                    Some(Proof::Insecure) => Dnssec::Bogus {
                        detail: format!(
                            "{name} validates as unsigned, but the trust anchor for {zone} says \
                             it is signed"
                        ),
                    },
                    Some(Proof::Bogus) => Dnssec::Bogus {
                        detail: format!("a {rtype} record's signature does not verify"),
                    },
                    Some(Proof::Indeterminate) | None => Dnssec::Bogus {
                        detail: format!("the validator proved nothing of the {rtype} RRset"),
                    },
                }
            }
            Err(e) if is_bogus(&e) => Dnssec::Bogus {
                detail: format!(
                    "the chain from the trust anchor for {zone} does not validate: {e}"
                ),
            },
            Err(e) => Dnssec::Bogus {
                detail: format!("the {rtype} RRset could not be validated from {zone}: {e}"),
            },
        }
    }

    /// The chain ([`crate::dnssec::chain`]) proving the `rtype` RRset at
    /// `owner` from the anchored `zone`: the RRset and its RRSIGs from
    /// `answer`, then each signer's DNSKEY RRset and, below `zone`, its DS
    /// RRset, asked through the validating `resolver` (whose cache holds
    /// them from the validation). `None` when it cannot be built within
    /// the chain's limits, or does not check from the anchors.
    async fn chain(
        &self,
        resolver: &TokioResolver,
        owner: &Name,
        rtype: RecordType,
        answer: &[Record],
        zone: &Name,
    ) -> Option<Vec<u8>> {
        let mut records = rrset_and_signatures(answer, owner, rtype);
        let mut signer = signer_of(&records, rtype)?;
        let mut reached = false;
        for _ in 0..chain::MAX_CHAIN_ZONES {
            let keys = resolver
                .lookup(signer.clone(), RecordType::DNSKEY)
                .await
                .ok()?;
            records.extend(rrset_and_signatures(
                keys.answers(),
                &signer,
                RecordType::DNSKEY,
            ));
            if &signer == zone || signer.is_root() {
                reached = true;
                break;
            }
            let ds = resolver.lookup(signer.clone(), RecordType::DS).await.ok()?;
            let ds = rrset_and_signatures(ds.answers(), &signer, RecordType::DS);
            let parent = signer_of(&ds, RecordType::DS)?;
            records.extend(ds);
            signer = parent;
        }
        if !reached {
            return None;
        }
        let bytes = match chain::encode(&records) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::debug!(name = %owner, error = %e, "DNSSEC chain not carried");
                return None;
            }
        };
        match chain::verify(
            &bytes,
            &self.anchors,
            owner,
            rtype,
            crate::record::unix_now(),
        ) {
            Ok(_) => Some(bytes),
            Err(e) => {
                tracing::warn!(name = %owner, error = %e, "a Secure RRset's DNSSEC chain does not check; not carried");
                None
            }
        }
    }

    /// The primed anchors, primed again when they expired.
    async fn primed(&self) -> Arc<Primed> {
        let mut held = self.primed.lock().await;
        if let Some(primed) = held.as_ref() {
            if Instant::now() < primed.until {
                return primed.clone();
            }
        }
        let primed = Arc::new(self.prime().await);
        *held = Some(primed.clone());
        primed
    }

    async fn prime(&self) -> Primed {
        let mut trusted = TrustAnchors::empty();
        let mut zones = Vec::new();
        let mut valid_for = Duration::from_secs(u64::from(MAX_TTL));
        for zone in self.anchors.zones() {
            match self.prime_zone(&zone).await {
                Ok(primed) => {
                    for key in &primed.keys {
                        trusted.insert_with_name(key.public_key(), (&zone).into());
                    }
                    valid_for = valid_for.min(primed.valid_for);
                    self.report(&zone, None);
                    zones.push((zone, Ok(())));
                }
                Err(reason) => {
                    self.report(&zone, Some(&reason));
                    valid_for = valid_for.min(RETRY_PRIMING);
                    zones.push((zone, Err(reason)));
                }
            }
        }
        let resolver = if zones.iter().any(|(_, r)| r.is_ok()) {
            match build(&self.servers, self.timeout, Some(trusted), self.cache_size) {
                Ok(r) => Some(Arc::new(r)),
                Err(e) => {
                    for (_, r) in &mut zones {
                        *r = Err(format!("the validating resolver: {e}"));
                    }
                    None
                }
            }
        } else {
            None
        };
        Primed {
            resolver,
            zones,
            until: Instant::now() + valid_for,
        }
    }

    /// Logs how `zone`'s priming went (`failed`: why it failed) when that
    /// changed since it was last logged ([`Reporting`]).
    fn report(&self, zone: &Name, failed: Option<&str>) {
        let mut reported = self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = reported.iter().position(|(z, _)| z == zone);
        let said = before.map(|i| reported[i].1.as_str());
        match reporting(said, failed, self.anchors.is_builtin_zone(zone)) {
            Reporting::Quiet => {
                tracing::debug!(zone = %zone, reason = ?failed, "DNSSEC trust anchor priming: unchanged");
                return;
            }
            Reporting::Primed => {
                tracing::info!(zone = %zone, "DNSSEC trust anchor primed again");
            }
            Reporting::BuiltinUnprimed => tracing::info!(
                zone = %zone,
                reason = failed.unwrap_or_default(),
                "the resolvers serve no root keys signed by the root's built-in anchor: \
                 DNSSEC evidence is not earned and no chain is chased (usual with a private \
                 DNS server; retried every 30 s, said again only if it changes)"
            ),
            Reporting::Unprimed => tracing::warn!(
                zone = %zone,
                reason = failed.unwrap_or_default(),
                "DNSSEC trust anchor not primed: answers under it are bogus until it is \
                 (retried every 30 s, said again only if the reason changes)"
            ),
        }
        match (before, failed) {
            (Some(i), None) => {
                reported.remove(i);
            }
            (Some(i), Some(reason)) => reported[i].1 = reason.to_owned(),
            (None, Some(reason)) => reported.push((zone.clone(), reason.to_owned())),
            (None, None) => {}
        }
    }

    /// `zone`'s DNSKEY RRset, verified from its anchors.
    async fn prime_zone(&self, zone: &Name) -> Result<ZoneKeys, String> {
        // The keys, unvalidated: only to let hickory fetch the same RRset
        // with its RRSIGs (it sets the DO bit only when it validates, and
        // accepts the RRset when every key in it is an anchor). Nothing
        // here is trusted until the anchored key's signature verifies.
        let found = self
            .plain
            .lookup(zone.clone(), RecordType::DNSKEY)
            .await
            .map_err(|e| format!("no DNSKEY RRset at {zone}: {e}"))?;
        let mut provisional = TrustAnchors::empty();
        let mut any = false;
        for record in found.answers() {
            if let RData::DNSSEC(DNSSECRData::DNSKEY(key)) = &record.data {
                provisional.insert_with_name(key.public_key(), zone.into());
                any = true;
            }
        }
        if !any {
            return Err(format!("no DNSKEY RRset at {zone}"));
        }
        let probe =
            build(&self.servers, self.timeout, Some(provisional), 0).map_err(|e| e.to_string())?;
        let signed = probe
            .lookup(zone.clone(), RecordType::DNSKEY)
            .await
            .map_err(|e| format!("the DNSKEY RRset of {zone} with its signatures: {e}"))?;
        let records = signed.answers();
        let now = u32::try_from(crate::record::unix_now()).unwrap_or(u32::MAX);
        self.verify_rrset(zone, records, now)
    }

    /// The DNSKEY RRset at `zone` in `records`, if one of its keys is
    /// anchored and that key's RRSIG over the RRset verifies at `now`.
    fn verify_rrset(&self, zone: &Name, records: &[Record], now: u32) -> Result<ZoneKeys, String> {
        let rrset: Vec<&Record> = records
            .iter()
            .filter(|r| r.record_type() == RecordType::DNSKEY && &r.name == zone)
            .collect();
        let keys: Vec<DNSKEY> = rrset
            .iter()
            .filter_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::DNSKEY(k)) => Some(k.clone()),
                _ => None,
            })
            .collect();
        let anchored: Vec<&DNSKEY> = keys
            .iter()
            .filter(|k| self.anchors.for_zone(zone).any(|a| a.matches(k)))
            .collect();
        if anchored.is_empty() {
            let tags: Vec<String> = self
                .anchors
                .for_zone(zone)
                .filter_map(|a| a.key_tag())
                .map(|t| t.to_string())
                .collect();
            return Err(format!(
                "none of the {} DNSKEY records of {zone} is the anchored key (key tag {})",
                keys.len(),
                tags.join(", ")
            ));
        }
        let ttl = rrset.iter().map(|r| r.ttl).min().unwrap_or(0).min(MAX_TTL);
        let signatures = records.iter().filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::RRSIG(sig))
                if &r.name == zone
                    && sig.input().type_covered == RecordType::DNSKEY
                    && &sig.input().signer_name == zone =>
            {
                Some(sig)
            }
            _ => None,
        });
        for sig in signatures {
            let Some(expires_in) = expires_in(sig, now) else {
                continue;
            };
            for key in &anchored {
                if key.algorithm() != sig.input().algorithm
                    || key.calculate_key_tag().ok() != Some(sig.input().key_tag)
                {
                    continue;
                }
                if key
                    .verify_rrsig(zone, DNSClass::IN, sig, rrset.iter().copied())
                    .is_ok()
                {
                    return Ok(ZoneKeys {
                        keys,
                        valid_for: Duration::from_secs(u64::from(ttl.min(expires_in)).max(1)),
                    });
                }
            }
        }
        Err(format!(
            "the DNSKEY RRset of {zone} carries no valid signature by the anchored key"
        ))
    }
}

/// The `rtype` RRset at `owner` in `answer`, and the RRSIGs covering it.
fn rrset_and_signatures(answer: &[Record], owner: &Name, rtype: RecordType) -> Vec<Record> {
    answer
        .iter()
        .filter(|r| &r.name == owner)
        .filter(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::RRSIG(sig)) => sig.input().type_covered == rtype,
            _ => r.record_type() == rtype,
        })
        .cloned()
        .collect()
}

/// The signer of the first RRSIG covering `rtype` in `records`.
fn signer_of(records: &[Record], rtype: RecordType) -> Option<Name> {
    records.iter().find_map(|r| match &r.data {
        RData::DNSSEC(DNSSECRData::RRSIG(sig)) if sig.input().type_covered == rtype => {
            Some(sig.input().signer_name.to_lowercase())
        }
        _ => None,
    })
}

/// Whether a validating lookup failed because an answer is Bogus.
fn is_bogus(e: &hickory_resolver::net::NetError) -> bool {
    use hickory_resolver::net::{DnsError, NetError};
    match e {
        NetError::Dns(DnsError::DnssecBogus) => true,
        NetError::Dns(DnsError::Nsec { proof, .. }) => *proof == Proof::Bogus,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{reporting, Reporting};

    /// A failure is said when it starts and when its reason changes,
    /// never at each retry; the root's built-in anchor failing (a private
    /// DNS server) is information, a configured anchor's a warning; being
    /// primed again is said only after a failure was.
    #[test]
    fn a_priming_failure_is_said_once_until_it_changes() {
        assert_eq!(
            reporting(None, Some("refused"), true),
            Reporting::BuiltinUnprimed
        );
        assert_eq!(
            reporting(Some("refused"), Some("refused"), true),
            Reporting::Quiet
        );
        assert_eq!(
            reporting(Some("refused"), Some("timed out"), true),
            Reporting::BuiltinUnprimed
        );
        assert_eq!(reporting(None, Some("refused"), false), Reporting::Unprimed);
        assert_eq!(
            reporting(Some("refused"), Some("refused"), false),
            Reporting::Quiet
        );
        assert_eq!(reporting(Some("refused"), None, false), Reporting::Primed);
        assert_eq!(reporting(None, None, false), Reporting::Quiet);
    }
}
