//! Trust levels and the evidence behind them (ADP 7.2, docs/protocol.md#trust-levels).
//!
//! This module is pure code: it says what a set of evidence proves. The
//! crawler (which gathers evidence) and the record layer (which carries it
//! between nodes) both use these types.

use serde::{Deserialize, Serialize};

/// The four ADP trust levels, weakest first; the order is meaningful
/// (`KeyVerified > DnsVerified`), so policies can ask for "at least".
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum TrustLevel {
    /// Resolved or registered, nothing proven.
    Unverified,
    /// The agent's DNS record (the `_agent` TXT RRset, a DNS-AID SVCB
    /// RRset) validated Secure by our own DNSSEC validation.
    DnsVerified,
    /// Fingerprint chain and a signed challenge.
    KeyVerified,
    /// Key-verified, and two agents list each other as verified peers.
    PeerVerified,
}

impl TrustLevel {
    /// Every level, weakest first.
    pub const ALL: [Self; 4] = [
        Self::Unverified,
        Self::DnsVerified,
        Self::KeyVerified,
        Self::PeerVerified,
    ];

    /// The level's wire name (`unverified`, `dns-verified`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unverified => "unverified",
            Self::DnsVerified => "dns-verified",
            Self::KeyVerified => "key-verified",
            Self::PeerVerified => "peer-verified",
        }
    }
}

impl std::fmt::Display for TrustLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TrustLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "unverified" => Ok(Self::Unverified),
            "dns-verified" => Ok(Self::DnsVerified),
            "key-verified" => Ok(Self::KeyVerified),
            "peer-verified" => Ok(Self::PeerVerified),
            other => Err(format!(
                "unknown trust level {other:?} (expected unverified, dns-verified, key-verified or peer-verified)"
            )),
        }
    }
}

/// What was proven about an agent. Policies can ask for any combination of
/// these flags, independent of the summary [`TrustLevel`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// The DNS record the agent rests on validated Secure under DNSSEC:
    /// the `_agent` TXT RRset (ADP's record, or the AID record anchoring
    /// an A2A card's key), or a DNS-AID record's SVCB RRset.
    #[serde(default)]
    pub dnssec: bool,
    /// The agent's key is the one DNS names: ADP's `pk=` fingerprint
    /// matched the document's key, or an A2A card's signature verified
    /// with the key the domain's AID record publishes (`k`).
    #[serde(default)]
    pub fingerprint: bool,
    /// The agent signed our challenge (the proof travels with the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<ChallengeProof>,
    /// The agent and at least one peer list each other as verified.
    #[serde(default)]
    pub mutual_peer: bool,
    /// With `dnssec`: the chain of signed DNS records that proved the
    /// RRset, from a trust anchor's zone down
    /// ([`crate::dnssec::chain`]'s bytes), so anyone holding the record
    /// can check the flag offline. Absent when the crawl could not carry
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "serde_bytes")]
    pub dnssec_chain: Option<Vec<u8>>,
}

/// A transferable challenge signature: anyone can recompute the nonce from
/// these fields and the descriptor hash, and check the signature
/// (docs/protocol.md#crawl-challenge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChallengeProof {
    /// The verifier's id (its libp2p peer id, or its node key fingerprint).
    pub verifier: String,
    /// When the challenge was issued, Unix milliseconds.
    pub unix_ms: u64,
    /// The 16 random bytes mixed into the nonce.
    #[serde(with = "serde_bytes")]
    pub rand: Vec<u8>,
    /// The agent's Ed25519 signature over the handshake string.
    #[serde(with = "serde_bytes")]
    pub signature: Vec<u8>,
}

impl Evidence {
    /// The trust level this evidence proves on its own.
    pub fn level(&self) -> TrustLevel {
        let key = self.fingerprint && self.challenge.is_some();
        match (key, self.mutual_peer, self.dnssec) {
            (true, true, _) => TrustLevel::PeerVerified,
            (true, false, _) => TrustLevel::KeyVerified,
            (false, _, true) => TrustLevel::DnsVerified,
            (false, _, false) => TrustLevel::Unverified,
        }
    }
}

