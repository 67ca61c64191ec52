//! Check 7's `dnssec` (docs/answers.md#the-checks): the DNSSEC chain a
//! record carries proves, from a trust anchor the checker holds, the
//! RRset its agent rests on, at the time the record was issued; for an
//! ADP record the proved TXT record names the document's key.

use hickory_proto::rr::{Name, RecordType};

use crate::descriptor::DocumentFormat;
use crate::dnssec::chain;
use crate::dnssec::TrustAnchorSet;
use crate::trust::Evidence;

/// The RRset a record of `format` for `agent_id` rests on: `_agent`'s TXT
/// for ADP and A2A (the AID record), the SVCB record the id names for
/// DNS-AID; `None` for a format DNSSEC never proves.
pub(super) fn proved_rrset(format: DocumentFormat, agent_id: &str) -> Option<(Name, RecordType)> {
    let (owner, rtype) = match format {
        DocumentFormat::Adp => (
            format!(
                "_agent.{}",
                agent_id.strip_prefix(crate::identity::AGENT_ID_PREFIX)?
            ),
            RecordType::TXT,
        ),
        DocumentFormat::A2a => (
            format!("_agent.{}", agent_id.strip_prefix("a2a:")?),
            RecordType::TXT,
        ),
        DocumentFormat::DnsAid => (
            agent_id.strip_prefix("dns-aid:")?.to_owned(),
            RecordType::SVCB,
        ),
        _ => return None,
    };
    let owner = Name::from_ascii(format!("{}.", owner.trim_end_matches('.'))).ok()?;
    Some((owner.to_lowercase(), rtype))
}

/// Whether `e`'s `dnssec` flag holds offline: `Ok(None)` proved from
/// `anchors`; `Ok(Some(note))` not checkable here (no chain carried, or
/// one that holds together from a key the checker was not given);
/// `Err(why)` a chain that proves nothing, or proves another key.
pub(super) fn check_chain(
    e: &Evidence,
    format: DocumentFormat,
    agent_id: &str,
    document: &str,
    issued_at: u64,
    anchors: &TrustAnchorSet,
) -> Result<Option<String>, String> {
    if !e.dnssec {
        return if e.dnssec_chain.is_some() {
            Err("a DNSSEC chain without the dnssec flag".into())
        } else {
            Ok(None)
        };
    }
    let Some(bytes) = &e.dnssec_chain else {
        return Ok(Some(
            "the dnssec flag is the attesting node's word: the record carries no DNSSEC chain"
                .into(),
        ));
    };
    let (proved, note) = prove(bytes, format, agent_id, issued_at, anchors)?;
    if note.is_some() {
        return Ok(note);
    }
    if format == DocumentFormat::Adp && e.fingerprint {
        names_the_documents_key(&proved, agent_id, document)?;
    }
    Ok(None)
}

/// What a node asks of a record's chain before it stores a peer's
/// record (the judge): a chain only beside the `dnssec` flag, one that
/// holds together (from `anchors`, else from its own top key), and for an
/// ADP record with the `fingerprint` flag a proved TXT record naming the
/// document's key, whichever key the chain starts from. A record without
/// a chain stands as before: its flags are the attesting node's word.
///
/// # Errors
/// Why the chain is false, as [`check_chain`] words it.
pub(crate) fn chain_stands(
    e: &Evidence,
    format: DocumentFormat,
    agent_id: &str,
    document: &str,
    issued_at: u64,
    anchors: &TrustAnchorSet,
) -> Result<(), String> {
    let Some(bytes) = &e.dnssec_chain else {
        return Ok(());
    };
    if !e.dnssec {
        return Err("a DNSSEC chain without the dnssec flag".into());
    }
    let (proved, _) = prove(bytes, format, agent_id, issued_at, anchors)?;
    if format == DocumentFormat::Adp && e.fingerprint {
        names_the_documents_key(&proved, agent_id, document)?;
    }
    Ok(())
}

/// The RRset `bytes` proves for the record, from `anchors` (no note) or
/// else from the chain's own top key (the note says whose).
fn prove(
    bytes: &[u8],
    format: DocumentFormat,
    agent_id: &str,
    issued_at: u64,
    anchors: &TrustAnchorSet,
) -> Result<(chain::Proved, Option<String>), String> {
    let Some((owner, rtype)) = proved_rrset(format, agent_id) else {
        return Err(format!("no DNS name to prove for {agent_id}"));
    };
    match chain::verify(bytes, anchors, &owner, rtype, issued_at) {
        Ok(proved) => Ok((proved, None)),
        Err(e) => match chain::verify_self_anchored(bytes, &owner, rtype, issued_at) {
            Ok(proved) => {
                let note = format!(
                    "the DNSSEC chain holds together from the key of {}, which is not among the \
                     trust anchors given (--dnssec-anchor)",
                    proved.anchor_zone
                );
                Ok((proved, Some(note)))
            }
            Err(_) => Err(format!("the dnssec flag: {e}")),
        },
    }
}

/// An ADP record's `fingerprint` flag against the proved TXT RRset: its
/// `v=ADP1` record's `pk` is the document's key fingerprint.
fn names_the_documents_key(
    proved: &chain::Proved,
    agent_id: &str,
    document: &str,
) -> Result<(), String> {
    let domain = agent_id
        .strip_prefix(crate::identity::AGENT_ID_PREFIX)
        .unwrap_or(agent_id);
    let txt = crate::adp::txt::parse(domain, &proved.txt())
        .map_err(|e| format!("the DNSSEC-proved TXT RRset holds no ADP record: {e}"))?;
    let doc: serde_json::Value =
        serde_json::from_str(document).map_err(|e| format!("the ADP document is not JSON: {e}"))?;
    let fingerprint = doc
        .pointer("/identity/publicKey/fingerprint")
        .and_then(serde_json::Value::as_str)
        .ok_or("the ADP document has no identity.publicKey.fingerprint")?;
    if txt.fingerprint.eq_ignore_ascii_case(fingerprint) {
        Ok(())
    } else {
        Err(format!(
            "the DNSSEC-proved TXT record names key {}, the document {fingerprint}",
            txt.fingerprint
        ))
    }
}
