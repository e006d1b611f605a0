"""`memhub reflect`: find active decisions that disagree or repeat each other on one target and
propose the decision that supersedes them (a proposal file for a person to review).

Within a project, active decisions with the same target (`target_key`) are one group; a group
of two or more gets one proposal: the newest decision a person recorded (else the newest) is
proposed again as the one decision for the target, superseding every active decision of the
group. `kind` says why: `duplicate` when every pair is similar (cosine of the shared
embeddings, or word overlap without a model, at least `DUPLICATE_AT`), else `conflict`. A
group that already has an open proposal for the same decisions gets no second one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from memhub.core.clock import isoformat
from memhub.core.errors import not_found
from memhub.core.models import Kind, ProjectRole
from memhub.core.text import search_terms
from memhub.services import access, decision_model
from memhub.services.access import Need
from memhub.services.decision_model import DecisionRecord
from memhub.services.decisions import proposals
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, Tx
from memhub.store.crypto import ContentCipher

DUPLICATE_AT = 0.9
MAX_DECISIONS = 10_000  # per project


@dataclass(frozen=True)
class Group:
    project: str
    target: str
    decisions: tuple[DecisionRecord, ...]  # oldest first


def _groups(tx: Tx, call: Call, project: str | None) -> list[Group]:
    actor = call.principal
    viewer = access.viewer(tx, actor)
    if project:
        row = tx.get_project_by_name(project)
        if row is None:
            raise not_found(f"project {project!r} not found")
        rows = [access.project(tx, actor, row.id, Need.READ).project]
    else:
        rows = [p for p, _ in tx.list_memberships(actor.id, list(ProjectRole), 1000)]
    groups = []
    for row in rows:
        items = tx.query_items(
            viewer, ItemQuery(kinds=(Kind.DECISION,), project_id=row.id, limit=MAX_DECISIONS)
        )
        by_target: dict[str, list[DecisionRecord]] = {}
        for record in decision_model.records(tx, items):
            if record.status == "active":
                by_target.setdefault(decision_model.target_key(record.target), []).append(record)
        groups += [
            Group(row.name, members[-1].target, tuple(members))
            for members in by_target.values()
            if len(members) > 1
        ]
    return groups


def _words(record: DecisionRecord) -> set[str]:
    return set(search_terms(f"{record.title} {record.rationale}"))


def word_similarity(a: DecisionRecord, b: DecisionRecord) -> float:
    left, right = _words(a), _words(b)
    return len(left & right) / len(left | right) if left | right else 1.0


async def _similarity(call: Call, group: Group) -> float:
    """The least similar pair of the group: cosine of the shared embeddings when a model is
    installed, else word overlap (Jaccard)."""
    records = group.decisions
    embedding = call.runtime.embedding
    if embedding is not None and not embedding.error:
        await embedding.load()
        texts = [f"{r.title}\n{r.rationale}" for r in records]
        matrix = np.asarray(await embedding.embed_passages(texts), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        unit = matrix / np.maximum(norms, 1e-12)
        cosines = unit @ unit.T
        return float(min(cosines[i, j] for i, j in combinations(range(len(records)), 2)))
    return min(word_similarity(a, b) for a, b in combinations(records, 2))


def _slug(target: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", decision_model.target_key(target).encode("ascii", "ignore").decode())
    return slug.strip("-")[:40] or "decision"


def _open_sets(folder: Path, cipher: ContentCipher | None) -> set[tuple[str, frozenset[str]]]:
    found = set()
    for proposal in proposals.listing(folder, cipher):
        if proposal.status == "open":
            ids = proposal.meta.get("supersedes") or []
            found.add((str(proposal.meta.get("project", "")), frozenset(map(str, ids))))
    return found


def proposal_for(group: Group, kind: str, similarity: float, author: str) -> tuple[dict[str, object], str]:
    """The front matter and rationale proposed for `group`."""
    people = [r for r in group.decisions if r.human]
    chosen = (people or list(group.decisions))[-1]
    others = ", ".join(r.public_id for r in group.decisions if r.id != chosen.id)
    meta: dict[str, object] = {
        "status": "open",
        "project": group.project,
        "target": chosen.target,
        "title": chosen.title,
        "supersedes": [r.public_id for r in group.decisions],
        "consequences": list(chosen.consequences),
        "kind": kind,
        "note": (
            f"{len(group.decisions)} active decisions on target {chosen.target!r} ({kind}, similarity "
            f"{similarity:.2f}); proposes {chosen.public_id} as the one decision, replacing {others}"
        ),
        "created_by": f"reflect ({author})",
    }
    return meta, chosen.rationale


async def reflect(call: Call, project: str | None = None) -> list[Path]:
    """Write a proposal for every target with several active decisions; the new files' paths."""
    groups = await call.read(lambda tx: _groups(tx, call, project))
    folder, cipher = proposals.directory(call), proposals.cipher_of(call)
    known = _open_sets(folder, cipher)
    written = []
    for group in groups:
        ids = frozenset(r.public_id for r in group.decisions)
        if (group.project, ids) in known:
            continue
        similarity = await _similarity(call, group)
        kind = "duplicate" if similarity >= DUPLICATE_AT else "conflict"
        meta, body = proposal_for(group, kind, similarity, call.principal.id)
        now = call.runtime.clock.now()
        meta["created_at"] = isoformat(now)
        # an encrypted store's proposal names do not spell out the target
        stem = f"{now:%Y%m%d-%H%M%S}-{'proposal' if cipher is not None else _slug(group.target)}"
        written.append(proposals.write_new(folder, stem, meta, body, cipher))
        known.add((group.project, ids))
    await call.record("ok")
    return written