/// Why a verification step failed: the stable reason codes that crawl
/// reports, `verify`, `crawl --json`, `GET /crawl/{domain}` and the
/// `trust.reasons` of results carry. The strings never change; new codes
/// may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The crawler could not be set up (TLS roots, resolver).
    SetupFailed,
    /// Not a domain name.
    InvalidDomain,
    /// No `v=ADP1` TXT record at `_agent.{domain}`.
    TxtMissing,
    /// Several ADP TXT records.
    TxtMultiple,
    /// A TXT `v` other than `ADP1`.
    TxtUnsupportedVersion,
    /// A TXT record without `pk`/`wk`, or malformed.
    TxtMalformed,
    /// The name does not exist.
    DnsNxdomain,
    /// The name has no records of the type asked.
    DnsNoRecords,
    /// A DNS lookup failed (timeout, SERVFAIL, ...).
    DnsFailure,
    /// Every address is refused by the address policy.
    AddressNotAllowed,
    /// A URL that is not https or wss.
    InsecureUrl,
    /// A URL that does not parse.
    BadUrl,
    /// The TLS handshake failed.
    TlsFailure,
    /// The TCP connection failed.
    ConnectFailed,
    /// A step ran out of time.
    Timeout,
    /// An HTTP status other than 200.
    HttpStatus,
    /// Too many redirects.
    RedirectLimit,
    /// A redirect to another host.
    RedirectOtherHost,
    /// Not `application/json` or `application/adp+json`.
    WrongContentType,
    /// `agent.json` over the size limit.
    DocumentTooLarge,
    /// `agent.json` is not JSON.
    InvalidJson,
    /// `agent.json` nests too deep.
    JsonTooDeep,
    /// `agent.json` has too many values.
    JsonTooLarge,
    /// A protocol other than `ADP/1.x`.
    ProtocolUnsupported,
    /// `agent.json` does not match the ADP schema.
    SchemaInvalid,
    /// The document speaks for another domain.
    DomainMismatch,
    /// The DNS `pk` is not the document's fingerprint.
    FingerprintMismatch,
    /// `publicKey.full` does not hash to the fingerprint.
    KeyMismatch,
    /// No wss chat endpoint to challenge.
    ChallengeUnavailable,
    /// The agent did not answer the challenge.
    ChallengeNoAnswer,
    /// The challenge answer's signature does not verify.
    ChallengeBadSignature,
    /// The challenge answer is for another nonce.
    ChallengeWrongNonce,
    /// The challenge failed otherwise.
    ChallengeFailed,
    /// Signing or storing the record failed.
    StoreFailed,
    /// The `_agent` TXT RRset is signed and fails DNSSEC validation.
    DnssecBogus,
    /// The agent's key changed from the held one without a rotation
    /// statement signed by it (`proto/key-rotation.cddl`).
    KeyChangedUnproven,
    /// An A2A Agent Card that is not a card: not an object of the card's shape, or a required member missing or of the wrong type.
    CardInvalid,
    /// An A2A card signature (JWS) that does not verify with the key it names.
    CardSignatureBad,
    /// An A2A card signature that could not be checked: its key set is not on the card's host over HTTPS, cannot be fetched, or uses an algorithm agentmesh does not verify.
    CardSignatureUnchecked,
    /// An ARD `ai-catalog.json` that is not a catalog (shape, `specVersion`, entry count).
    CatalogInvalid,
    /// An ARD catalog entry that is not valid (identifier syntax, missing members, a publisher other than the catalog's domain).
    CatalogEntryInvalid,
    /// An AID `_agent` TXT record (`v=aid1`) without a usable `uri` or `proto`, or with a key given twice.
    AidMalformed,
    /// An AID TXT record of a version agentmesh does not read.
    AidUnsupportedVersion,
    /// A DNS-AID SVCB record that names no usable endpoint.
    DnsAidMalformed,
    /// An MCP Registry `server.json` that is not valid (name, description, version, remotes), or an MCP server card (a DNS-AID target's) without `serverInfo.name`.
    McpServerInvalid,
    /// The publisher answered 429, or 503 with `Retry-After`: it asked
    /// the crawler to come back later.
    HttpThrottled,
    /// Not asked: the host's earlier `Retry-After` has not run out.
    HostBackoff,
    /// The document carries a key its holder revoked (a `Revoked`
    /// tombstone signed by it): final for that key.
    KeyRevoked,
    /// A URL (the TXT `wk`, an SRV target, a redirect, `endpoints.chat`)
    /// names a port other than 443 and `crawl.allowed_ports`.
    PortNotAllowed,
    /// A DNS-AID capability document whose SHA-256 is not the record's
    /// `cap-sha256`.
    CapDigestMismatch,
    /// A DNS-AID capability document that is not one (not an object, or
    /// `capabilities` not a list of strings).
    CapInvalid,
    /// An ARD trust manifest's signature (a detached JWS) that does not
    /// verify with the key it names: the entry is refused.
    TrustManifestSignatureBad,
    /// An ARD trust manifest's signature that could not be checked: its
    /// key is not on the publisher's domain over HTTPS, cannot be fetched,
    /// or uses an algorithm agentmesh does not verify.
    TrustManifestSignatureUnchecked,
}

