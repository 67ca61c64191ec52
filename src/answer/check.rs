//! The offline check of a signed answer (docs/answers.md#the-checks):
//! every failure found, each named by its code, none stopping the rest.

use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64U};
use base64::Engine as _;
use ed25519_dalek::{Signature, VerifyingKey};
use serde::Serialize;

use super::{answer_agents, Envelope, Payload, RequestInfo, MAX_ANSWER_BYTES, MAX_RESULTS};
use super::{SIGNING_PREFIX, VERSION};
use crate::adp::check::has_fingerprint;
use crate::adp::handshake;
use crate::descriptor::DocumentFormat;
use crate::dnssec::TrustAnchorSet;
use crate::record::{RecordBody, SignedRecord};
use crate::tlog::{self, Checkpoint};
use crate::trust::{Evidence, TrustLevel};

/// What the checker is told besides the answer.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The node keys the client trusts: when any, the answer's signer
    /// must be one of them.
    pub trusted_nodes: Vec<VerifyingKey>,
    /// A checkpoint of the same node seen before: the answer's must not
    /// be smaller.
    pub old_checkpoint: Option<Vec<u8>>,
    /// The request the client sent: the answer's must be it.
    pub request: Option<RequestInfo>,
    /// The DNSSEC trust anchors records' chains are checked from; `None`:
    /// the root's built-in anchor.
    pub dnssec_anchors: Option<TrustAnchorSet>,
}

/// One thing that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The check's code (docs/answers.md#the-checks).
    pub code: &'static str,
    /// The result it concerns, by index.
    pub result: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// The outcome: every failure, and each result's recomputed level.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// No failure.
    pub ok: bool,
    /// Every failure found.
    pub failures: Vec<Failure>,
    /// Each result's id and the trust level its evidence proves here.
    pub results: Vec<CheckedResult>,
    /// What holds but could not be checked offline (code `unchecked`).
    pub notes: Vec<Failure>,
    /// The checkpoint's size, when it opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_size: Option<u64>,
}

/// A result as checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckedResult {
    /// The agent's id.
    pub id: String,
    /// The level that counts: its evidence's, when the record's signer is
    /// the node or a signer it trusts; else `unverified`.
    pub level: TrustLevel,
}

struct Checker {
    failures: Vec<Failure>,
    notes: Vec<Failure>,
}

impl Checker {
    fn fail(&mut self, code: &'static str, result: Option<usize>, message: impl Into<String>) {
        self.failures.push(Failure {
            code,
            result,
            message: message.into(),
        });
    }
}

/// Checks the signed answer `bytes` (docs/answers.md).
pub fn check(bytes: &[u8], options: &CheckOptions) -> Report {
    let mut c = Checker {
        failures: Vec::new(),
        notes: Vec::new(),
    };
    let mut report = Report::default();
    if let Some((signer, payload)) = open(&mut c, bytes, options) {
        check_payload(&mut c, &mut report, &signer, &payload, options);
    }
    report.ok = c.failures.is_empty();
    report.failures = c.failures;
    report.notes = c.notes;
    report
}

