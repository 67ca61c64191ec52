//! DNSSEC for the testbed's zone, signed in process: a [`ZoneKey`]
//! (ECDSA P-256, hickory-proto's signer) publishes its DNSKEY at the
//! `test.` apex and signs every RRset of a [`Zone`]; the
//! [`super::dns::DnsServer`] answers the signatures with the records to
//! queries that set the DO bit.
//!
//! One key, flagged zone key and secure entry point (257), signs the
//! whole zone, so `test.` is its own trust anchor
//! ([`ZoneKey::trust_anchor`], in zone-file syntax as `--trust-anchor`
//! reads it): hickory's validator trusts a DNSKEY RRset whose keys are all
//! anchors for its name without asking for a DS. Negative answers carry
//! no NSEC records, so only names that exist validate; the crawler asks
//! the validator for the `_agent` TXT RRset alone.
//!
//! A record changed after [`ZoneKey::sign`] keeps the signature made over
//! the old data ([`Zone::remove`], then an `add`): Bogus to a validator.

use hickory_proto::dnssec::crypto::EcdsaSigningKey;
use hickory_proto::dnssec::rdata::{DNSSECRData, SigInput, DNSKEY, RRSIG};
use hickory_proto::dnssec::{Algorithm, DnssecSigner, SigningKey, TBS};
use hickory_proto::rr::{DNSClass, Name, RData, Record, SerialNumber};

use super::dns::{Zone, TTL};
use super::TestbedError;

/// How long before signing a signature is valid from (clock skew).
const INCEPTION_BEFORE: u32 = 3600;
/// How long a signature is valid for.
const VALIDITY: u32 = 30 * 86_400;

/// A zone's signing key.
pub struct ZoneKey {
    signer: DnssecSigner,
    apex: Name,
}

impl std::fmt::Debug for ZoneKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneKey")
            .field("apex", &self.apex)
            .field("dnskey", &self.signer.dnskey().to_string())
            .finish_non_exhaustive()
    }
}

fn failed(apex: &Name, reason: impl std::fmt::Display) -> TestbedError {
    TestbedError::Dns {
        name: apex.to_ascii(),
        reason: format!("DNSSEC: {reason}"),
    }
}

impl ZoneKey {
    /// A new ECDSA P-256 key for the `test.` zone ([`Zone::new`]'s apex).
    ///
    /// # Errors
    /// [`TestbedError::Dns`] when the key cannot be made.
    pub fn generate() -> Result<Self, TestbedError> {
        let apex = Name::from_ascii("test.").expect("`test.` is a valid name");
        let algorithm = Algorithm::ECDSAP256SHA256;
        let pkcs8 = EcdsaSigningKey::generate_pkcs8(algorithm).map_err(|e| failed(&apex, e))?;
        let key = EcdsaSigningKey::from_pkcs8(&pkcs8, algorithm).map_err(|e| failed(&apex, e))?;
        let public = key.to_public_key().map_err(|e| failed(&apex, e))?;
        // Zone key and secure entry point: a key-signing key that also
        // signs the zone's records.
        let dnskey = DNSKEY::new(true, true, false, public);
        let signer = DnssecSigner::new(
            dnskey,
            Box::new(key),
            apex.clone(),
            std::time::Duration::from_secs(u64::from(VALIDITY)),
        );
        Ok(Self { signer, apex })
    }

    /// The key's DNSKEY record data.
    pub fn dnskey(&self) -> &DNSKEY {
        self.signer.dnskey()
    }

    /// The key as a trust anchor: its DNSKEY record in zone-file syntax
    /// (`test. 300 IN DNSKEY 257 3 13 <base64>`), the form
    /// `--trust-anchor` files hold.
    pub fn trust_anchor(&self) -> String {
        format!(
            "{} {TTL} IN DNSKEY {}\n",
            self.apex.to_ascii(),
            self.dnskey()
        )
    }

    /// Publishes the key's DNSKEY at the apex and signs every RRset of
    /// `zone` (valid from an hour ago for 30 days), replacing the
    /// signatures it held.
    ///
    /// # Errors
    /// [`TestbedError::Dns`] when an RRset cannot be signed.
    pub fn sign(&self, zone: &mut Zone) -> Result<(), TestbedError> {
        zone.add(
            &self.apex.to_ascii(),
            RData::DNSSEC(DNSSECRData::DNSKEY(self.dnskey().clone())),
        )?;
        let now = u32::try_from(crate::record::unix_now()).unwrap_or(u32::MAX);
        let key_tag = self
            .signer
            .calculate_key_tag()
            .map_err(|e| failed(&self.apex, e))?;
        let mut signatures = Vec::new();
        for ((_, rtype), records) in zone.rrsets() {
            let Some(first) = records.first() else {
                continue;
            };
            let input = SigInput {
                type_covered: *rtype,
                algorithm: self.signer.key().algorithm(),
                num_labels: first.name.num_labels(),
                original_ttl: first.ttl,
                sig_expiration: SerialNumber::new(now.saturating_add(VALIDITY)),
                sig_inception: SerialNumber::new(now.saturating_sub(INCEPTION_BEFORE)),
                key_tag,
                signer_name: self.apex.clone(),
            };
            let tbs = TBS::from_input(&first.name, DNSClass::IN, &input, records.iter())
                .map_err(|e| failed(&first.name, e))?;
            let sig = self.signer.sign(&tbs).map_err(|e| failed(&first.name, e))?;
            let rrsig = RRSIG::from_sig(input, sig);
            signatures.push(Record::from_rdata(
                first.name.clone(),
                first.ttl,
                RData::DNSSEC(DNSSECRData::RRSIG(rrsig)),
            ));
        }
        zone.set_signatures(signatures);
        Ok(())
    }
}
