"""Mints the JWTs of tests/access.rs's PyJWT test with PyJWT, an
implementation independent of the node's: an RSA and an EC P-256 key of
its own making, their JWKS, and tokens signed with them, good and bad.

Usage: pyjwt_mint.py ISSUER AUDIENCE NOW
Prints one JSON object: {"jwks": {...}, "tokens": {name: token}}.
"""

import json
import sys

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


def public_jwk(algorithm, key, kid, alg):
    jwk = json.loads(algorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "alg": alg, "use": "sig"})
    return jwk


def main():
    issuer, audience, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": "py-client",
        "iat": now,
        "exp": now + 600,
        "scope": "openid register read",
    }

    def mint(key, alg, kid, **changes):
        return jwt.encode({**claims, **changes}, key, algorithm=alg, headers={"kid": kid})

    tokens = {
        "rs256": mint(rsa_key, "RS256", "rsa-1"),
        "es256": mint(ec_key, "ES256", "ec-1"),
        "ps256": mint(rsa_key, "PS256", "rsa-pss"),
        "wrong_audience": mint(rsa_key, "RS256", "rsa-1", aud="someone-else"),
        "wrong_issuer": mint(rsa_key, "RS256", "rsa-1", iss="https://elsewhere.test/"),
        "expired": mint(rsa_key, "RS256", "rsa-1", iat=now - 7200, exp=now - 3600),
        "not_yet_valid": mint(rsa_key, "RS256", "rsa-1", nbf=now + 3600),
        "no_subject": jwt.encode(
            {k: v for k, v in claims.items() if k != "sub"},
            rsa_key,
            algorithm="RS256",
            headers={"kid": "rsa-1"},
        ),
        "bad_signature": mint(impostor, "RS256", "rsa-1"),
        "hmac": jwt.encode(claims, "a shared secret of the impostor, long enough", algorithm="HS256",
                           headers={"kid": "rsa-1"}),
        "none": jwt.encode(claims, None, algorithm="none", headers={"kid": "rsa-1"}),
    }
    jwks = {
        "keys": [
            public_jwk(RSAAlgorithm, rsa_key, "rsa-1", "RS256"),
            public_jwk(RSAAlgorithm, rsa_key, "rsa-pss", "PS256"),
            public_jwk(ECAlgorithm, ec_key, "ec-1", "ES256"),
        ]
    }
    print(json.dumps({"jwks": jwks, "tokens": tokens}))


if __name__ == "__main__":
    main()
