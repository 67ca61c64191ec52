#!/usr/bin/env python3
"""Independent checker of agentmesh signed answers.

Written from docs/answers.md, proto/records.cddl and docs/protocol.md#log only
(never from the Rust sources), so that a misreading in either implementation shows.

  verify.py FILE|- [--trust KEY]... [--old-checkpoint FILE]
            [--request-method M --request-target T [--request-body FILE]]

Prints {"ok", "failures": [{"code", "result", "message"}], "results": [{"id", "level"}]}
and exits 0 when accepted, 1 on any failure, 2 on a usage error or an unreadable file.
Only `cryptography` is needed (Ed25519): records are decoded by the strict CBOR
reader below, since a general-purpose decoder hides duplicate keys, long heads and
trailing bytes, which records.cddl makes errors.
"""
from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
from typing import Any, TypeGuard

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

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
                                                   "challenge": is_map, "mutual_peer": is_bool},
                    optional="dnssec fingerprint challenge mutual_peer")   # "missing reads as false"
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
            "document": body["document"], "doc_sha256": body["doc_sha256"],
            "evidence": evidence}, signer, None

def evidence_problems(rec: dict[str, Any]) -> tuple[list[str], bool]:
    """answers.md check 7 `evidence`, and records.cddl's rule on which flags a format may
    carry (its bad_evidence). Returns the problems and whether a challenge verified."""
    ev, fmt, out, verified = rec["evidence"], rec["format"], [], False
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
        err = adp_challenge_problem(rec, ch)
        verified = err is None
        if err:
            out.append(f"challenge: {err}")
    return out, verified

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
           req: tuple[str, str, bytes] | None) -> dict[str, Any]:
    """All of answers.md "The checks"; every failure found is reported."""
    fails: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def fail(code: str, msg: str, i: int | None = None) -> None:
        fails.append({"code": code, "result": i, "message": msg})

    def done() -> dict[str, Any]:
        return {"ok": not fails, "failures": fails, "results": out}

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
            probs, ch_ok = evidence_problems(rec)
            for pr in probs:
                fail("evidence", pr, i)
            counts = rsigner == signer or rsigner in p["trusted_signers"]
            level = level_of(rec["evidence"], ch_ok) if counts else "unverified"
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
    except (OSError, UnicodeDecodeError) as e:
        print(f"verify.py: cannot read: {e}", file=sys.stderr)
        return 2
    try:
        report = verify(raw, trust, old, req)
    except Exception as e:  # noqa: BLE001 - a bug must reject the answer, never trace back
        report = {"ok": False, "results": [], "failures": [
            {"code": "envelope", "result": None, "message": f"checker error: {type(e).__name__}: {e}"}]}
    print(json.dumps(report, ensure_ascii=False))
    return 0 if report["ok"] else 1

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