impl Reason {
    /// Every reason, in the order above.
    pub const ALL: [Reason; 53] = [
        Self::SetupFailed,
        Self::InvalidDomain,
        Self::TxtMissing,
        Self::TxtMultiple,
        Self::TxtUnsupportedVersion,
        Self::TxtMalformed,
        Self::DnsNxdomain,
        Self::DnsNoRecords,
        Self::DnsFailure,
        Self::AddressNotAllowed,
        Self::InsecureUrl,
        Self::BadUrl,
        Self::TlsFailure,
        Self::ConnectFailed,
        Self::Timeout,
        Self::HttpStatus,
        Self::RedirectLimit,
        Self::RedirectOtherHost,
        Self::WrongContentType,
        Self::DocumentTooLarge,
        Self::InvalidJson,
        Self::JsonTooDeep,
        Self::JsonTooLarge,
        Self::ProtocolUnsupported,
        Self::SchemaInvalid,
        Self::DomainMismatch,
        Self::FingerprintMismatch,
        Self::KeyMismatch,
        Self::ChallengeUnavailable,
        Self::ChallengeNoAnswer,
        Self::ChallengeBadSignature,
        Self::ChallengeWrongNonce,
        Self::ChallengeFailed,
        Self::StoreFailed,
        Self::DnssecBogus,
        Self::KeyChangedUnproven,
        Self::CardInvalid,
        Self::CardSignatureBad,
        Self::CardSignatureUnchecked,
        Self::CatalogInvalid,
        Self::CatalogEntryInvalid,
        Self::AidMalformed,
        Self::AidUnsupportedVersion,
        Self::DnsAidMalformed,
        Self::McpServerInvalid,
        Self::HttpThrottled,
        Self::HostBackoff,
        Self::KeyRevoked,
        Self::PortNotAllowed,
        Self::CapDigestMismatch,
        Self::CapInvalid,
        Self::TrustManifestSignatureBad,
        Self::TrustManifestSignatureUnchecked,
    ];

    /// The reason's wire code (`txt_missing`, `timeout`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SetupFailed => "setup_failed",
            Self::InvalidDomain => "invalid_domain",
            Self::TxtMissing => "txt_missing",
            Self::TxtMultiple => "txt_multiple",
            Self::TxtUnsupportedVersion => "txt_unsupported_version",
            Self::TxtMalformed => "txt_malformed",
            Self::DnsNxdomain => "dns_nxdomain",
            Self::DnsNoRecords => "dns_no_records",
            Self::DnsFailure => "dns_failure",
            Self::AddressNotAllowed => "address_not_allowed",
            Self::InsecureUrl => "insecure_url",
            Self::BadUrl => "bad_url",
            Self::TlsFailure => "tls_failure",
            Self::ConnectFailed => "connect_failed",
            Self::Timeout => "timeout",
            Self::HttpStatus => "http_status",
            Self::RedirectLimit => "redirect_limit",
            Self::RedirectOtherHost => "redirect_other_host",
            Self::WrongContentType => "wrong_content_type",
            Self::DocumentTooLarge => "document_too_large",
            Self::InvalidJson => "invalid_json",
            Self::JsonTooDeep => "json_too_deep",
            Self::JsonTooLarge => "json_too_large",
            Self::ProtocolUnsupported => "protocol_unsupported",
            Self::SchemaInvalid => "schema_invalid",
            Self::DomainMismatch => "domain_mismatch",
            Self::FingerprintMismatch => "fingerprint_mismatch",
            Self::KeyMismatch => "key_mismatch",
            Self::ChallengeUnavailable => "challenge_unavailable",
            Self::ChallengeNoAnswer => "challenge_no_answer",
            Self::ChallengeBadSignature => "challenge_bad_signature",
            Self::ChallengeWrongNonce => "challenge_wrong_nonce",
            Self::ChallengeFailed => "challenge_failed",
            Self::StoreFailed => "store_failed",
            Self::DnssecBogus => "dnssec_bogus",
            Self::KeyChangedUnproven => "key_changed_unproven",
            Self::CardInvalid => "card_invalid",
            Self::CardSignatureBad => "card_signature_bad",
            Self::CardSignatureUnchecked => "card_signature_unchecked",
            Self::CatalogInvalid => "catalog_invalid",
            Self::CatalogEntryInvalid => "catalog_entry_invalid",
            Self::AidMalformed => "aid_malformed",
            Self::AidUnsupportedVersion => "aid_unsupported_version",
            Self::DnsAidMalformed => "dns_aid_malformed",
            Self::McpServerInvalid => "mcp_server_invalid",
            Self::HttpThrottled => "http_throttled",
            Self::HostBackoff => "host_backoff",
            Self::KeyRevoked => "key_revoked",
            Self::PortNotAllowed => "port_not_allowed",
            Self::CapDigestMismatch => "cap_digest_mismatch",
            Self::CapInvalid => "cap_invalid",
            Self::TrustManifestSignatureBad => "trust_manifest_signature_bad",
            Self::TrustManifestSignatureUnchecked => "trust_manifest_signature_unchecked",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Reason {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown reason code {s:?}"))
    }
}

