"""A policy (seed 000 §2.6): scopes, boundary classes and retrieval parameters.

Policies arrive as YAML. `parse` reads them with PyYAML's safe loader (plain data only: no
tags, no object construction, no aliases), then validates the result against `PolicyDoc`:
unknown keys, wrong types and out-of-range values reject the whole policy. Nothing about a
policy is ever "allow all": a boundary class a policy leaves out is allowed to nobody, and
`secret` is never released whatever a policy says.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memhub.core.errors import conflict, invalid

ScopeName = Literal["session", "project", "principle"]
ClassName = Literal["public", "internal", "pii", "secret"]
KindName = Literal["fact", "preference", "task", "policy_hint"]
SCOPES: tuple[ScopeName, ...] = ("session", "project", "principle")
CLASSES: tuple[ClassName, ...] = ("public", "internal", "pii", "secret")
KINDS: tuple[KindName, ...] = ("fact", "preference", "task", "policy_hint")
REDACTABLE = ("email", "phone")  # what a class's `redact` list may name (secrets are always redacted)
MAX_DEPTH = 12
_TTL = re.compile(r"^(\d{1,6})([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_SEMVER = re.compile(r"^(0|[1-9]\d{0,5})\.(0|[1-9]\d{0,5})(?:\.(0|[1-9]\d{0,5}))?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def ttl_seconds(ttl: str) -> float:
    """'7d' -> 604800.0; 'inf' -> math.inf. Raises ValueError."""
    if ttl == "inf":
        return math.inf
    match = _TTL.match(ttl)
    if not match:
        raise ValueError("ttl must be 'inf' or a number with a unit s, m, h, d or w (e.g. '7d')")
    return float(int(match.group(1)) * _UNITS[match.group(2)])


class ScopeRule(_Strict):
    ttl: str = "inf"
    max_tokens: int = Field(default=50_000, ge=1, le=10_000_000)

    @field_validator("ttl", mode="before")
    @classmethod
    def _ttl(cls, value: Any) -> str:
        text = str(value).strip()
        ttl_seconds(text)
        return text

    @property
    def ttl_delta(self) -> timedelta | None:
        seconds = ttl_seconds(self.ttl)
        return None if math.isinf(seconds) else timedelta(seconds=seconds)


class BoundaryRule(_Strict):
    allow: tuple[str, ...] = ()
    redact: tuple[Literal["email", "phone"], ...] = ()
    escalation: Literal["deny", "human_review"] = "deny"

    @field_validator("allow")
    @classmethod
    def _tags(cls, tags: tuple[str, ...]) -> tuple[str, ...]:
        for tag in tags:
            if not tag or len(tag) > 100 or any(c.isspace() for c in tag):
                raise ValueError("allow tags are non-empty words such as 'answer:task' or 'tool:*'")
            if "*" in tag and tag != "*" and not (tag.endswith(":*") and tag.count("*") == 1):
                raise ValueError(f"wildcards are '*' or 'prefix:*', not {tag!r}")
        return tags


class Hybrid(_Strict):
    alpha: float = Field(default=0.5, ge=0.0, le=1.0)
    k_txt: int = Field(default=48, ge=0, le=1000)
    k_vec: int = Field(default=96, ge=0, le=1000)
    k_final: int = Field(default=50, ge=1, le=1000)


class Recency(_Strict):
    half_life_days_by_kind: dict[KindName, float] = Field(default_factory=dict)

    @field_validator("half_life_days_by_kind")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        if any(not (0 < days < 1e6) for days in value.values()):
            raise ValueError("half-lives are positive numbers of days")
        return value


class Rerank(_Strict):
    use_quality: bool = True
    recency_half_life_days: float = Field(default=30.0, gt=0, lt=1e6)
    recency: Recency = Field(default_factory=Recency)

    def half_life(self, kind: str) -> float:
        return float(self.recency.half_life_days_by_kind.get(kind, self.recency_half_life_days))  # type: ignore[call-overload]


class Retrieval(_Strict):
    hybrid: Hybrid = Field(default_factory=Hybrid)
    rerank: Rerank = Field(default_factory=Rerank)


class PolicyDoc(_Strict):
    version: str
    scopes: dict[ScopeName, ScopeRule]
    boundary_classes: dict[ClassName, BoundaryRule]
    retrieval: Retrieval = Field(default_factory=Retrieval)

    @field_validator("version", mode="before")
    @classmethod
    def _version(cls, value: Any) -> str:
        text = str(value).strip() if isinstance(value, str | int | float) else ""
        if not _SEMVER.match(text):
            raise ValueError("version is MAJOR.MINOR or MAJOR.MINOR.PATCH (quote it: version: '0.1')")
        return text

    @field_validator("boundary_classes")
    @classmethod
    def _secret_stays_secret(cls, value: dict[str, BoundaryRule]) -> dict[str, BoundaryRule]:
        secret = value.get("secret")
        if secret is not None and secret.allow:
            raise ValueError("secret is never released: its allow list must be empty")
        return value

    def scope(self, name: str) -> ScopeRule:
        found: ScopeRule | None = self.scopes.get(name)  # type: ignore[call-overload]
        return found if found is not None else DEFAULT_SCOPES[name]

    def boundary(self, name: str) -> BoundaryRule:
        found: BoundaryRule | None = self.boundary_classes.get(name)  # type: ignore[call-overload]
        return found if found is not None else BoundaryRule()


@dataclass(frozen=True)
class Policy:
    """The policy in force: its stored version (semver) and its document."""

    version: str
    doc: PolicyDoc
    builtin: bool = False


DEFAULT_YAML = """\
# memhub's built-in policy: in force until a policy is applied (never "allow all")
version: '0.0'
scopes:
  session:   { ttl: '7d',   max_tokens: 20000 }
  project:   { ttl: '120d', max_tokens: 50000 }
  principle: { ttl: 'inf',  max_tokens: 100000 }