/// Checks 1 to 3: the envelope's shape, its signature, its signer.
fn open(c: &mut Checker, bytes: &[u8], options: &CheckOptions) -> Option<(VerifyingKey, Payload)> {
    if bytes.len() > MAX_ANSWER_BYTES {
        c.fail("envelope", None, format!("over {MAX_ANSWER_BYTES} bytes"));
        return None;
    }
    let envelope: Envelope = match serde_json::from_slice(bytes) {
        Ok(e) => e,
        Err(e) => {
            c.fail("envelope", None, format!("not an answer envelope: {e}"));
            return None;
        }
    };
    if envelope.agentmesh_answer != VERSION {
        c.fail(
            "envelope",
            None,
            format!(
                "version {} (this checker reads {VERSION})",
                envelope.agentmesh_answer
            ),
        );
        return None;
    }
    let decoded = (
        B64U.decode(&envelope.payload),
        B64U.decode(&envelope.signer)
            .ok()
            .and_then(|k| <[u8; 32]>::try_from(k).ok()),
        B64U.decode(&envelope.signature)
            .ok()
            .and_then(|s| <[u8; 64]>::try_from(s).ok()),
    );
    let (Ok(payload), Some(signer), Some(signature)) = decoded else {
        c.fail(
            "envelope",
            None,
            "payload, signer or signature does not decode",
        );
        return None;
    };
    let Ok(signer) = VerifyingKey::from_bytes(&signer) else {
        c.fail("envelope", None, "the signer is not an Ed25519 key");
        return None;
    };
    let mut signed = SIGNING_PREFIX.to_vec();
    signed.extend_from_slice(&payload);
    if signer
        .verify_strict(&signed, &Signature::from_bytes(&signature))
        .is_err()
    {
        // Nothing unsigned is read further.
        c.fail("signature", None, "the node's signature does not verify");
        return None;
    }
    if !options.trusted_nodes.is_empty() && !options.trusted_nodes.contains(&signer) {
        c.fail(
            "untrusted_node",
            None,
            format!(
                "signed by {}, not a node trusted here",
                crate::identity::peer_id_of_public(&signer)
            ),
        );
    }
    match serde_json::from_slice::<Payload>(&payload) {
        Ok(p) => Some((signer, p)),
        Err(e) => {
            c.fail(
                "envelope",
                None,
                format!("the payload is not an answer: {e}"),
            );
            None
        }
    }
}

/// Checks 3 to 7 on a payload that parsed.
fn check_payload(
    c: &mut Checker,
    report: &mut Report,
    signer: &VerifyingKey,
    p: &Payload,
    options: &CheckOptions,
) {
    if p.node.peer_id != crate::identity::peer_id_of_public(signer) {
        c.fail("envelope", None, "node.peer_id is not the signer's peer id");
    }
    if p.results.len() > MAX_RESULTS {
        c.fail("envelope", None, format!("over {MAX_RESULTS} results"));
        return;
    }
    if p.request_hash != p.request.hash() {
        c.fail("request", None, "request_hash is not the hash of request");
    }
    if let Some(sent) = &options.request {
        if *sent != p.request {
            c.fail(
                "request",
                None,
                "the answer is for another request than the one sent",
            );
        }
    }
    let head = open_checkpoint(c, signer, p, options);
    report.log_size = head.as_ref().map(|h| h.size);
    let shown = answer_agents(&p.answer, &p.request.target);
    let ids: Vec<&str> = p.results.iter().map(|r| r.id.as_str()).collect();
    if shown
        .iter()
        .map(|(id, _)| id.as_str())
        .ne(ids.iter().copied())
    {
        c.fail(
            "results",
            None,
            format!(
                "the answer's agents ({}) are not the results' ({})",
                shown.len(),
                ids.len()
            ),
        );
    }
    let trusted: Vec<[u8; 32]> = p
        .trusted_signers
        .iter()
        .filter_map(|k| B64U.decode(k).ok()?.try_into().ok())
        .collect();
    let anchors = options
        .dnssec_anchors
        .clone()
        .unwrap_or_else(TrustAnchorSet::builtin_root);
    for (i, result) in p.results.iter().enumerate() {
        let level = check_result(c, i, result, signer, &trusted, head.as_ref(), &anchors);
        if let Some(level) = level {
            let shown_level = shown
                .iter()
                .find(|(id, _)| *id == result.id)
                .and_then(|(_, l)| l.as_deref());
            if let Some(shown_level) = shown_level {
                if shown_level != level.as_str() {
                    c.fail(
                        "trust_level",
                        Some(i),
                        format!("shown as {shown_level}, its evidence proves {level} here"),
                    );
                }
            }
            report.results.push(CheckedResult {
                id: result.id.clone(),
                level,
            });
        }
    }
}

