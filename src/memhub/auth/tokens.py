"""JWT bearer tokens (PyJWT): HS256 with a shared secret, RS256/ES256 with a public key or a JWKS file.

A token is accepted when its signature verifies with a configured key, it is within `nbf`..`exp`
(30 s leeway), its `aud` is the configured audience (a token with an `aud` is refused when no
audience is configured) and its `iss` the configured issuer, and its claims have their types
(`exp`/`nbf`/`iat` numbers, `aud` a string or strings, `iss` a string, the subject a non-blank
string without surrounding spaces); the principal is the configured claim (`sub` by default).
The reason a token was refused is returned for the audit log and the 401 answer; the token
itself is never logged. PyJWT (and the cryptography it loads) is imported by the verifier's
methods: a server without JWT authentication never imports it (issue 21 §6, cold start).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEEWAY_S = 30.0
ASYMMETRIC = ["RS256", "ES256"]


@dataclass(frozen=True)
class TokenCheck:
    subject: str | None  # the principal's name, None when refused
    reason: str = ""


def looks_like_jwt(value: str) -> bool:
    return value.count(".") == 2 and value.startswith("eyJ")


class JwtVerifier:
    def __init__(
        self,
        *,
        secret: str = "",
        public_key_file: str = "",
        jwks_file: str = "",
        audience: str = "",
        issuer: str = "",
        claim: str = "sub",
    ) -> None:
        self.secret = secret
        self.public_key: Any = None
        self.jwks: dict[str, Any] = {}
        if public_key_file:
            self.public_key = Path(public_key_file).expanduser().read_bytes()
        if jwks_file:
            self.jwks = _load_jwks(Path(jwks_file).expanduser())
        if not (secret or self.public_key or self.jwks):
            raise ValueError("a JWT verifier needs a secret, a public key or a JWKS file")
        self.audience = audience or None
        self.issuer = issuer or None
        self.claim = claim

    def _key(self, token: str) -> tuple[Any, list[str]]:
        import jwt

        header = jwt.get_unverified_header(token)
        alg = header.get("alg")
        if alg == "HS256" and self.secret:
            return self.secret, ["HS256"]
        if alg in ASYMMETRIC:
            kid = header.get("kid")
            if self.jwks:
                key = (
                    self.jwks.get(kid)
                    if kid
                    else next(iter(self.jwks.values()))
                    if len(self.jwks) == 1
                    else None
                )
                if key is not None:
                    return key, [str(alg)]
            if self.public_key is not None:
                return self.public_key, [str(alg)]
        raise jwt.InvalidAlgorithmError(f"no configured key for algorithm {alg}")

    def verify(self, token: str) -> TokenCheck:
        import jwt

        try:
            key, algorithms = self._key(token)
            claims = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp"]},
            )
        except jwt.ExpiredSignatureError:
            return TokenCheck(None, "token expired")
        except jwt.ImmatureSignatureError:
            return TokenCheck(None, "token not yet valid (nbf)")
        except jwt.InvalidAudienceError:
            return TokenCheck(None, "wrong audience")
        except jwt.InvalidIssuerError:
            return TokenCheck(None, "wrong issuer")
        except jwt.InvalidSignatureError:
            return TokenCheck(None, "bad signature")
        except (jwt.PyJWTError, ValueError, TypeError) as exc:  # a key of another type, say
            return TokenCheck(None, f"invalid token ({type(exc).__name__})")
        problem = claim_problem(claims, self.claim)
        if problem:
            return TokenCheck(None, f"invalid token ({problem})")
        return TokenCheck(claims[self.claim])


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def claim_problem(claims: dict[str, Any], claim: str) -> str:
    """Why the verified claims are not well-typed ("" when they are). PyJWT accepts a numeric
    string as `exp` and does not look at the type of `iss` when no issuer is configured."""
    for name in ("exp", "nbf", "iat"):
        if name in claims and not _number(claims[name]):
            return f"{name} must be a number"
    audience = claims.get("aud")
    if "aud" in claims and not (
        isinstance(audience, str)
        or (isinstance(audience, list) and all(isinstance(a, str) for a in audience))
    ):
        return "aud must be a string or a list of strings"
    if "iss" in claims and not isinstance(claims["iss"], str):
        return "iss must be a string"
    subject = claims.get(claim)
    if not isinstance(subject, str) or not subject.strip():
        return f"no {claim} claim"
    if subject != subject.strip() or len(subject) > 200 or not subject.isprintable():
        return f"{claim} must be at most 200 printable characters without surrounding spaces"
    return ""


def _load_jwks(path: Path) -> dict[str, Any]:
    from jwt.algorithms import ECAlgorithm, RSAAlgorithm

    data = json.loads(path.read_text(encoding="utf-8"))
    keys: dict[str, Any] = {}
    for index, jwk in enumerate(data.get("keys", [])):
        kty = jwk.get("kty")
        kid = str(jwk.get("kid", index))
        if kty == "RSA":
            keys[kid] = RSAAlgorithm.from_jwk(json.dumps(jwk))
        elif kty == "EC":
            keys[kid] = ECAlgorithm.from_jwk(json.dumps(jwk))
    if not keys:
        raise ValueError(f"{path} holds no RSA or EC key")
    return keys
