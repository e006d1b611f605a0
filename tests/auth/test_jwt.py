"""JWT bearer tokens over real HTTP: accepted (HS256, RS256 by JWKS, ES256 by PEM), refused when
expired, not yet valid, for another audience or issuer, or signed with another key; 401s are audited."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import RSAAlgorithm

from tests.helpers import MEMHUB, http_server
from tests.http import rpc
from tests.store.backends import Backend, rows

SECRET = "a-test-secret-of-at-least-32-bytes!!"
AUD, ISS = "memhub", "https://idp.example"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("keys")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(rsa_key.public_key()))
    (folder / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256"}]}))
    ec_key = ec.generate_private_key(ec.SECP256R1())
    pem = ec_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (folder / "ec.pem").write_bytes(pem)
    return {"rsa": rsa_key, "ec": ec_key, "jwks": folder / "jwks.json", "ec_pem": folder / "ec.pem"}


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, backend: Backend, keys: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    db = backend.url(tmp_path_factory.mktemp("jwt"), "m.db")
    env = {
        "MEMHUB_JWT_SECRET": SECRET,
        "MEMHUB_JWT_JWKS": str(keys["jwks"]),
        "MEMHUB_JWT_AUDIENCE": AUD,
        "MEMHUB_JWT_ISSUER": ISS,
    }
    with http_server(db, "--auth", "apikey", env=env) as base:
        yield base, db


def _claims(sub: str = "dave", **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": sub, "aud": AUD, "iss": ISS, "iat": now, "nbf": now - 5, "exp": now + 300, **extra}


def _whoami(base: str, token: str) -> tuple[int, Any, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    status, answer, _ = rpc.initialize(base, headers)
    if status != 200:
        return status, answer, None
    session = rpc.session(base, headers)
    _, _, result = rpc.call(base, session, "user", action="get_current")
    assert not result.get("isError"), result
    return status, answer, result["structuredContent"]["user_id"]


def test_valid_tokens_are_their_subject(server: tuple[str, str], keys: dict[str, Any]) -> None:
    base, _ = server
    hs = jwt.encode(_claims("dave"), SECRET, algorithm="HS256")
    rs = jwt.encode(_claims("erin"), keys["rsa"], algorithm="RS256", headers={"kid": "k1"})
    assert _whoami(base, hs)[::2] == (200, "dave")
    assert _whoami(base, rs)[::2] == (200, "erin")


def test_bad_tokens_are_401_and_audited(server: tuple[str, str], keys: dict[str, Any]) -> None:
    base, db = server
    other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    bad = {
        "token expired": jwt.encode(_claims(exp=int(time.time()) - 120), SECRET, algorithm="HS256"),
        "token not yet valid (nbf)": jwt.encode(
            _claims(nbf=int(time.time()) + 600), SECRET, algorithm="HS256"
        ),
        "wrong audience": jwt.encode(_claims(aud="someone-else"), SECRET, algorithm="HS256"),
        "wrong issuer": jwt.encode(_claims(iss="https://evil.example"), SECRET, algorithm="HS256"),
        "bad signature": jwt.encode(_claims(), "another-secret-of-at-least-32-bytes!", algorithm="HS256"),
        "bad signature ": jwt.encode(_claims(), other_rsa, algorithm="RS256", headers={"kid": "k1"}),
    }
    for reason, token in bad.items():
        status, answer, body = rpc.initialize(base, {"Authorization": f"Bearer {token}"})
        assert status == 401, reason
        assert answer["www-authenticate"].startswith("Bearer")
        assert json.loads(body)["error"]["message"] == reason.strip()
    # a successful write appends the deferred audit events of the refusals first
    hs = jwt.encode(_claims("dave"), SECRET, algorithm="HS256")
    session = rpc.session(base, {"Authorization": f"Bearer {hs}"})
    assert (
        rpc.call(base, session, "memory", action="store", content="after refusals", domain="user")[0] == 200
    )
    refused = rows(db, "SELECT detail FROM events WHERE tool = 'http.auth' AND outcome = 'unauthorized'")
    reasons = [json.loads(r[0])["reason"] for r in refused]
    assert {r.strip() for r in bad} <= set(reasons)
    assert not any(token in json.dumps(reasons) for token in bad.values())  # never the credential


def test_jwt_only_mode_refuses_api_keys(tmp_path: Path, backend: Backend, keys: dict[str, Any]) -> None:
    db = backend.url(tmp_path, "m.db")
    key = subprocess.run(
        [MEMHUB, "--db", str(db), "apikey", "create", "frank"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {"MEMHUB_JWT_PUBLIC_KEY": str(keys["ec_pem"]), "MEMHUB_JWT_CLAIM": "email"}
    with http_server(db, "--auth", "jwt", env=env) as base:
        assert rpc.initialize(base, {"X-API-Key": key})[0] == 401
        token = jwt.encode(
            {"email": "gina@example.com", "exp": int(time.time()) + 60}, keys["ec"], algorithm="ES256"
        )
        assert _whoami(base, token)[::2] == (200, "gina@example.com")
        with_aud = jwt.encode(
            {"email": "g", "aud": "x", "exp": int(time.time()) + 60}, keys["ec"], algorithm="ES256"
        )
        assert _whoami(base, with_aud)[0] == 401  # no audience configured: a token naming one is refused


def test_a_token_for_another_key_type_is_refused_not_a_crash(tmp_path: Path) -> None:
    """An RS256 key configured, a token claiming ES256 with an EC key: refused, not a 500."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    from memhub.auth.tokens import JwtVerifier

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = tmp_path / "rsa.pem"
    public.write_bytes(
        rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    token = jwt.encode(_claims(), ec.generate_private_key(ec.SECP256R1()), algorithm="ES256")
    check = JwtVerifier(public_key_file=str(public)).verify(token)
    assert check.subject is None and "invalid token" in check.reason


def _raw_token(claims: dict[str, Any]) -> str:
    """An HS256 token of exactly these claims (PyJWT's encoder refuses some wrong types)."""
    return jwt.api_jws.encode(json.dumps(claims).encode(), SECRET, algorithm="HS256")


def _refusal(base: str, token: str) -> str:
    status, _, body = rpc.initialize(base, {"Authorization": f"Bearer {token}"})
    assert status == 401, (status, body)
    reason: str = json.loads(body)["error"]["message"]
    return reason


def test_a_subject_never_becomes_a_local_principal(server: tuple[str, str]) -> None:
    """Issue 18, item 8: JWT subjects are their own namespace. The server's own user (alice,
    the store's admin, the only one with the vault), with or without spaces around it, and an
    API-key holder are refused; a new subject is a JWT user of its own."""
    base, db = server
    subprocess.run(
        [MEMHUB, "--db", str(db), "apikey", "create", "keyholder"],
        capture_output=True,
        check=True,
        timeout=30,
    )
    for subject in ("alice", " alice ", "keyholder"):
        token = jwt.encode(_claims(subject), SECRET, algorithm="HS256")
        assert "principal" in _refusal(base, token) or "spaces" in _refusal(base, token), subject
    assert _whoami(base, jwt.encode(_claims("hank"), SECRET, algorithm="HS256"))[::2] == (200, "hank")
    kinds = dict(rows(db, "SELECT id, kind FROM principals WHERE id IN ('alice', 'hank')"))
    assert kinds == {"alice": "user", "hank": "agent"}


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": "9999999999"},
        {"exp": True},
        {"nbf": "0"},
        {"iat": "now"},
        {"sub": 42},
        {"sub": ["dave"]},
        {"sub": "   "},
        {"sub": " root "},
        {"sub": "dave\n"},
        {"iss": [ISS]},
    ],
    ids=["exp-string", "exp-bool", "nbf-string", "iat-string", "sub-number", "sub-list", "sub-blank",
         "sub-spaces", "sub-newline", "iss-list"],
)  # fmt: skip
def test_claims_must_have_their_types(server: tuple[str, str], claims: dict[str, Any]) -> None:
    base, _ = server
    reason = _refusal(base, _raw_token({**_claims("dave"), **claims}))
    assert reason.startswith(("invalid token", "wrong issuer", "token expired")), reason


def test_claim_types_without_issuer_or_audience(tmp_path: Path, backend: Backend) -> None:
    """With no issuer configured PyJWT does not look at `iss`: memhub does."""
    db = backend.url(tmp_path, "m.db")
    with http_server(db, "--auth", "jwt", env={"MEMHUB_JWT_SECRET": SECRET}) as base:
        exp = int(time.time()) + 60
        assert (
            _refusal(base, _raw_token({"sub": "ivy", "exp": exp, "iss": 7}))
            == "invalid token (iss must be a string)"
        )
        assert _refusal(base, jwt.encode({"sub": "ivy", "exp": str(exp)}, SECRET, algorithm="HS256"))
        token = jwt.encode({"sub": "ivy", "exp": exp, "iss": "x"}, SECRET, algorithm="HS256")
        assert _whoami(base, token)[::2] == (200, "ivy")
