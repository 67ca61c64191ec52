//! Trust levels and the evidence behind them (ADP 7.2, DESIGN.md 4.6).
//!
//! This module is pure code: it says what a set of evidence proves. The
//! crawler (which gathers evidence) and the record layer (which carries it
//! between nodes) both use these types.

use serde::{Deserialize, Serialize};

/// The four ADP trust levels, weakest first; the order is meaningful
/// (`KeyVerified > DnsVerified`), so policies can ask for "at least".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrustLevel {
    /// Resolved or registered, nothing proven.
    Unverified,
    /// The TXT RRset validated Secure by our own DNSSEC validation.
    DnsVerified,
    /// Fingerprint chain and a signed challenge.
    KeyVerified,
    /// Key-verified, and two agents list each other as verified peers.
    PeerVerified,
}

impl TrustLevel {
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
    /// The `_agent` TXT RRset validated Secure under DNSSEC.
    #[serde(default)]
    pub dnssec: bool,
    /// The DNS `pk=` fingerprint matched the document's key.
    #[serde(default)]
    pub fingerprint: bool,
    /// The agent signed our challenge (the proof travels with the record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<ChallengeProof>,
    /// The agent and at least one peer list each other as verified.
    #[serde(default)]
    pub mutual_peer: bool,
}

/// A transferable challenge signature: anyone can recompute the nonce from
/// these fields and the descriptor hash, and check the signature
/// (DESIGN.md 4.5).
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