/// Check 5: the checkpoint, by the signer under the log's origin, and
/// not older than one seen before.
fn open_checkpoint(
    c: &mut Checker,
    signer: &VerifyingKey,
    p: &Payload,
    options: &CheckOptions,
) -> Option<Checkpoint> {
    let vkey = tlog::note::verifier_key(&p.node.log_origin, signer);
    let head = match Checkpoint::open(p.checkpoint.as_bytes(), &vkey, Some(&p.node.log_origin)) {
        Ok(h) => h,
        Err(e) => {
            c.fail("checkpoint", None, e.to_string());
            return None;
        }
    };
    if let Some(old) = &options.old_checkpoint {
        match Checkpoint::open(old, &vkey, Some(&p.node.log_origin)) {
            Ok(old) if old.size > head.size => c.fail(
                "stale",
                None,
                format!(
                    "the log is at {}, an older checkpoint at {}",
                    head.size, old.size
                ),
            ),
            Ok(old) if old.size == head.size && old.root != head.root => c.fail(
                "stale",
                None,
                format!(
                    "two checkpoints of {} entries with different roots: the log forked",
                    old.size
                ),
            ),
            Ok(_) => {}
            Err(e) => c.fail(
                "stale",
                None,
                format!("the older checkpoint does not open: {e}"),
            ),
        }
    }
    Some(head)
}

/// Check 7 on one result; the level that counts, when its record reads.
fn check_result(
    c: &mut Checker,
    i: usize,
    result: &super::ResultProof,
    node: &VerifyingKey,
    trusted: &[[u8; 32]],
    head: Option<&Checkpoint>,
    anchors: &TrustAnchorSet,
) -> Option<TrustLevel> {
    let bytes = match B64.decode(&result.record) {
        Ok(b) => b,
        Err(_) => {
            c.fail("record", Some(i), "the record is not base64");
            return None;
        }
    };
    let record = match SignedRecord::decode(&bytes) {
        Ok(r) => r,
        Err(e) => {
            c.fail("record", Some(i), format!("the record does not check: {e}"));
            // A proof carried is checked all the same.
            check_inclusion(c, i, result, &bytes, false, head);
            return None;
        }
    };
    let own = record.signer() == node;
    check_inclusion(c, i, result, &bytes, own, head);
    let d = match record.body() {
        Ok(RecordBody::Descriptor(d)) => d,
        Ok(_) => {
            c.fail("record", Some(i), "the record is not a descriptor");
            return None;
        }
        Err(e) => {
            c.fail("record", Some(i), format!("the record does not check: {e}"));
            return None;
        }
    };
    if d.agent_id != result.id {
        // Another agent's record says nothing of this one's trust.
        c.fail(
            "record",
            Some(i),
            format!("the record is {}'s, not {}'s", d.agent_id, result.id),
        );
        return None;
    }
    let holds = evidence_holds(
        &d.evidence,
        d.descriptor.format,
        &d.doc_sha256,
        &d.document,
        &d.agent_id,
    )
    .and_then(|challenge| {
        let dnssec = super::dnssec::check_chain(
            &d.evidence,
            d.descriptor.format,
            &d.agent_id,
            &d.document,
            d.issued_at,
            anchors,
        )?;
        Ok(match (challenge, dnssec) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        })
    });
    let counted = own || trusted.contains(record.signer().as_bytes());
    match holds {
        // Evidence that does not hold proves nothing.
        Err(why) => {
            c.fail("evidence", Some(i), why);
            Some(TrustLevel::Unverified)
        }
        Ok(note) => {
            if let Some(note) = note.filter(|_| counted) {
                c.notes.push(Failure {
                    code: "unchecked",
                    result: Some(i),
                    message: note,
                });
            }
            Some(if counted {
                d.evidence.level()
            } else {
                TrustLevel::Unverified
            })
        }
    }
}