boundary_classes:
  public:   { allow: ['*'] }
  internal: { allow: ['answer:task', 'tool:*'] }
  pii:      { allow: ['tool:contact-lookup'], redact: ['email', 'phone'], escalation: 'human_review' }
  secret:   { allow: [], escalation: 'deny' }
retrieval:
  hybrid: { alpha: 0.5, k_txt: 48, k_vec: 96, k_final: 50 }
  rerank:
    use_quality: true
    recency_half_life_days: 30
    recency:
      half_life_days_by_kind: { fact: 120, task: 14, preference: 90, policy_hint: 365 }
"""
DEFAULT_VERSION = "0.0.0"


def _no_aliases_or_tags(text: str) -> None:
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, yaml.AliasToken | yaml.AnchorToken):
                raise invalid("policy YAML may not use anchors or aliases (&, *)")
            if isinstance(token, yaml.TagToken):
                raise invalid("policy YAML may not use tags (!!python/..., !custom)")
    except yaml.YAMLError as exc:
        raise invalid(f"policy is not valid YAML: {_yaml_where(exc)}") from None


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else str(problem)


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "policy"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {'unknown key' if err['type'] == 'extra_forbidden' else msg}")
    return "; ".join(parts[:8])


def parse(text: str) -> PolicyDoc:
    """Parse and validate policy YAML; raises MemhubError(INVALID) naming what is wrong."""
    _no_aliases_or_tags(text)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise invalid(f"policy is not valid YAML: {_yaml_where(exc)}") from None
    if not isinstance(data, dict):
        raise invalid("policy must be a YAML mapping with version, scopes and boundary_classes")
    if _depth(data) > MAX_DEPTH:
        raise invalid("policy is nested too deeply")
    try:
        return PolicyDoc.model_validate(data)
    except ValidationError as exc:
        raise invalid(f"policy does not match the schema: {_pydantic_message(exc)}") from None


DEFAULT_DOC = PolicyDoc.model_validate(yaml.safe_load(DEFAULT_YAML))
DEFAULT_SCOPES: dict[str, ScopeRule] = {str(k): v for k, v in DEFAULT_DOC.scopes.items()}
DEFAULT_POLICY = Policy(DEFAULT_VERSION, DEFAULT_DOC, builtin=True)


def next_version(declared: str, history: list[str]) -> str:
    """The stored version of a newly applied policy: a declared MAJOR.MINOR.PATCH is used as
    it is (it must be new); MAJOR.MINOR gets the next free patch number."""
    parts = declared.split(".")
    if len(parts) == 3:
        if declared in history:
            raise conflict(f"policy version {declared} was already applied", reason="version_reused")
        return declared
    prefix = f"{parts[0]}.{parts[1]}."
    patches = [int(v.removeprefix(prefix)) for v in history if v.startswith(prefix)]
    return f"{prefix}{max(patches) + 1 if patches else 0}"


def tag_matches(pattern: str, tag: str) -> bool:
    """A policy pattern against one caller tag: '*' matches any use, 'tool:*' any 'tool:...'."""
    if pattern == "*":
        return True
    if pattern.endswith(":*"):
        return tag.startswith(pattern[:-1]) and len(tag) > len(pattern) - 1
    return pattern == tag


def class_allowed(rule: BoundaryRule, tags: list[str]) -> bool:
    return any(p == "*" or any(tag_matches(p, t) for t in tags) for p in rule.allow)


def allowed_classes(doc: PolicyDoc, tags: list[str]) -> frozenset[str]:
    """The boundary classes `tags` may receive under `doc`; never secret."""
    return frozenset(c for c in CLASSES if c != "secret" and class_allowed(doc.boundary(c), tags))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def diff(old: PolicyDoc, new: PolicyDoc) -> list[str]:
    """What changed, one `path: old -> new` line per leaf (versions left out)."""
    before = flatten(old.model_dump(mode="json", exclude={"version"}))
    after = flatten(new.model_dump(mode="json", exclude={"version"}))
    lines = []
    for path in sorted(before.keys() | after.keys()):
        if before.get(path) != after.get(path):
            lines.append(f"{path}: {before.get(path)!r} -> {after.get(path)!r}")
    return lines