impl utoipa::PartialSchema for Reason {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "A reason code: why a step of a crawl or a check did not verify",
            ))
            .enum_values(Some(Self::ALL.iter().map(|r| r.as_str())))
            .into()
    }
}

impl utoipa::ToSchema for Reason {}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The evidence flags as results and reports show them: which proofs an
/// agent's trust level rests on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EvidenceFlags {
    /// The DNS record the agent rests on validated under DNSSEC (the
    /// `_agent` TXT RRset, or a DNS-AID SVCB RRset).
    pub dnssec: bool,
    /// Its key is the one DNS names (ADP's fingerprint chain, or an A2A
    /// card key the domain's AID record publishes).
    pub fingerprint: bool,
    /// Challenge signed by the agent key.
    pub challenge: bool,
    /// Mutual verified peers.
    pub mutual_peer: bool,
}

impl From<&Evidence> for EvidenceFlags {
    fn from(e: &Evidence) -> Self {
        Self {
            dnssec: e.dnssec,
            fingerprint: e.fingerprint,
            challenge: e.challenge.is_some(),
            mutual_peer: e.mutual_peer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof() -> ChallengeProof {
        ChallengeProof {
            verifier: "node".into(),
            unix_ms: 1,
            rand: vec![0; 16],
            signature: vec![0; 64],
        }
    }

    #[test]
    fn reason_codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for r in Reason::ALL {
            assert!(seen.insert(r.as_str()), "{r} twice");
            assert_eq!(r.as_str().parse::<Reason>().unwrap(), r);
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{r}\""));
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), r);
        }
        assert!("no_such_reason".parse::<Reason>().is_err());
    }

    #[test]
    fn levels_follow_the_evidence() {
        let mut e = Evidence::default();
        assert_eq!(e.level(), TrustLevel::Unverified);
        e.dnssec = true;
        assert_eq!(e.level(), TrustLevel::DnsVerified);
        e.fingerprint = true;
        assert_eq!(e.level(), TrustLevel::DnsVerified, "no challenge yet");
        e.challenge = Some(proof());
        assert_eq!(e.level(), TrustLevel::KeyVerified);
        e.mutual_peer = true;
        assert_eq!(e.level(), TrustLevel::PeerVerified);
        e.fingerprint = false;
        assert_eq!(
            e.level(),
            TrustLevel::DnsVerified,
            "mutual peers need a key"
        );
    }

    #[test]
    fn level_names_round_trip_and_order() {
        for level in [
            TrustLevel::Unverified,
            TrustLevel::DnsVerified,
            TrustLevel::KeyVerified,
            TrustLevel::PeerVerified,
        ] {
            assert_eq!(level.as_str().parse::<TrustLevel>().unwrap(), level);
            assert_eq!(
                serde_json::to_value(level).unwrap(),
                serde_json::json!(level.as_str())
            );
        }
        assert!(TrustLevel::KeyVerified > TrustLevel::DnsVerified);
        assert!("trusted".parse::<TrustLevel>().is_err());
    }
}
