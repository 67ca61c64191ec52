#!/usr/bin/env python3
"""Independent checker of agentmesh signed answers.

Written from docs/answers.md, proto/records.cddl and docs/protocol.md (#log, #crawl-txt,
#dnssec-chains) only (never from the Rust sources), so that a misreading in either
implementation shows.

  verify.py FILE|- [--trust KEY]... [--old-checkpoint FILE] [--dnssec-anchor FILE]...
            [--request-method M --request-target T [--request-body FILE]]

Prints {"ok", "failures": [{"code", "result", "message"}], "notes": [{"code", "result",
"message"}], "results": [{"id", "level"}]} and exits 0 when accepted (notes, code
`unchecked`, say what could not be checked offline and do not reject), 1 on any failure,
2 on a usage error or an unreadable file.
Needs `cryptography` (Ed25519) and `dnspython` (2.9.2: DNS RDATA and DNSSEC signatures
of the records' DNSSEC chains, over `cryptography`). Records are decoded by the strict
CBOR reader below, since a general-purpose decoder hides duplicate keys, long heads and
trailing bytes, which records.cddl makes errors; a chain's wire records are split by the
reader below too, which refuses compression pointers.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import struct
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import Any, Callable, TypeGuard

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
import dns.dnssec
import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdataset
import dns.rdatatype
import dns.rrset
import dns.zonefile

MAX_PAYLOAD = 8 << 20                              # answers.md: a payload of at most 8 MiB ...
MAX_INPUT = 4 * ((MAX_PAYLOAD + 2) // 3) + 4096    # ... makes an envelope of at most this
MAX_RESULTS, MAX_RECORD = 1000, 16384              # answers.md; records.cddl LIMITS
ANSWER_PREFIX, RECORD_PREFIX = b"agentmesh/answer/v1\n", b"agentmesh/record/v1\n"
SEALED_PREFIX, ADP_PREFIX = b"agentmesh/sealed/v1\n", b"ADP/1.0 handshake\n"
RECORD_TYPES = ("descriptor", "tombstone", "attestation", "liveness")
FORMATS = ("aidip", "adp", "a2a", "ard", "dns-aid", "aid", "mcp-registry")
ENV_KEYS = ("type", "payload", "signer", "signature")  # records.cddl: the only key order
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
PEER_ID_PREFIX = bytes.fromhex("0024" "08011220")  # identity multihash(36) of PublicKey{1, key}
HEX64 = re.compile(r"[0-9a-f]{64}")
# protocol.md#dnssec-chains: limits of a chain and of its check
MAX_CHAIN, MAX_CHAIN_RECORDS, MAX_CHAIN_ZONES, MAX_SIG_CHECKS = 8192, 64, 8, 64
ZONE_FLAG, REVOKE_FLAG = 0x0100, 0x0080            # DNSKEY flag bits 7 and 8 (RFC 4034, RFC 5011)
ROOT_ANCHORS = """
. IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D
. IN DS 38696 8 2 683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16
"""                                                  # answers.md check 7, `evidence`, DNSSEC

class Invalid(ValueError):
    """Any refusal while parsing; the caller turns it into the check's code."""

def need(cond: Any, what: str) -> None:
    if not cond:
        raise Invalid(what)

def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()

def is_u64(v: Any) -> bool:
    return type(v) is int and 0 <= v < 1 << 64      # bool is an int subclass: refused

# ------------------------------------------------------------------ encodings
def b64u_decode(s: Any) -> bytes:
    """RFC 4648 s.5 without padding, strictly: no stray characters, zero tail bits."""
    need(isinstance(s, str) and re.fullmatch(r"[A-Za-z0-9_-]*", s) and len(s) % 4 != 1,
         "not base64url without padding")
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    need(base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == s, "non-canonical base64url")
    return raw

def b64_decode(s: Any) -> bytes:
    """RFC 4648 s.4 with padding, strictly."""
    need(isinstance(s, str) and s.isascii(), "not base64")
    try:
        raw = base64.b64decode(s, validate=True)
    except binascii.Error:
        raise Invalid("not base64") from None
    need(base64.b64encode(raw).decode() == s, "non-canonical base64")
    return raw