/// Check 7's `inclusion`: a record of the node's in its log at the
/// checkpoint (as its bytes, or sealed); any proof carried verifies.
fn check_inclusion(
    c: &mut Checker,
    i: usize,
    result: &super::ResultProof,
    bytes: &[u8],
    own: bool,
    head: Option<&Checkpoint>,
) {
    let (Some(index), Some(path)) = (result.log_index, result.inclusion.as_ref()) else {
        if own {
            c.fail(
                "inclusion",
                Some(i),
                "the node's own record carries no inclusion proof",
            );
        }
        return;
    };
    // Without a checkpoint (its failure is named) there is nothing to
    // check a proof against.
    let Some(head) = head else {
        return;
    };
    let Ok(path) = path
        .iter()
        .map(|h| tlog::decode_hash(h))
        .collect::<Result<Vec<_>, _>>()
    else {
        c.fail("inclusion", Some(i), "the proof's hashes do not decode");
        return;
    };
    if index >= head.size {
        c.fail(
            "inclusion",
            Some(i),
            format!(
                "index {index} is past the checkpoint's {} entries",
                head.size
            ),
        );
        return;
    }
    let holds = |entry: &[u8]| {
        tlog::check_record(&path, head.size, head.root, index, tlog::leaf_hash(entry)).is_ok()
    };
    if !holds(bytes) && !holds(&tlog::entry_of(bytes, true)) {
        c.fail(
            "inclusion",
            Some(i),
            format!("the proof of entry {index} does not reach the checkpoint's root"),
        );
    }
}

/// Check 7's `evidence`: the flags hold together and are ones the
/// record's format can carry (proto/records.cddl), and an ADP record's
/// challenge signature verifies with the document's key. `Ok(Some(_))`:
/// it holds, but the challenge could not be checked offline (the
/// document names its key by fingerprint only).
fn evidence_holds(
    e: &Evidence,
    format: DocumentFormat,
    doc_sha256: &[u8],
    document: &str,
    agent_id: &str,
) -> Result<Option<String>, String> {
    if format != DocumentFormat::Adp {
        if e.challenge.is_some() || e.mutual_peer {
            return Err(format!("a challenge or mutual peers on a {format} record"));
        }
        let allowed = match format {
            DocumentFormat::A2a => e.fingerprint || !e.dnssec,
            DocumentFormat::DnsAid => !e.fingerprint,
            _ => !e.fingerprint && !e.dnssec,
        };
        return if allowed {
            Ok(None)
        } else {
            Err(format!("evidence flags a {format} record cannot carry"))
        };
    }
    if e.challenge.is_some() && !e.fingerprint {
        return Err("a challenge without the fingerprint chain".into());
    }
    if e.mutual_peer && e.challenge.is_none() {
        return Err("mutual peers without a challenge".into());
    }
    let Some(proof) = &e.challenge else {
        return Ok(None);
    };
    // Only the key is read from the document: `identity.publicKey`.
    let doc: serde_json::Value =
        serde_json::from_str(document).map_err(|e| format!("the ADP document is not JSON: {e}"))?;
    let public = doc.pointer("/identity/publicKey");
    let fingerprint = public
        .and_then(|k| k.get("fingerprint"))
        .and_then(serde_json::Value::as_str)
        .ok_or("the ADP document has no identity.publicKey.fingerprint")?;
    let Some(full) = public.and_then(|k| k.get("full")) else {
        return Ok(Some(
            "the challenge is the attesting node's word: the document names its key by fingerprint only".into(),
        ));
    };
    let key = full
        .as_str()
        .and_then(|f| crate::identity::decode_public_key(f).ok())
        .filter(|k| has_fingerprint(k, fingerprint))
        .ok_or("the document's publicKey.full is not the key of its fingerprint")?;
    handshake::check_proof(proof, doc_sha256, agent_id, &key)
        .map(|()| None)
        .map_err(|e| format!("the challenge signature does not verify: {e}"))
}
