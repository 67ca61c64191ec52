#!/usr/bin/env python3
"""Build signed-answer test vectors and check tests/answers/verify.py against them.

Written from docs/answers.md, proto/records.cddl and docs/protocol.md#log, not from
the Rust code. Deterministic: fixed keys, fixed times, Ed25519 is deterministic.

  make_vectors.py [--out DIR] [--no-run]      (DIR defaults to a new temporary directory)

Writes DIR/<name>.json (the answers), the auxiliary files they need and
DIR/manifest.json ([{name, file, args, ok, codes}]: `codes` is the exact set of
failure codes a checker must report), then runs verify.py on each vector.
Exit 0 when every outcome is the expected one.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
from typing import Any, Callable

import cbor2
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

HERE = pathlib.Path(__file__).resolve().parent
T0 = 1765000000                     # the answers' time, Unix seconds


def H(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def key(label: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(H(b"agentmesh answer vectors: " + label.encode()))


def pub(sk: Ed25519PrivateKey) -> bytes:
    return sk.public_key().public_bytes_raw()


def b64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def peer_id(pk: bytes) -> str:
    """base58btc(0x00 0x24 || protobuf PublicKey{Type: Ed25519, Data: pk})."""
    alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    digits, data = [0], bytes([0x00, 0x24, 0x08, 0x01, 0x12, 0x20]) + pk
    for byte in data:                            # schoolbook base conversion, base 256 -> 58
        carry = byte
        for j in range(len(digits)):
            carry += digits[j] << 8
            digits[j], carry = carry % 58, carry // 58
        while carry:
            digits.append(carry % 58)
            carry //= 58
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(alphabet[d] for d in reversed(digits)).lstrip("1")


# Pinned by the libp2p peer-id spec's Ed25519 test key.
assert peer_id(bytes.fromhex("1ed1e8fae2c4a144b8be8fd4b47bf3d3b34b871c3cacf6010f0e42d474fce27e")) \
    == "12D3KooWBtg3aaRMjxwedh83aGiUkwSxDwUZkzuJcfaqUmo7R3pq"

NODE, PEER, STRANGER = key("node"), key("trusted peer"), key("stranger")
ALICE, BOB, MALLORY = key("agent alice"), key("agent bob"), key("agent mallory")
GRACE = key("agent grace")
NODE_ID = peer_id(pub(NODE))
ORIGIN = "agentmesh/" + NODE_ID


# ------------------------------------------------------------------ records (records.cddl)
def adp_document(agent_id: str, name: str, agent_key: bytes) -> str:
    """An ADP-shaped document carrying identity.publicKey.full / fingerprint."""
    return json.dumps({"adp": "1.0", "id": agent_id, "name": name, "identity": {"publicKey": {
        "full": b64u(agent_key), "fingerprint": "ed25519:" + H(agent_key).hex()}}},
        separators=(",", ":"))


def challenge(doc: str, agent_id: str, signer: Ed25519PrivateKey, verifier: str = NODE_ID,
              unix_ms: int = T0 * 1000 - 5000, rand: bytes = bytes(range(16))) -> dict[str, Any]:
    """The ADP challenge proof: the agent signs the handshake over the nonce N."""
    nonce = H(H(doc.encode()) + verifier.encode() + unix_ms.to_bytes(8, "big") + rand).hex()
    sig = signer.sign(b"ADP/1.0 handshake\n" + f"{nonce}\n{agent_id}\n{verifier}".encode())
    return {"verifier": verifier, "unix_ms": unix_ms, "rand": rand, "signature": sig}


def descriptor(signer: Ed25519PrivateKey, agent_id: str, name: str, fmt: str, document: str,
               dnssec: bool = False, fingerprint: bool = False,
               chal: dict[str, Any] | None = None, mutual: bool = False,
               seq: int = T0 * 1000 - 60000) -> bytes:
    """An encoded descriptor SignedRecord; every map in the order records.cddl lists."""
    desc = {"id": agent_id, "name": name, "description": f"{name}, a test agent",
            "version": "1.0.0", "endpoint": f"https://{name.lower()}.example/agent",
            "capabilities": ["search"], "tags": ["test"], "languages": ["en"], "format": fmt}
    ev: dict[str, Any] = {"dnssec": dnssec, "fingerprint": fingerprint}
    if chal is not None:
        ev["challenge"] = chal
    ev["mutual_peer"] = mutual
    payload = cbor2.dumps({"agent_id": agent_id, "seq": seq, "issued_at": T0 - 60,
                           "expires_at": T0 + 86400 * 30, "descriptor": desc, "document": document,
                           "doc_sha256": H(document.encode()), "evidence": ev})
    return envelope("descriptor", payload, signer)


def envelope(rtype: str, payload: bytes, signer: Ed25519PrivateKey) -> bytes:
    sig = signer.sign(b"agentmesh/record/v1\n" + rtype.encode() + b"\n" + payload)
    raw = cbor2.dumps({"type": rtype, "payload": payload, "signer": pub(signer), "signature": sig})
    # Hand-check the head: a map of 4 whose first key is "type" (cbor2 must not sort).
    assert raw[:6] == b"\xa4\x64type", raw[:6]
    return raw


def aidip(signer: Ed25519PrivateKey, agent_id: str, name: str, **kw: Any) -> bytes:
    doc = json.dumps({"aidip": "1.0", "id": agent_id, "name": name}, separators=(",", ":"))
    return descriptor(signer, agent_id, name, "aidip", doc, **kw)


def adp(signer: Ed25519PrivateKey, agent_id: str, name: str, agent: Ed25519PrivateKey,
        chal_signer: Ed25519PrivateKey | None = None, **kw: Any) -> bytes:
    doc = adp_document(agent_id, name, pub(agent))
    return descriptor(signer, agent_id, name, "adp", doc, fingerprint=True,
                      chal=challenge(doc, agent_id, chal_signer or agent), **kw)


def tombstone(signer: Ed25519PrivateKey, agent_id: str) -> bytes:
    payload = cbor2.dumps({"agent_id": agent_id, "seq": T0 * 1000, "issued_at": T0 - 30,
                           "reason": "deleted"})
    return envelope("tombstone", payload, signer)


# ------------------------------------------------------------------ the log (RFC 6962 2.1)
def mth(d: list[bytes]) -> bytes:
    if not d:
        return H(b"")
    if len(d) == 1:
        return H(b"\x00" + d[0])
    k = 1 << ((len(d) - 1).bit_length() - 1)        # largest power of two below len(d)
    return H(b"\x01" + mth(d[:k]) + mth(d[k:]))


def audit_path(m: int, d: list[bytes]) -> list[bytes]:
    """RFC 6962 PATH(m, D[n]), leaf to root."""
    if len(d) <= 1:
        return []
    k = 1 << ((len(d) - 1).bit_length() - 1)
    return audit_path(m, d[:k]) + [mth(d[k:])] if m < k else audit_path(m - k, d[k:]) + [mth(d[:k])]


def sealed(rec: bytes) -> bytes:
    return b"agentmesh/sealed/v1\n" + H(rec)


def checkpoint(size: int, root: bytes, sk: Ed25519PrivateKey = NODE, origin: str = ORIGIN,
               extra: str = "") -> str:
    """A C2SP signed note: text, blank line, "— name base64(key id || signature)"."""
    text = f"{origin}\n{size}\n{b64(root)}\n{extra}"
    key_id = H(origin.encode() + b"\n\x01" + pub(sk))[:4]
    return text + "\n\u2014 " + origin + " " + b64(key_id + sk.sign(text.encode())) + "\n"


# The agents. NODE signs most; PEER (a trusted signer) carol; STRANGER dave.
R = {
    "weather-bot": aidip(NODE, "weather-bot", "Weather"),
    "agent:alice.example": adp(NODE, "agent:alice.example", "Alice", ALICE),
    "hidden-bot": aidip(NODE, "hidden-bot", "Hidden"),
    "agent:bob.example": adp(NODE, "agent:bob.example", "Bob", BOB, mutual=True),
    "dns-aid:carol.example": descriptor(PEER, "dns-aid:carol.example", "Carol", "dns-aid",
                                        '{"carol":1}', dnssec=True),
    "a2a:dave.example": descriptor(STRANGER, "a2a:dave.example", "Dave", "a2a", '{"dave":1}',
                                   dnssec=True, fingerprint=True),
    # ADP allows a document naming its key by fingerprint only: the challenge is then
    # the attesting key's word (answers.md: a note, not a failure)
    "agent:grace.example": descriptor(
        PEER, "agent:grace.example", "Grace", "adp",
        (grace := json.dumps({"adp": "1.0", "id": "agent:grace.example", "name": "Grace",
                              "identity": {"publicKey": {"fingerprint": "ed25519:"
                                                         + H(pub(GRACE)).hex()}}},
                             separators=(",", ":"))),
        fingerprint=True, chal=challenge(grace, "agent:grace.example", GRACE)),
    # the node's lies, signed and logged by it:
    "agent:mallory.example": adp(NODE, "agent:mallory.example", "Mallory", MALLORY, chal_signer=BOB),
    "frank-bot": descriptor(NODE, "frank-bot", "Frank", "aidip", '{"frank":1}', fingerprint=True,
                            chal=challenge('{"frank":1}', "frank-bot", MALLORY)),
    "agent:erin.example": descriptor(NODE, "agent:erin.example", "Erin", "adp",
                                     adp_document("agent:erin.example", "Erin", pub(MALLORY)),
                                     mutual=True),
}
LEVEL = {"weather-bot": "unverified", "agent:alice.example": "key-verified",
         "hidden-bot": "unverified", "agent:bob.example": "peer-verified",
         "dns-aid:carol.example": "dns-verified", "a2a:dave.example": "unverified",
         "agent:mallory.example": "unverified", "frank-bot": "unverified",
         "agent:erin.example": "unverified", "agent:grace.example": "key-verified"}
# The node's log: its own records (hidden-bot sealed), tombstones and other agents.
ENTRIES = [tombstone(NODE, "old-bot"), R["weather-bot"], aidip(NODE, "calendar-bot", "Calendar"),
           R["agent:alice.example"], sealed(R["hidden-bot"]), R["agent:bob.example"],
           R["agent:mallory.example"], R["frank-bot"], R["agent:erin.example"],
           aidip(NODE, "notes-bot", "Notes")]
INDEX = {aid: next(i for i, e in enumerate(ENTRIES) if e in (rec, sealed(rec)))
         for aid, rec in R.items() if any(e in (rec, sealed(rec)) for e in ENTRIES)}
OLD_SIZE = 5
CKPT = checkpoint(len(ENTRIES), mth(ENTRIES))
OLD_CKPT = checkpoint(OLD_SIZE, mth(ENTRIES[:OLD_SIZE]))


# ------------------------------------------------------------------ answers (answers.md)
def result(aid: str) -> dict[str, Any]:
    i = INDEX.get(aid)
    return {"id": aid, "record": b64(R[aid]), "log_index": i,
            "inclusion": None if i is None else [b64(h) for h in audit_path(i, ENTRIES)]}


def summary(aid: str, level: str | None = None) -> dict[str, Any]:
    return {"id": aid, "name": aid.split(":")[-1], "trust": {"level": level or LEVEL[aid]}}


def payload(answer: Any, ids: list[str], method: str = "POST", target: str = "/agents/search",
            body: bytes = b"", ckpt: str = CKPT) -> dict[str, Any]:
    bsha = H(body).hex()
    return {"v": 1, "node": {"peer_id": NODE_ID, "log_origin": ORIGIN}, "time": T0,
            "request": {"method": method, "target": target, "body_sha256": bsha},
            "request_hash": H(f"{method} {target}\n{bsha}".encode()).hex(),
            "checkpoint": ckpt, "trusted_signers": [b64u(pub(PEER))], "answer": answer,
            "results": [result(a) for a in ids]}


def sign(p: dict[str, Any] | bytes, sk: Ed25519PrivateKey = NODE) -> bytes:
    data = p if isinstance(p, bytes) else json.dumps(p, separators=(",", ":")).encode()
    return json.dumps({"agentmesh_answer": 1, "payload": b64u(data), "signer": b64u(pub(sk)),
                       "signature": b64u(sk.sign(b"agentmesh/answer/v1\n" + data))}).encode()


SEARCH_BODY = b'{"text":"test agents","limit":10}'
SEARCH_IDS = ["weather-bot", "agent:alice.example", "hidden-bot", "agent:bob.example",
              "dns-aid:carol.example", "a2a:dave.example"]


def search(ids: list[str] = SEARCH_IDS, levels: dict[str, str] | None = None) -> dict[str, Any]:
    """A search answer; `levels` overrides the level an agent is shown with."""
    return payload([summary(a, (levels or {}).get(a)) for a in ids], ids, body=SEARCH_BODY)


def edit(p: dict[str, Any], f: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    p = json.loads(json.dumps(p))
    f(p)
    return p


def changed_record(aid: str) -> str:
    """The record with one payload byte changed (the name), its signature left as it was."""
    raw = bytearray(R[aid])
    i = raw.index(b"Alice")
    raw[i] = ord("M")
    return b64(bytes(raw))


def swap_records(p: dict[str, Any]) -> None:
    a, b = p["results"][0], p["results"][1]
    for k in ("record", "log_index", "inclusion"):
        a[k], b[k] = b[k], a[k]


def non_canonical_carol(p: dict[str, Any]) -> None:
    env = cbor2.loads(R["dns-aid:carol.example"])           # same signature, keys sorted
    p["results"][4]["record"] = b64(cbor2.dumps(dict(sorted(env.items()))))


def vectors() -> list[tuple[str, bytes, list[str], set[str]]]:
    """(name, answer bytes, extra arguments, expected failure codes)."""
    trust = ["--trust", NODE_ID]
    req = ["--request-method", "POST", "--request-target", "/agents/search?proof=true",
           "--request-body", "search_body.json"]
    ok = search()
    resolve_ids = ["agent:alice.example", "dns-aid:carol.example"]
    stale = search()
    stale["checkpoint"] = OLD_CKPT
    v: list[tuple[str, bytes, list[str], set[str]]] = [
        ("ok_search", sign(ok), trust + req + ["--old-checkpoint", "old_checkpoint.txt"], set()),
        ("ok_list", sign(payload([summary(a) for a in SEARCH_IDS[:3]], SEARCH_IDS[:3], "GET",
                                 "/agents?limit=3")), trust, set()),
        ("ok_get_document", sign(payload(json.loads(adp_document("agent:alice.example", "Alice",
                                 pub(ALICE))), ["agent:alice.example"], "GET",
                                 "/agents/agent:alice.example")), [], set()),
        ("ok_proof_summary", sign(payload(summary("agent:bob.example"), ["agent:bob.example"],
                                          "GET", "/agents/agent:bob.example/proof")), [], set()),
        ("ok_resolve", sign(payload({"candidates": [summary(a) for a in resolve_ids], "total": 2},
                                    resolve_ids, body=b'{"capability":"search"}',
                                    target="/resolve")), [], set()),
        ("ok_empty", sign(payload([], [], body=SEARCH_BODY)), [], set()),
        # the node's own lies, re-signed by it
        ("record_field_changed", sign(edit(ok, lambda p: p["results"][1].update(
            record=changed_record("agent:alice.example")))), [], {"record", "inclusion"}),
        ("result_dropped", sign(edit(ok, lambda p: p["results"].pop(1))), [], {"results"}),
        ("result_added", sign(edit(ok, lambda p: p["results"].append(result("weather-bot")))),
         [], {"results"}),
        ("records_swapped", sign(edit(ok, swap_records)), [], {"record"}),
        ("results_reordered", sign(edit(ok, lambda p: p["results"].reverse())), [], {"results"}),
        ("stale_checkpoint", sign(stale), [], {"inclusion"}),
        ("stale_checkpoint_vs_old", sign(stale), ["--old-checkpoint", "new_checkpoint.txt"],
         {"inclusion", "stale"}),
        ("fork_same_size", sign(ok), ["--old-checkpoint", "fork_checkpoint.txt"], {"stale"}),
        ("forged_trust_level", sign(search(levels={"weather-bot": "key-verified"})), [], {"trust_level"}),
        ("untrusted_signer_shown_verified", sign(search(levels={"a2a:dave.example": "dns-verified"})),
         [], {"trust_level"}),
        ("forged_challenge", sign(search(SEARCH_IDS + ["agent:mallory.example"],
                                         {"agent:mallory.example": "key-verified"})),
         [], {"evidence", "trust_level"}),
        ("challenge_on_aidip", sign(search(SEARCH_IDS + ["frank-bot"], {"frank-bot": "key-verified"})),
         [], {"evidence", "trust_level"}),
        ("challenge_key_by_fingerprint_only", sign(search(SEARCH_IDS + ["agent:grace.example"])),
         [], set()),
        ("mutual_peer_without_challenge", sign(search(["agent:erin.example"])), [], {"evidence"}),
        ("node_record_without_proof", sign(edit(ok, lambda p: p["results"][0].update(
            log_index=None, inclusion=None))), [], {"inclusion"}),
        ("non_canonical_record", sign(edit(ok, non_canonical_carol)), [], {"record"}),
        ("tombstone_as_result", sign(edit(ok, lambda p: p["results"][0].update(
            record=b64(ENTRIES[0])))), [], {"record", "inclusion"}),
        ("bad_request_hash", sign(edit(ok, lambda p: p.update(request_hash="0" * 64))), [], {"request"}),
        ("other_request", sign(ok), trust + req[:4] + ["--request-body", "old_checkpoint.txt"],
         {"request"}),
        ("checkpoint_wrong_key", sign(edit(ok, lambda p: p.update(
            checkpoint=checkpoint(len(ENTRIES), mth(ENTRIES), sk=PEER)))), [], {"checkpoint"}),
        ("checkpoint_extension_line", sign(edit(ok, lambda p: p.update(checkpoint=checkpoint(
            len(ENTRIES), mth(ENTRIES), extra="ext\n")))), [], {"checkpoint"}),
        ("peer_id_mismatch", sign(edit(ok, lambda p: p["node"].update(
            peer_id=peer_id(pub(STRANGER))))), [], {"envelope"}),
        # not re-signed, or not the node's answer
        ("not_resigned", json.dumps(dict(json.loads(sign(ok)), payload=b64u(json.dumps(
            edit(ok, lambda p: p.update(time=T0 + 1)), separators=(",", ":")).encode()))).encode(),
         [], {"signature"}),
        ("untrusted_node", sign(ok), ["--trust", b64u(pub(PEER))], {"untrusted_node"}),
        # hostile input
        ("not_json", b"\xff{not json", [], {"envelope"}),
        ("deep_json", b"[" * 100000 + b"]" * 100000, [], {"envelope"}),
        ("duplicate_member", b'{"agentmesh_answer":1,"agentmesh_answer":1,"payload":"","signer":"","signature":""}',
         [], {"envelope"}),
        ("answer_flag_true", sign(ok).replace(b'"agentmesh_answer": 1', b'"agentmesh_answer": true'),
         [], {"envelope"}),
        ("bad_base64_signer", sign(ok).replace(b'"signer": "', b'"signer": "*'), [], {"envelope"}),
        ("payload_wrong_types", sign(edit(ok, lambda p: p.update(results={"a": 1}))), [], {"envelope"}),
        ("payload_not_json", sign(b"\x00\x01 not json"), [], {"envelope"}),
        ("record_garbage", sign(edit(ok, lambda p: p["results"][4].update(record="////"))), [], {"record"}),
        ("record_deep_cbor", sign(edit(ok, lambda p: p["results"][4].update(
            record=b64(b"\x81" * 5000)))), [], {"record"}),
        ("record_trailing_bytes", sign(edit(ok, lambda p: p["results"][4].update(
            record=b64(R["dns-aid:carol.example"] + b"\x00")))), [], {"record"}),
        ("too_large", b" " * (12 << 20), [], {"envelope"}),
    ]
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="where to write the vectors (default: a new temporary directory)")
    ap.add_argument("--no-run", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.out or tempfile.mkdtemp(prefix="answer-vectors-"))
    print(f"vectors in {out}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "search_body.json").write_bytes(SEARCH_BODY)
    (out / "old_checkpoint.txt").write_text(OLD_CKPT)
    (out / "new_checkpoint.txt").write_text(CKPT)
    fork = ENTRIES[:-1] + [aidip(NODE, "other-bot", "Other")]
    (out / "fork_checkpoint.txt").write_text(checkpoint(len(fork), mth(fork)))
    manifest: list[dict[str, Any]] = []
    failed = 0
    for name, data, args, codes in vectors():
        (out / f"{name}.json").write_bytes(data)
        manifest.append({"name": name, "file": f"{name}.json", "args": args, "ok": not codes,
                         "codes": sorted(codes)})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if a.no_run:
        return 0
    for m in manifest:
        p = subprocess.run([sys.executable, str(HERE / "verify.py"), m["file"], *m["args"]],
                           cwd=out, capture_output=True, text=True)
        try:
            rep = json.loads(p.stdout)
            got = {f["code"] for f in rep["failures"]}
        except (ValueError, KeyError, TypeError):
            rep, got = None, {"<no report>"}
        good = got == set(m["codes"]) and p.returncode == (0 if m["ok"] else 1)
        failed += not good
        print(f"{'PASS' if good else 'FAIL'} {m['name']:34} exit {p.returncode} codes {sorted(got)}"
              + ("" if good else f" (expected {m['codes']}) {p.stderr[-300:]}"))
        if not good and rep:
            for f in rep["failures"]:
                print(f"      {f}")
    # usage errors: exit 2
    for args in (["missing.json"], ["ok_search.json", "--trust", "nonsense"],
                 ["ok_search.json", "--request-method", "GET"]):
        p = subprocess.run([sys.executable, str(HERE / "verify.py"), *args], cwd=out,
                           capture_output=True, text=True)
        good = p.returncode == 2
        failed += not good
        print(f"{'PASS' if good else 'FAIL'} usage {' '.join(args):40} exit {p.returncode}")
    print(f"{len(manifest) + 3 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