def peer_id(key: bytes) -> str:
    """libp2p peer id of an Ed25519 key: base58btc(identity multihash(protobuf PublicKey))."""
    data, out = PEER_ID_PREFIX + key, ""
    n = int.from_bytes(data, "big")
    while n:
        n, r = divmod(n, 58)
        out = B58[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out   # a leading 0x00 is a "1"

def key_of_peer_id(pid: str) -> bytes:
    need(0 < len(pid) <= 64 and all(c in B58 for c in pid), "not base58btc")
    n = 0
    for c in pid:
        n = n * 58 + B58.index(c)
    data = b"\0" * (len(pid) - len(pid.lstrip("1"))) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    need(len(data) == 38 and data.startswith(PEER_ID_PREFIX) and peer_id(data[6:]) == pid,
         "not an Ed25519 identity peer id")
    return data[6:]

# ------------------------------------------------------------------ Ed25519 (RFC 8032)
_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P

def key_problem(key: bytes) -> str | None:
    """Why `key` is no usable Ed25519 key: not a point (RFC 8032 5.1.3), or small-order."""
    y = int.from_bytes(key, "little") if len(key) == 32 else _P
    sign, y = y >> 255, y & ((1 << 255) - 1)
    if y >= _P:
        return "not a valid compressed Edwards point"
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    if (x * x - x2) % _P or (x == 0 and sign):
        return "not a valid compressed Edwards point"
    x = _P - x if x & 1 != sign else x
    for _ in range(3):                               # [8]P by the complete addition law
        t = _D * x * x * y * y % _P
        x, y = 2 * x * y * pow(1 + t, _P - 2, _P) % _P, (y * y + x * x) * pow(1 - t, _P - 2, _P) % _P
    return "small-order (weak) key" if (x, y) == (0, 1) else None

def ed_verify(key: bytes, sig: bytes, msg: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(key).verify(sig, msg)
        return True
    except (InvalidSignature, ValueError):
        return False

# ------------------------------------------------------------------ CBOR (the subset records use)
def cbor_item(d: bytes, i: int, depth: int, canon: list[bool]) -> tuple[Any, int]:
    """Decode the item at d[i] -> (value, next i). Maps become dicts (text keys only, a
    duplicate refused, order kept); tags, floats and simple values other than
    false/true/null are refused. canon[0] is cleared by an indefinite length or a head
    longer than needed, both legal CBOR but not records.cddl's encoding."""
    need(depth <= 16, "nested too deep")
    need(i < len(d), "truncated")
    major, ai, i = d[i] >> 5, d[i] & 31, i + 1
    if ai == 31:                                     # indefinite length, up to a break
        need(major in (2, 3, 4, 5), "unexpected break or indefinite item")
        canon[0], items = False, []
        while True:
            need(i < len(d), "truncated")
            if d[i] == 0xFF:
                break
            need(major > 3 or (d[i] >> 5 == major and d[i] & 31 != 31), "bad string chunk")
            v, i = cbor_item(d, i, depth + 1, canon)
            items.append(v)
        i += 1
        if major < 4:
            return (b"" if major == 2 else "").join(items), i
        return (items if major == 4 else cbor_map(items)), i
    need(ai <= 27, "reserved additional information")
    n = ai
    if ai >= 24:
        size = 1 << (ai - 24)
        need(i + size <= len(d), "truncated")
        n, i = int.from_bytes(d[i:i + size], "big"), i + size
        if n < (24 if size == 1 else 1 << (4 * size)):
            canon[0] = False
    if major <= 1:
        return (n if major == 0 else -1 - n), i
    if major <= 3:
        need(n <= len(d) - i, "truncated")
        b = bytes(d[i:i + n])
        try:
            return (b if major == 2 else b.decode("utf-8")), i + n
        except UnicodeDecodeError:
            raise Invalid("text string is not UTF-8") from None
    if major <= 5:
        count = n * (major - 3)                      # an array holds n items, a map 2n
        need(count <= len(d) - i, "truncated")
        items = []
        for _ in range(count):
            v, i = cbor_item(d, i, depth + 1, canon)
            items.append(v)
        return (items if major == 4 else cbor_map(items)), i
    need(major == 7 and ai in (20, 21, 22), "a tag, float or simple value (records use none)")
    return {20: False, 21: True, 22: None}[ai], i

def cbor_map(items: list[Any]) -> dict[str, Any]:
    need(len(items) % 2 == 0, "odd map")
    m: dict[str, Any] = {}
    for k, v in zip(items[::2], items[1::2]):
        need(isinstance(k, str), "map key is not a text string")
        need(k not in m, f"duplicate key {k!r}")
        m[k] = v
    return m

# ------------------------------------------------------------------ records (records.cddl)
def fields(m: Any, what: str, spec: dict[str, Any], optional: str = "") -> dict[str, Any]:
    """Check map `m`: no unknown key, the keys not named in `optional` present, and
    each value passing its predicate in `spec`."""
    if not isinstance(m, dict):
        raise Invalid(f"bad_payload: {what} is not a map")
    for k in m:
        need(k in spec, f"bad_payload: unknown key {what}.{k}")
    for k, ok in spec.items():
        need(k in m or k in optional.split(), f"bad_payload: {what}.{k} missing")
        need(k not in m or ok(m[k]), f"bad_payload: {what}.{k} has the wrong type")
    return m

def is_str(v: Any) -> TypeGuard[str]: return isinstance(v, str)
def is_bool(v: Any) -> bool: return type(v) is bool
def is_map(v: Any) -> TypeGuard[dict[str, Any]]: return isinstance(v, dict)
def is_strs(v: Any) -> bool: return isinstance(v, list) and all(isinstance(x, str) for x in v)
def bstr(n: int = 0) -> Any: return lambda v: isinstance(v, bytes) and n in (0, len(v))

def decode_record(raw: bytes) -> tuple[dict[str, Any] | None, bytes | None, str | None]:
    """records.cddl CHECKS 1-10 -> (record, signer, error reason). The signer is given as
    soon as the envelope is well formed, even when a later step fails."""
    if len(raw) > MAX_RECORD:
        return None, None, "too_large"
    canon = [True]
    try:
        env, end = cbor_item(raw, 0, 0, canon)
    except Invalid as e:
        return None, None, f"malformed: {e}"
    if not (isinstance(env, dict) and set(env) == set(ENV_KEYS) and is_str(env["type"])
            and all(isinstance(env[k], bytes) for k in ENV_KEYS[1:])):
        return None, None, "malformed: not a signed-record envelope"
    rtype, payload, signer, sig = (env[k] for k in ENV_KEYS)
    problem = key_problem(signer)
    if end != len(raw):
        return None, None, "trailing_bytes"
    if rtype not in RECORD_TYPES:
        return None, None, f"unknown_type {rtype[:40]!r}"
    if len(signer) != 32 or problem == "not a valid compressed Edwards point" or len(sig) != 64:
        return None, None, "malformed: signer or signature"
    if not canon[0] or tuple(env) != ENV_KEYS:
        return None, signer, "non_canonical"
    if problem:
        return None, signer, f"malformed: {problem}"
    if not ed_verify(signer, sig, RECORD_PREFIX + rtype.encode() + b"\n" + payload):
        return None, signer, "bad_signature"
    if rtype != "descriptor":                        # the caller refuses it; no need to read it
        return {"type": rtype}, signer, None
    try:
        body, end = cbor_item(payload, 0, 0, [True])   # the payload's encoding is not checked
        need(end == len(payload), "bad_payload: more than one CBOR item")
        fields(body, "record", {"agent_id": is_str, "seq": is_u64, "issued_at": is_u64,
                                "expires_at": is_u64, "descriptor": is_map, "document": is_str,
                                "doc_sha256": bstr(), "evidence": is_map, "transfer": is_map},
               optional="transfer")
        desc = fields(body["descriptor"], "descriptor", {
            "id": is_str, "name": is_str, "description": is_str, "version": is_str,
            "publisher": is_str, "endpoint": is_str, "capabilities": is_strs, "tags": is_strs,
            "languages": is_strs, "status": is_str, "auth": is_str, "format": FORMATS.__contains__},
            optional="description version publisher endpoint capabilities tags languages status auth")
        ev = fields(body["evidence"], "evidence", {"dnssec": is_bool, "fingerprint": is_bool,
                                                   "challenge": is_map, "mutual_peer": is_bool,
                                                   "dnssec_chain": bstr()},
                    optional="dnssec fingerprint challenge mutual_peer dnssec_chain")  # "missing reads as false"
        need(0 < len(ev.get("dnssec_chain", b"_")) <= MAX_CHAIN,     # bstr .size (1..8192)
             "bad_payload: evidence.dnssec_chain is empty or over 8192 bytes")
        if "challenge" in ev:
            fields(ev["challenge"], "challenge", {"verifier": is_str, "unix_ms": is_u64,
                                                  "rand": bstr(), "signature": bstr()})
        if "transfer" in body:
            fields(body["transfer"], "transfer", {"agent_id": is_str, "from": bstr(32), "to": bstr(32),
                                                  "up_to_seq": is_u64, "signature": bstr(64)})
        need(body["agent_id"] == desc["id"], "bad_payload: agent_id is not descriptor.id")
    except Invalid as e:
        return None, signer, str(e) if str(e).startswith("bad_payload") else f"bad_payload: {e}"
    if sha256(body["document"].encode()) != body["doc_sha256"]:
        return None, signer, "digest_mismatch"
    evidence = {k: ev.get(k, False) for k in ("dnssec", "fingerprint", "mutual_peer")}
    evidence["challenge"] = ev.get("challenge")
    return {"type": rtype, "agent_id": body["agent_id"], "format": desc["format"],
            "issued_at": body["issued_at"], "document": body["document"],
            "doc_sha256": body["doc_sha256"], "evidence": evidence,
            "dnssec_chain": ev.get("dnssec_chain")}, signer, None

def evidence_problems(rec: dict[str, Any]) -> tuple[list[str], bool, list[str]]:
    """answers.md check 7 `evidence`, and records.cddl's rule on which flags a format may
    carry (its bad_evidence). Returns the problems, whether a challenge counts (it verified,
    or the document names its key by fingerprint only), and what is left unchecked."""
    ev, fmt, out, verified, notes = rec["evidence"], rec["format"], [], False, []
    ch = ev["challenge"]
    if ch is not None and not ev["fingerprint"]:
        out.append("a challenge without fingerprint")
    if ev["mutual_peer"] and ch is None:
        out.append("mutual_peer without a challenge")
    allowed = {"adp": "dnssec fingerprint challenge mutual_peer", "a2a": "dnssec fingerprint",
               "dns-aid": "dnssec"}.get(fmt, "").split()
    extra = sorted(k for k, v in ev.items() if v not in (False, None) and k not in allowed)
    if extra:
        out.append(f"an {fmt} record carries {', '.join(extra)} (records.cddl: bad_evidence)")
    if fmt == "adp" and ch is not None:
        if names_key_by_fingerprint_only(rec):
            # answers.md: the attesting key's word, a note, not a failure
            notes.append("the challenge is the attesting key's word: the document names its "
                         "key by fingerprint only (no identity.publicKey.full)")
            verified = True
        else:
            err = adp_challenge_problem(rec, ch)
            verified = err is None
            if err:
                out.append(f"challenge: {err}")
    return out, verified, notes

def names_key_by_fingerprint_only(rec: dict[str, Any]) -> bool:
    """The ADP document has identity.publicKey.fingerprint and no publicKey.full."""
    try:
        pk = parse_json(rec["document"].encode())["identity"]["publicKey"]
        return isinstance(pk, dict) and "fingerprint" in pk and "full" not in pk
    except (Invalid, KeyError, TypeError):
        return False

def adp_challenge_problem(rec: dict[str, Any], ch: dict[str, Any]) -> str | None:
    """Recompute the ADP handshake the agent signed (answers.md check 7 `evidence`)."""
    try:
        pk = parse_json(rec["document"].encode())["identity"]["publicKey"]
        key, fp = b64u_decode(pk["full"]), pk["fingerprint"]
    except (Invalid, KeyError, TypeError):
        return "the document has no identity.publicKey.full and fingerprint"
    if len(key) != 32 or fp != "ed25519:" + sha256(key).hex():
        return "identity.publicKey.full is not 32 bytes, or not the key of its fingerprint"
    if len(ch["rand"]) != 16 or len(ch["signature"]) != 64:
        return "rand is not 16 bytes or the signature not 64"
    nonce = sha256(rec["doc_sha256"] + ch["verifier"].encode() + ch["unix_ms"].to_bytes(8, "big")
                   + ch["rand"]).hex()
    msg = ADP_PREFIX + f"{nonce}\n{rec['agent_id']}\n{ch['verifier']}".encode()
    return None if ed_verify(key, ch["signature"], msg) else "the agent's signature does not verify"

def level_of(ev: dict[str, Any], challenge_ok: bool) -> str:
    """records.cddl Evidence::level, a challenge counting only when it verified."""
    if ev["fingerprint"] and challenge_ok:
        return "peer-verified" if ev["mutual_peer"] else "key-verified"
    return "dns-verified" if ev["dnssec"] else "unverified"

# ------------------------------------------------------------------ DNSSEC chains (protocol.md#dnssec-chains)
# An anchor: (zone, DS or DNSKEY rdata, valid from, valid until), the times Unix seconds or None.
Anchor = tuple[dns.name.Name, Any, int | None, int | None]

def parse_chain(d: bytes) -> list[tuple[dns.name.Name, int, bytes]]:
    """Split a chain into its wire records (RFC 1035 4.1.3) -> [(owner, type, RDATA)]:
    names uncompressed, class IN, nothing between or after the records, the limits."""
    need(0 < len(d) <= MAX_CHAIN, f"the chain is empty or over {MAX_CHAIN} bytes")
    out: list[tuple[dns.name.Name, int, bytes]] = []
    i = 0
    while i < len(d):
        need(len(out) < MAX_CHAIN_RECORDS, f"more than {MAX_CHAIN_RECORDS} records")
        labels: list[bytes] = []
        while True:                                  # the owner name, label by label
            need(i < len(d), f"record {len(out)}: truncated owner name")
            n = d[i]
            need(n & 0xC0 != 0xC0, f"record {len(out)}: a compression pointer in the owner name")
            need(n < 64, f"record {len(out)}: an owner name label of a reserved type")
            need(i + 1 + n <= len(d), f"record {len(out)}: truncated owner name")
            labels.append(d[i + 1:i + 1 + n])
            i += 1 + n
            if n == 0:
                break
        try:
            owner = dns.name.Name(labels)
        except dns.exception.DNSException as e:
            raise Invalid(f"record {len(out)}: a bad owner name ({type(e).__name__})") from None
        need(i + 10 <= len(d), f"record {len(out)}: truncated header")
        rdtype, rdclass, _ttl, rdlen = struct.unpack_from("!HHIH", d, i)
        i += 10
        need(rdclass == dns.rdataclass.IN, f"record {len(out)}: class {rdclass}, not IN")
        need(i + rdlen <= len(d), f"record {len(out)}: truncated RDATA")
        out.append((owner, rdtype, d[i:i + rdlen]))
        i += rdlen
    return out

def rdata_of(rdtype: int, raw: bytes, where: str) -> Any:
    """One RDATA by dnspython, read alone (a pointer cannot reach out of it) and required to
    be its own uncompressed encoding (a name compressed inside it is refused)."""
    try:
        rd = dns.rdata.from_wire(dns.rdataclass.IN, rdtype, raw, 0, len(raw))
        back = rd.to_wire()
    except Exception as e:  # noqa: BLE001 - dnspython raises many kinds on bad RDATA
        raise Invalid(f"{where}: malformed RDATA ({type(e).__name__})") from None
    need(back == raw, f"{where}: RDATA not in uncompressed wire form")
    return rd

def type_text(t: int) -> str:
    return dns.rdatatype.to_text(t)

def in_window(t: int, inception: int, expiration: int) -> bool:
    """inception <= t <= expiration in serial number arithmetic (RFC 4034 3.1.5, RFC 1982)."""
    t %= 1 << 32
    return (t - inception) % (1 << 32) < 1 << 31 and (expiration - t) % (1 << 32) < 1 << 31

def ds_matches(zone: dns.name.Name, key: Any, ds: Any) -> bool:
    """RFC 4034 5.1.4: the DS gives this key's digest (and its key tag and algorithm)."""
    if ds.key_tag != dns.dnssec.key_id(key) or ds.algorithm != key.algorithm:
        return False
    try:
        return dns.dnssec.make_ds(zone, key, ds.digest_type, validating=True).digest == ds.digest
    except (dns.exception.DNSException, ValueError):
        return False                                 # a digest type not supported or allowed

class OutOfChecks(Invalid):
    pass

class ChainCheck:
    """One check of a chain at time t from `anchors` (protocol.md#dnssec-chains, "Checking a
    chain"). With self_anchor, a zone whose DS RRset is not in the chain is taken as anchored
    by its own keys (the "top zone taken as anchored" of the document)."""

    def __init__(self, records: list[tuple[dns.name.Name, int, bytes]], t: int,
                 anchors: list[Anchor], self_anchor: bool) -> None:
        self.t, self.self_anchor, self.checks = t, self_anchor, 0
        self.anchors = [(z, rd) for z, rd, vf, vu in anchors
                        if (vf is None or vf <= t) and (vu is None or t < vu)]
        self.sets: dict[tuple[dns.name.Name, int], list[bytes]] = {}
        self.sigs: dict[tuple[dns.name.Name, int], list[bytes]] = {}
        for owner, rdtype, raw in records:           # grouped by owner (any case) and type
            if rdtype == dns.rdatatype.RRSIG and len(raw) >= 2:
                self.sigs.setdefault((owner.canonicalize(), int.from_bytes(raw[:2], "big")), []).append(raw)
            else:
                self.sets.setdefault((owner.canonicalize(), rdtype), []).append(raw)
        self.proved: dict[dns.name.Name, tuple[list[Any], int]] = {}   # zone -> (keys, zones used)
        self.failed: dict[dns.name.Name, int] = {}   # zone -> the most zones it failed with
        self.self_anchored: set[dns.name.Name] = set()
        self.why: list[str] = []

    def miss(self, why: str) -> None:
        if why not in self.why:
            self.why.append(why)

    def rrset(self, owner: dns.name.Name, rdtype: int) -> Any:
        raws = self.sets.get((owner.canonicalize(), rdtype))
        if raws is None:
            return None
        rs = dns.rrset.RRset(owner.canonicalize(), dns.rdataclass.IN, rdtype)
        for raw in raws:
            rs.add(rdata_of(rdtype, raw, f"{owner} {type_text(rdtype)}"))
        return rs

    def rrsigs(self, owner: dns.name.Name, rdtype: int) -> list[Any]:
        return [rdata_of(dns.rdatatype.RRSIG, raw, f"{owner} RRSIG {type_text(rdtype)}")
                for raw in self.sigs.get((owner.canonicalize(), rdtype), [])]

    def verifies(self, rrset: Any, sig: Any, key: Any) -> bool:
        """One signature verification (of at most MAX_SIG_CHECKS) by dnspython. The window
        was checked by the caller in serial arithmetic; dnspython compares plainly, so it
        is given a time inside the window."""
        if self.checks >= MAX_SIG_CHECKS:
            raise OutOfChecks(f"stopped after {MAX_SIG_CHECKS} signature verifications")
        self.checks += 1
        now = self.t if sig.inception <= self.t <= sig.expiration else sig.inception
        try:
            dns.dnssec.validate_rrsig(rrset, sig, {sig.signer: dns.rdataset.from_rdata(0, key)},
                                      now=now)
            return True
        except (dns.exception.DNSException, ValueError, TypeError):
            return False

    def signed_by(self, rrset: Any, owner: dns.name.Name, signer_ok: Callable[[dns.name.Name], bool],
                  keys_of: Callable[[dns.name.Name], list[Any] | None]) -> Any:
        """Rule 1 for one RRset -> the RRSIG that proves it, or None: an RRSIG at owner covering
        its type, by an acceptable signer, labels = the owner's label count, t in its window,
        verifying with one of keys_of(signer) of its algorithm and key tag."""
        what = f"{owner} {type_text(rrset.rdtype)}"
        sigs = self.rrsigs(owner, rrset.rdtype)
        if not sigs:
            self.miss(f"no RRSIG over {what}")
        for sig in sigs:
            if not signer_ok(sig.signer):
                self.miss(f"an RRSIG over {what} by {sig.signer}, which may not sign it")
            elif sig.labels != len(owner) - 1:
                self.miss(f"an RRSIG over {what} with labels {sig.labels}, not {len(owner) - 1}")
            elif not in_window(self.t, sig.inception, sig.expiration):
                self.miss(f"an RRSIG over {what} not valid at {self.t}")
            else:
                keys = keys_of(sig.signer)
                cands = [k for k in keys or []
                         if k.algorithm == sig.algorithm and dns.dnssec.key_id(k) == sig.key_tag]
                if keys is not None and not cands:
                    self.miss(f"an RRSIG over {what} by key {sig.key_tag}, not a proved key of {sig.signer}")
                for k in cands:
                    if self.verifies(rrset, sig, k):
                        return sig
                    self.miss(f"an RRSIG over {what} by key {sig.key_tag} does not verify")
        return None

    def prove(self, owner: dns.name.Name, rdtype: int, signer_ok: Callable[[dns.name.Name], bool],
              zones: int) -> Any:
        """Rule 1: the RRset, when one of its RRSIGs verifies with a proved key of its signer
        (the signer's zone at most `zones` zones from the anchored zone); else None."""
        rs = self.rrset(owner, rdtype)
        if rs is None:
            self.miss(f"no {owner} {type_text(rdtype)} RRset in the chain")
            return None
        sig = self.signed_by(rs, owner, signer_ok, lambda z: self.zone_keys(z, zones))
        return None if sig is None else rs

    def anchored(self, zone: dns.name.Name, key: Any) -> bool:
        for z, rd in self.anchors:
            if z != zone:
                continue
            if rd.rdtype == dns.rdatatype.DNSKEY and (rd.algorithm, rd.protocol, rd.key) == (
                    key.algorithm, key.protocol, key.key):
                return True
            if rd.rdtype == dns.rdatatype.DS and ds_matches(zone, key, rd):
                return True
        return False

    def zone_keys(self, zone: dns.name.Name, zones: int) -> list[Any] | None:
        """Rule 2: the proved keys of `zone` (every zone key of its DNSKEY RRset, not revoked),
        or None, using at most `zones` zones from this one to the anchored zone."""
        zone = zone.canonicalize()
        if zone in self.proved:
            keys, used = self.proved[zone]
            return keys if used <= zones else None
        if zones < 1:
            self.miss(f"more than {MAX_CHAIN_ZONES} zones to an anchored zone")
            return None
        if self.failed.get(zone, 0) >= zones:
            return None
        result, used = self.prove_zone(zone, zones)
        if result is None:
            self.failed[zone] = zones
        else:
            self.proved[zone] = (result, used)
        return result

    def prove_zone(self, zone: dns.name.Name, zones: int) -> tuple[list[Any] | None, int]:
        dnskeys = self.rrset(zone, dns.rdatatype.DNSKEY)
        if dnskeys is None:
            self.miss(f"no {zone} DNSKEY RRset in the chain")
            return None, 0
        zone_keys = [k for k in dnskeys if k.flags & ZONE_FLAG and not k.flags & REVOKE_FLAG
                     and k.protocol == 3]

        def self_signed(cands: list[Any]) -> bool:  # an RRSIG at the zone by the zone, by a cand
            return self.signed_by(dnskeys, zone, lambda s: s == zone, lambda _s: cands) is not None
        cands = [k for k in zone_keys if self.anchored(zone, k)]
        if cands and self_signed(cands):
            return zone_keys, 1
        has_ds = (zone, dns.rdatatype.DS) in self.sets
        if self.self_anchor and not has_ds and zone_keys and self_signed(zone_keys):
            self.self_anchored.add(zone)
            return zone_keys, 1
        if not has_ds or len(zone) == 1:
            if not cands:
                self.miss(f"{zone} is not anchored and its DS RRset is not in the chain")
            return None, 0
        ds_set = self.rrset(zone, dns.rdatatype.DS)  # proved by a proper ancestor's key
        sig = self.signed_by(ds_set, zone, lambda s: zone.is_subdomain(s) and s != zone,
                             lambda s: self.zone_keys(s, zones - 1))
        if sig is None:
            return None, 0
        cands = [k for k in zone_keys if any(ds_matches(zone, k, ds) for ds in ds_set)]
        if not cands:
            self.miss(f"no zone key of {zone} matches its DS RRset")
            return None, 0
        if not self_signed(cands):
            return None, 0
        return zone_keys, 1 + self.proved[sig.signer.canonicalize()][1]

def prove_rrset(records: list[tuple[dns.name.Name, int, bytes]], qname: dns.name.Name, qtype: int,
                t: int, anchors: list[Anchor], self_anchor: bool) -> tuple[Any, ChainCheck]:
    c = ChainCheck(records, t, anchors, self_anchor)
    try:
        rs = c.prove(qname, qtype, lambda s: qname.is_subdomain(s), MAX_CHAIN_ZONES)
    except Invalid as e:                             # malformed RDATA read, or out of checks
        c.miss(str(e))
        rs = None
    return rs, c

def check_chain(chain: bytes, qname: dns.name.Name, qtype: int, t: int,
                anchors: list[Anchor]) -> tuple[str, str, Any]:
    """protocol.md#dnssec-chains -> ("proved" | "self-anchored" | "failed", why, RRset).
    "self-anchored": the chain does not prove the RRset from the anchors, but does when every
    zone of it without a DS RRset in the chain is taken as anchored."""
    try:
        records = parse_chain(chain)
    except Invalid as e:
        return "failed", f"the chain is malformed: {e}", None
    rs, c = prove_rrset(records, qname, qtype, t, anchors, False)
    if rs is not None:
        return "proved", "", rs
    rs2, c2 = prove_rrset(records, qname, qtype, t, anchors, True)
    if rs2 is not None:
        zones = ", ".join(sorted(z.to_text() for z in c2.self_anchored)) or "?"
        return "self-anchored", f"it holds together only from the keys of {zones}, not anchored here", rs2
    return "failed", "; ".join((c.why + [w for w in c2.why if w not in c.why])[:4]), None

def adp_txt_problem(rrset: Any, fingerprint: Any) -> str | None:
    """protocol.md#crawl-txt: exactly one ADP record, v=ADP1, whose pk is `fingerprint`."""
    if not isinstance(fingerprint, str):
        return "the document has no identity.publicKey.fingerprint to compare the TXT pk with"
    adp_records = []
    for rd in rrset:
        text = b"".join(rd.strings)
        try:
            pieces = [p.strip() for p in text.decode("utf-8").split(";")]
        except UnicodeDecodeError:
            continue
        pairs = [tuple(x.strip() for x in p.split("=", 1)) for p in pieces if p]
        if pairs and len(pairs[0]) == 2 and pairs[0][0] == "v" and pairs[0][1].startswith("ADP"):
            if len(text) > 4096 or len(pairs) > 32:
                return "the ADP TXT record is over 4096 bytes or 32 pairs"
            adp_records.append({p[0]: p[1] for p in reversed(pairs) if len(p) == 2})
    if len(adp_records) != 1:
        return f"the proved TXT RRset holds {len(adp_records)} ADP records, not one"
    rec = adp_records[0]
    if rec["v"] != "ADP1":
        return f"the proved ADP TXT record is version {rec['v'][:20]!r}, not ADP1"
    if "pk" not in rec:
        return "the proved ADP TXT record has no pk"
    if rec["pk"].lower() != fingerprint.lower():
        return f"the proved ADP TXT record names another key ({rec['pk'][:80]}), not the document's"
    return None

def dnssec_problems(rec: dict[str, Any], anchors: list[Anchor]) -> tuple[list[str], list[str]]:
    """answers.md check 7, `evidence`, DNSSEC -> (failures, notes)."""
    ev, chain, fmt = rec["evidence"], rec["dnssec_chain"], rec["format"]
    if chain is not None and not ev["dnssec"]:
        return ["a dnssec_chain without the dnssec flag"], []
    if not ev["dnssec"] or fmt not in ("adp", "a2a", "dns-aid"):
        return [], []                                # another format's dnssec: bad_evidence above
    if chain is None:
        return [], ["the dnssec flag carries no chain: it is the signer's word"]
    prefix, rdtype, label = {"adp": ("agent:", dns.rdatatype.TXT, "_agent."),
                             "a2a": ("a2a:", dns.rdatatype.TXT, "_agent."),
                             "dns-aid": ("dns-aid:", dns.rdatatype.SVCB, "")}[fmt]
    aid = rec["agent_id"]
    try:
        need(aid.startswith(prefix) and len(aid) > len(prefix), "")
        qname = dns.name.from_text(label + aid[len(prefix):] + ".", None)
    except (Invalid, dns.exception.DNSException):
        return [f"the {fmt} record's id {aid[:80]!r} names no DNS name for its chain"], []
    verdict, why, rrset = check_chain(chain, qname, rdtype, rec["issued_at"], anchors)
    what = f"{qname} {type_text(rdtype)}"
    if verdict == "failed":
        return [f"the DNSSEC chain does not prove {what}: {why}"], []
    if fmt == "adp" and ev["fingerprint"]:
        try:
            fp = parse_json(rec["document"].encode())["identity"]["publicKey"]["fingerprint"]
        except (Invalid, KeyError, TypeError):
            fp = None
        problem = adp_txt_problem(rrset, fp)
        if problem:
            return [f"DNSSEC: {problem}"], []
    if verdict == "self-anchored":
        return [], [f"the DNSSEC chain of {what} is not checkable: {why}"]
    return [], []

def read_anchors(text: str) -> list[Anchor]:
    """--dnssec-anchor FILE: DS or DNSKEY records in zone-file syntax, or IANA's
    root-anchors.xml (RFC 9718; its KeyDigests as DS records, with their validity)."""
    if text.lstrip().startswith("<"):
        return read_anchors_xml(text)
    try:
        rrsets = dns.zonefile.read_rrsets(text, rdclass=None, default_ttl=0)
    except dns.exception.DNSException as e:
        raise Invalid(f"not zone-file records: {e}") from None
    out: list[Anchor] = []
    for rs in rrsets:
        need(rs.rdtype in (dns.rdatatype.DS, dns.rdatatype.DNSKEY),
             f"{rs.name} {type_text(rs.rdtype)}: an anchor is a DS or DNSKEY record")
        out += [(rs.name.canonicalize(), rd, None, None) for rd in rs]
    need(out, "no DS or DNSKEY record")
    return out

def read_anchors_xml(text: str) -> list[Anchor]:
    def when(v: str | None) -> int | None:
        if v is None:
            return None
        d = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
        return int((d if d.tzinfo else d.replace(tzinfo=timezone.utc)).timestamp())
    try:
        root = ET.fromstring(text)
        need(root.tag == "TrustAnchor", "not a TrustAnchor document")
        zone = dns.name.from_text((root.findtext("Zone") or "").strip()).canonicalize()
        out: list[Anchor] = []
        for kd in root.findall("KeyDigest"):
            f = [(kd.findtext(k) or "").strip() for k in ("KeyTag", "Algorithm", "DigestType", "Digest")]
            ds = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.DS, " ".join(f))
            out.append((zone, ds, when(kd.get("validFrom")), when(kd.get("validUntil"))))
    except (ET.ParseError, dns.exception.DNSException, ValueError) as e:
        raise Invalid(f"not a root-anchors.xml: {e}") from None
    need(out, "no KeyDigest")
    return out

# ------------------------------------------------------------------ the log (protocol.md#log)
def inclusion_ok(index: int, size: int, leaf: bytes, path: list[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2, step by step."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = sha256(b"\x01" + p + r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = sha256(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root

def check_checkpoint(note: str, origin: str, key: bytes) -> tuple[tuple[int, bytes] | None, list[str]]:
    """A C2SP signed note by `key` under `origin` whose text is a tlog checkpoint.
    Returns (size, root) whenever the text parses (proofs can be tried even when the
    signature is bad) and the problems found."""
    probs: list[str] = []
    if not origin or len(origin) > 200 or "+" in origin or any(c.isspace() for c in origin):
        probs.append("log_origin is empty, over 200 characters, or has a space or a '+'")
    split = note.rfind("\n\n")                       # the last blank line ends the text
    if split < 0:
        return None, probs + ["not a signed note (no blank line)"]
    text, sigs = note[:split + 1], note[split + 2:]
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        probs.append("a control character in the note text")
    lines = sigs[:-1].split("\n") if sigs.endswith("\n") else []
    if not 0 < len(lines) <= 100:
        probs.append("no, unterminated, or over 100 signature lines")
        lines = []
    key_id, found = sha256(origin.encode() + b"\n\x01" + key)[:4], None
    for line in lines:                               # "— <name> <base64(key id || signature)>"
        parts = line[2:].split(" ")
        try:
            need(line.startswith("\u2014 ") and len(parts) == 2 and parts[0], "")
            blob = b64_decode(parts[1])
            need(len(blob) >= 5, "")
        except Invalid:
            probs.append(f"malformed signature line {line[:80]!r}")
            continue
        if found is None and parts[0] == origin and blob[:4] == key_id:
            found = blob[4:]                         # the first line of the key decides
    if found is None:
        probs.append("no signature by the node key under log_origin")
    elif not ed_verify(key, found, text.encode()):
        probs.append("the node's signature of the checkpoint does not verify")
    body = text.split("\n")                          # origin, size, root, then "" after the last \n
    if len(body) != 4 or body[0] != origin or not re.fullmatch(r"0|[1-9][0-9]{0,19}", body[1]):
        return None, probs + ["the text is not three lines: origin, size in decimal, root"]
    try:
        root = b64_decode(body[2])
        need(len(root) == 32 and int(body[1]) < 1 << 64, "")
        return (int(body[1]), root), probs
    except Invalid:
        return None, probs + ["the root is not a base64 SHA-256 hash, or the size not a u64"]

# ------------------------------------------------------------------ the answer (answers.md)
def parse_json(b: bytes) -> Any:
    """Strict JSON: UTF-8, no duplicate member, no NaN/Infinity, no lone surrogate."""
    def pairs(kv: list[tuple[str, Any]]) -> dict[str, Any]:
        need(len({k for k, _ in kv}) == len(kv), "duplicate member")
        return dict(kv)
    try:
        v = json.loads(b.decode("utf-8"), object_pairs_hook=pairs, parse_constant=lambda c: need(0, c))
        json.dumps(v, ensure_ascii=False).encode("utf-8")   # UnicodeError on a lone surrogate
        return v
    except (UnicodeError, ValueError, RecursionError) as e:
        raise Invalid(f"not JSON: {str(e)[:200]}") from None

def parse_payload(payload: bytes) -> dict[str, Any]:
    """answers.md "The payload": members and types. Unknown members are tolerated (the
    document does not say they are refused); trusted_signers come back decoded."""
    p = parse_json(payload)
    if not isinstance(p, dict):
        raise Invalid("the payload is not an object")
    for k in ("v", "node", "time", "request", "request_hash", "checkpoint", "trusted_signers",
              "answer", "results"):
        need(k in p, f"payload.{k} missing")
    need(is_u64(p["v"]) and p["v"] == 1, "payload.v is not 1")
    node, rq, res = p["node"], p["request"], p["results"]
    need(is_map(node) and is_str(node.get("peer_id")) and is_str(node.get("log_origin")),
         "payload.node is not {peer_id, log_origin}")
    need(is_u64(p["time"]), "payload.time is not Unix seconds")
    need(is_map(rq) and all(is_str(rq.get(k)) for k in ("method", "target", "body_sha256")),
         "payload.request is not {method, target, body_sha256}")
    need(is_str(p["request_hash"]) and is_str(p["checkpoint"]), "request_hash or checkpoint not a string")
    need(isinstance(p["trusted_signers"], list), "payload.trusted_signers is not an array")
    try:
        p["trusted_signers"] = [b64u_decode(k) for k in p["trusted_signers"]]
    except Invalid as e:
        raise Invalid(f"payload.trusted_signers: {e}") from None
    need(all(len(k) == 32 for k in p["trusted_signers"]), "a trusted signer is not 32 bytes")
    need(isinstance(res, list) and len(res) <= MAX_RESULTS, "payload.results is not an array of at most 1000")
    for i, r in enumerate(res):
        need(is_map(r) and all(k in r for k in ("id", "record", "log_index", "inclusion"))
             and is_str(r["id"]) and is_str(r["record"])
             and (r["log_index"] is None or is_u64(r["log_index"]))
             and (r["inclusion"] is None or is_strs(r["inclusion"])),
             f"payload.results[{i}] is not {{id, record, log_index, inclusion}}")
    return p

def answer_agents(answer: Any) -> tuple[list[Any] | None, str]:
    """The agents of an answer by its shape (answers.md, end of "The payload")."""
    if isinstance(answer, list):
        return answer, "summaries"
    if is_map(answer) and "candidates" in answer:
        return (answer["candidates"] if isinstance(answer["candidates"], list) else None), "candidates"
    return ([answer], "object") if is_map(answer) and "id" in answer else ([], "none")

def strip_proof(target: str) -> str:
    """The target as the node records it: without any `proof` query parameter."""
    path, sep, query = target.partition("?")
    kept = [c for c in query.split("&") if c.split("=", 1)[0] != "proof"] if sep else []
    return path + ("?" + "&".join(kept) if kept else "")

def verify(raw: bytes, trust: list[bytes], old: str | None,
           req: tuple[str, str, bytes] | None, anchors: list[Anchor] | None = None) -> dict[str, Any]:
    """All of answers.md "The checks"; every failure found is reported, and every note
    (what is the attesting key's word, code `unchecked`). `anchors`: the DNSSEC trust
    anchors besides the root's key-signing keys."""
    fails: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    anchors = read_anchors(ROOT_ANCHORS) + (anchors or [])

    def fail(code: str, msg: str, i: int | None = None) -> None:
        fails.append({"code": code, "result": i, "message": msg})

    def note(code: str, msg: str, i: int | None = None) -> None:
        notes.append({"code": code, "result": i, "message": msg})

    def done() -> dict[str, Any]:
        return {"ok": not fails, "failures": fails, "notes": notes, "results": out}

    try:                                             # 1. envelope
        need(len(raw) <= MAX_INPUT, "the answer is over the size limit")
        env = parse_json(raw)
        need(is_map(env) and set(env) == {"agentmesh_answer", "payload", "signer", "signature"},
             "the envelope is not an object of exactly the four members")
        need(is_u64(env["agentmesh_answer"]) and env["agentmesh_answer"] == 1, "agentmesh_answer is not 1")
        payload, signer, sig = (b64u_decode(env[k]) for k in ("payload", "signer", "signature"))
        need(len(signer) == 32 and len(sig) == 64, "signer is not 32 bytes or signature not 64")
        need(len(payload) <= MAX_PAYLOAD, "the payload is over 8 MiB")
    except Invalid as e:
        fail("envelope", str(e))
        return done()
    sig_ok = key_problem(signer) is None and ed_verify(signer, sig, ANSWER_PREFIX + payload)
    if not sig_ok:                                   # 2. signature
        fail("signature", "the answer's signature does not verify with signer")
    if trust and signer not in trust:                # 3. untrusted_node
        fail("untrusted_node", f"signer {peer_id(signer)} is not a trusted node key")
    if not sig_ok:
        return done()                                # answers.md: parse only signed bytes
    try:
        p = parse_payload(payload)
    except Invalid as e:
        fail("envelope", str(e))
        return done()
    node, rq, res = p["node"], p["request"], p["results"]
    if node["peer_id"] != peer_id(signer):
        fail("envelope", f"node.peer_id is not the signer's peer id {peer_id(signer)}")
    want = sha256(f"{rq['method']} {rq['target']}\n{rq['body_sha256']}".encode()).hex()
    if p["request_hash"] != want:                    # 4. request
        fail("request", f"request_hash is not what request hashes to ({want})")
    if not HEX64.fullmatch(rq["body_sha256"]):
        fail("request", "request.body_sha256 is not a lowercase hex SHA-256")
    if req is not None:
        for name, mine in (("method", req[0]), ("target", strip_proof(req[1])),
                           ("body_sha256", sha256(req[2]).hex())):
            if rq[name] != mine:
                fail("request", f"request.{name} {rq[name][:200]!r} is not the one sent, {mine[:200]!r}")
    ck, probs = check_checkpoint(p["checkpoint"], node["log_origin"], signer)
    for pr in probs:                                 # 5. checkpoint
        fail("checkpoint", pr)
    if old is not None:
        oc, oprobs = check_checkpoint(old, node["log_origin"], signer)
        if oc is None or oprobs:
            fail("stale", "the old checkpoint is not this node's: " + "; ".join(oprobs))
        elif ck is not None and ck[0] < oc[0]:
            fail("stale", f"checkpoint size {ck[0]} is smaller than the old checkpoint's {oc[0]}")
        elif ck is not None and ck[0] == oc[0] and ck[1] != oc[1]:
            fail("stale", f"the old checkpoint has the same size {ck[0]} and another root: two histories")
    agents, shape = answer_agents(p["answer"])       # 6. results
    if agents is None:
        fail("results", "answer.candidates is not an array")
        agents = []
    ids = [a.get("id") if is_map(a) and is_str(a.get("id")) else None for a in agents]
    missing = [j for j, a in enumerate(ids) if a is None]
    if missing:                                      # one failure, however many (bounded output)
        fail("results", f"{len(missing)} agents of the answer have no id, the first at {missing[0]}")
    rids = [r["id"] for r in res]
    if ids != rids:
        k = next((k for k, (a, b) in enumerate(zip(ids, rids)) if a != b), min(len(ids), len(rids)))
        fail("results", f"{len(ids)} agents in the answer, {len(rids)} results; they differ from {k}")
    # A trust level is shown by summaries (a list, GET /agents/{id}/proof) and candidates.
    path = rq["target"].split("?")[0]
    shows_level = shape != "object" or re.fullmatch(r"/agents/[^/]+/proof", path) is not None
    for i, r in enumerate(res):                      # 7. each result
        level, rec, rsigner, rec_bytes = None, None, None, None
        try:
            rec_bytes = b64_decode(r["record"])
        except Invalid:
            fail("record", "record is not standard base64", i)
        if rec_bytes is not None:
            rec, rsigner, err = decode_record(rec_bytes)
            why = (f"record refused: {err}" if rec is None else
                   f"record is a {rec['type']}, not a descriptor" if rec["type"] != "descriptor" else
                   f"record is {rec['agent_id'][:80]!r}'s, not this id's"
                   if rec["agent_id"] != r["id"] else None)
            if why:
                fail("record", why, i)
                rec = None
        li, hashes = r["log_index"], r["inclusion"]
        if (li is None) != (hashes is None):
            fail("inclusion", "log_index and inclusion are not both null or both set", i)
        elif li is None and rsigner == signer:
            fail("inclusion", "a record the node signed carries no inclusion proof", i)
        elif li is not None and ck is not None and rec_bytes is not None:
            try:
                path_h = [b64_decode(h) for h in hashes]
                need(len(path_h) <= 64 and all(len(h) == 32 for h in path_h), "")
            except Invalid:
                fail("inclusion", "inclusion is not at most 64 base64 SHA-256 hashes", i)
            else:                                    # the entry is the record, or its sealed form
                entries = (rec_bytes, SEALED_PREFIX + sha256(rec_bytes))
                if li >= ck[0]:
                    fail("inclusion", f"log_index {li} is not below the checkpoint size {ck[0]}", i)
                elif not any(inclusion_ok(li, ck[0], sha256(b"\0" + e), path_h, ck[1]) for e in entries):
                    fail("inclusion", f"the audit path of entry {li} does not lead to the checkpoint root", i)
        if rec is not None:
            probs, ch_ok, enotes = evidence_problems(rec)
            dprobs, dnotes = dnssec_problems(rec, anchors)
            for pr in probs + dprobs:
                fail("evidence", pr, i)
            for nt in enotes + dnotes:
                note("unchecked", nt, i)
            counts = rsigner == signer or rsigner in p["trusted_signers"]
            # answers.md `trust_level`: unverified when not counted or when `evidence` failed
            level = level_of(rec["evidence"], ch_ok) if counts and not probs + dprobs else "unverified"
            agent = agents[i] if shows_level and i < len(ids) and ids[i] == r["id"] else None
            shown = agent.get("trust") if is_map(agent) else None
            if is_map(shown) and "level" in shown and shown["level"] != level:
                fail("trust_level", f"shown as {str(shown['level'])[:40]!r}; the evidence proves "
                     f"{level!r}" + ("" if counts else " (signed neither by the node nor a trusted signer)"), i)
        out.append({"id": r["id"], "level": level})
    return done()

def parse_key(s: str) -> bytes:
    """--trust KEY: b64u of 32 bytes, or an Ed25519 libp2p peer id."""
    try:
        k = b64u_decode(s)
        if len(k) == 32:
            return k
    except Invalid:
        pass
    return key_of_peer_id(s)

def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Check an agentmesh signed answer (docs/answers.md).")
    ap.add_argument("file", help="the answer, or - for stdin")
    ap.add_argument("--trust", action="append", default=[], metavar="KEY",
                    help="a trusted node key: b64u (32 bytes) or a 12D3KooW... peer id")
    ap.add_argument("--old-checkpoint", metavar="FILE", help="a checkpoint of the node seen before")
    ap.add_argument("--request-method", metavar="M")
    ap.add_argument("--request-target", metavar="T", help="path and query as sent")
    ap.add_argument("--request-body", metavar="FILE", help="the body sent (default: none)")
    ap.add_argument("--dnssec-anchor", action="append", default=[], metavar="FILE",
                    help="DNSSEC trust anchors besides the root's: DS or DNSKEY records in "
                         "zone-file syntax, or IANA's root-anchors.xml")
    a = ap.parse_args(argv)
    if (a.request_method is None) != (a.request_target is None) or (
            a.request_body is not None and a.request_method is None):
        ap.error("--request-method and --request-target go together (with --request-body)")
    try:
        trust = [parse_key(k) for k in a.trust]
    except Invalid as e:
        ap.error(f"--trust: {e}")
    def read(path: str, limit: int = -1) -> bytes:
        if path == "-":
            return sys.stdin.buffer.read(limit)
        with open(path, "rb") as f:
            return f.read(limit)
    try:
        raw = read(a.file, MAX_INPUT + 1)            # one byte more than allowed: refused
        old = None if a.old_checkpoint is None else read(a.old_checkpoint, 1 << 20).decode("utf-8")
        req = None if a.request_method is None else (
            a.request_method, a.request_target, b"" if a.request_body is None else read(a.request_body))
        anchor_texts = [(f, read(f, 1 << 20).decode("utf-8")) for f in a.dnssec_anchor]
    except (OSError, UnicodeDecodeError) as e:
        print(f"verify.py: cannot read: {e}", file=sys.stderr)
        return 2
    anchors: list[Anchor] = []
    for f, text in anchor_texts:
        try:
            anchors += read_anchors(text)
        except Invalid as e:
            ap.error(f"--dnssec-anchor {f}: {e}")
    try:
        report = verify(raw, trust, old, req, anchors)
    except Exception as e:  # noqa: BLE001 - a bug must reject the answer, never trace back
        report = {"ok": False, "results": [], "notes": [], "failures": [
            {"code": "envelope", "result": None, "message": f"checker error: {type(e).__name__}: {e}"}]}
    print(json.dumps(report, ensure_ascii=False))
    return 0 if report["ok"] else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
