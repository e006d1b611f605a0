"""Proposals: markdown files in `settings.proposals_dir`, reviewed by a person, accepted once.

A proposal is the draft of one decision. Its front matter holds one `key: value` per line
(values are JSON; a plain word is taken as text):

    ---
    status: "open"                       # open, accepted or rejected
    project: "demo"                      # where the decision goes (default: the current project)
    target: "database_policy"
    title: "Use PostgreSQL for the main store"
    supersedes: ["dec_3", "dec_5"]       # the decisions it replaces (may be empty)
    consequences: ["migrate the CI fixtures"]
    created_at: "2026-11-24T10:15:00.000000Z"
    ---
    The rationale: the body of the file.

`proposal_id` is the file's name (no directory part). `memhub reflect` writes them; a person
may write one by hand. Accepting needs the admin role, and through MCP also the server's
AGENT_MEMORY_SECRET; it is refused during the review window (`review_window_s`, counted from
the later of `created_at` and the file's last change, so an edited proposal is reviewed
again). Accepting records the decision with its supersede links and marks the file
accepted, in the store's write transaction: a second accept is a conflict.

When the store is encrypted (store/crypto.py) a proposal file holds one line, its text sealed
with the store's key (`mhenc1:...`), and its name says nothing of the target; `memhub proposal
show` prints it in clear. A file written by hand in clear is still read.
"""

from __future__ import annotations

import hmac
import json
import math
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import MemhubError, conflict, forbidden, invalid, not_found
from memhub.core.ids import DEC
from memhub.services import access
from memhub.services.access import Need
from memhub.services.decision_model import DecisionRecord
from memhub.services.decisions import errors, service
from memhub.services.decisions import models as m
from memhub.services.decisions.config import config
from memhub.services.runtime import Call
from memhub.store.base import Sealing, Tx
from memhub.store.crypto import PREFIX, ContentCipher

FENCE = "---"
ORDER = ("status", "project", "target", "title", "supersedes", "consequences", "kind", "note",
         "created_at", "created_by", "accepted_decision", "decided_at", "decided_by")  # fmt: skip
MAX_BYTES = 256 * 1024


@dataclass
class Proposal:
    name: str
    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    text: str = ""  # the file as read

    @property
    def status(self) -> str:
        return str(self.meta.get("status") or "open")

    def written_at(self) -> datetime:
        """When the review window starts: the later of `created_at` and the file's last change."""
        changed = datetime.fromtimestamp(self.path.stat().st_mtime, UTC)
        try:
            created = parse_iso(str(self.meta["created_at"]))
        except (KeyError, ValueError):
            return changed
        return max(created, changed)


def directory(call: Call) -> Path:
    return config(call).proposals_dir


def cipher_of(call: Call) -> ContentCipher | None:
    """The key proposals are sealed with: the store's (None: the store is not encrypted)."""
    store = call.runtime.store
    return store.cipher if isinstance(store, Sealing) else None


def _seal(text: str, cipher: ContentCipher | None) -> str:
    return f"{cipher.encrypt(text, 'proposal')}\n" if cipher is not None else text


def _open(name: str, text: str, cipher: ContentCipher | None) -> str:
    if not text.startswith(PREFIX):
        return text
    if cipher is None:
        raise invalid(f"proposal {name} is encrypted: start memhub with the store's key to read it")
    return cipher.decrypt(text.strip(), "proposal") or ""


def unseal_files(folder: Path, cipher: ContentCipher) -> int:
    """Rewrite the sealed proposals of `folder` in clear (`memhub migrate` to a store without
    encryption, which reads only clear files), keeping each file's time so its review window
    does not start again. Returns the number rewritten."""
    done = 0
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if not text.startswith(PREFIX):
            continue
        times = path.stat()
        path.write_text(_open(path.name, text, cipher), encoding="utf-8")
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
        done += 1
    return done


def check_name(proposal_id: str) -> str:
    """A proposal is named by its file name: no directory, no hidden file, a `.md` file."""
    name = proposal_id.strip()
    bad = any(c in name for c in "/\\\x00:") or name in ("", ".", "..") or name.startswith(".")
    if bad or Path(name).name != name:
        raise invalid("proposal_id must be a file name without a path (e.g. 20261124-101500-db.md)")
    if not name.endswith(".md"):
        raise invalid("proposal_id must name a .md file")
    return name


def _value(raw: str) -> Any:
    raw = raw.strip()
    try:
        return json.loads(raw)
    except ValueError:
        pass
    if raw.startswith("[") and raw.endswith("]"):
        return [part.strip().strip("'\"") for part in raw[1:-1].split(",") if part.strip()]
    return raw


def parse(text: str) -> tuple[dict[str, Any], str]:
    """Front matter and body. A file without front matter is all body."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != FENCE:
        return {}, text.strip()
    meta: dict[str, Any] = {}
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == FENCE:
            return meta, "\n".join(lines[index + 1 :]).strip()
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.lstrip().startswith("#"):
            meta[key.strip()] = _value(value.split("  #", 1)[0])
    raise invalid("the proposal's front matter is not closed with ---")


def render(meta: dict[str, Any], body: str) -> str:
    keys = [k for k in ORDER if k in meta] + sorted(k for k in meta if k not in ORDER)
    lines = [FENCE, *(f"{k}: {json.dumps(meta[k], ensure_ascii=False)}" for k in keys), FENCE]
    return "\n".join(lines) + "\n" + body.strip() + "\n"


def load(folder: Path, proposal_id: str, cipher: ContentCipher | None = None) -> Proposal:
    name = check_name(proposal_id)
    path = folder / name
    if path.is_symlink() or not path.is_file():
        raise not_found(f"proposal {name} does not exist")
    if path.stat().st_size > MAX_BYTES:
        raise invalid(f"proposal {name} is larger than {MAX_BYTES} bytes")
    text = _open(name, path.read_text(encoding="utf-8"), cipher)
    meta, body = parse(text)
    return Proposal(name, path, meta, body, text)


def listing(folder: Path, cipher: ContentCipher | None = None) -> list[Proposal]:
    """Every readable proposal, oldest file name first."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.md")):
        try:
            found.append(load(folder, path.name, cipher))
        except (MemhubError, OSError, ValueError):
            continue  # a file that is not a proposal (bad front matter) is not listed
    return found


def write_new(
    folder: Path, stem: str, meta: dict[str, Any], body: str, cipher: ContentCipher | None = None
) -> Path:
    """A new proposal file `stem.md` (or `stem-2.md`, ...), never overwriting one."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = folder / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(_seal(render(meta, body), cipher))
        except FileExistsError:
            continue
        return path
    raise conflict(f"too many proposals named {stem}")


def _replace(path: Path, text: str, cipher: ContentCipher | None) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(_seal(text, cipher), encoding="utf-8")
    os.replace(tmp, path)


def time_left(call: Call, proposal: Proposal) -> float:
    """Seconds of the review window still to run (<= 0: it has passed)."""
    window = timedelta(seconds=config(call).review_window_s)
    return (proposal.written_at() + window - call.runtime.clock.now()).total_seconds()


def _duration(seconds: float) -> str:
    """`1 h`, `59 min 56 s`, `5 s`."""
    minutes, secs = divmod(max(0, math.ceil(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{n} {unit}" for n, unit in ((hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts) or "0 s"


def _gate(tx: Tx, call: Call, secret: str | None) -> None:
    """Seed 002: accepting needs the ADMIN role and, through MCP, AGENT_MEMORY_SECRET."""
    if call.principal.via == "mcp":
        configured = config(call).agent_memory_secret
        if not configured:
            raise forbidden("accepting proposals through MCP is off (AGENT_MEMORY_SECRET is not set)")
        given = (secret or "").encode("utf-8")
        if not hmac.compare_digest(given, configured.encode("utf-8")):
            raise forbidden("AGENT_MEMORY_SECRET is missing or wrong (pass it as secret)")
    if not access.is_admin(tx, call.principal):
        raise forbidden("accepting a proposal requires the ADMIN role")


def _decide(tx: Tx, call: Call, proposal: Proposal) -> DecisionRecord:
    """Validate the proposal as a decision and record it (inside the write transaction)."""
    actor = call.principal
    old_ids = proposal.meta.get("supersedes") or []
    if not isinstance(old_ids, list):
        old_ids = [old_ids]
    fields = {
        "title": str(proposal.meta.get("title", "")),
        "target": str(proposal.meta.get("target", "")),
        "rationale": proposal.body,
        "consequences": [str(c) for c in proposal.meta.get("consequences") or []],
    }
    try:
        if old_ids:
            args: m.RecordInput | m.SupersedeInput = m.SupersedeInput.model_validate(
                {**fields, "old_decision_ids": [str(i) for i in old_ids]}
            )
        else:
            args = m.RecordInput.model_validate(fields)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:4])
        raise invalid(f"proposal {proposal.name} is not a valid decision: {where}") from None
    old = (
        service.visible_decisions(tx, actor, args.old_decision_ids, "supersedes")
        if isinstance(args, m.SupersedeInput)
        else []
    )
    name = proposal.meta.get("project")
    if name:
        project = tx.get_project_by_name(str(name))
        if project is None:
            raise invalid(f"proposal {proposal.name}: project {name!r} does not exist")
    else:
        project = access.current_project(tx, actor)
    access.project(tx, actor, project.id, Need.WRITE, label=f"project {project.name!r}")
    if any(r.project_id != project.id for r in old):
        raise invalid(f"proposal {proposal.name}: it supersedes decisions of another project")
    service.check_replaceable(actor, old, isolation=False)  # the review is a person's approval
    new = replace(
        service.new_decision(args, project.id, [r.id for r in old]),
        origin="proposal",
        extra={"proposal": proposal.name},
    )
    return service.write(tx, call, new)


async def accept(call: Call, proposal_id: str, secret: str | None = None) -> m.BaseResponse:
    """Turn an open proposal whose review window has passed into an active decision, once."""
    folder, cipher = directory(call), cipher_of(call)
    await call.read(lambda tx: _gate(tx, call, secret))
    proposal = load(folder, proposal_id, cipher)
    if proposal.status != "open":
        raise conflict(f"proposal {proposal.name} is already {proposal.status}")
    left = time_left(call, proposal)
    if left > 0:
        window = _duration(config(call).review_window_s)
        raise errors.PI1Violation(
            f"proposal {proposal.name} is in its {window} review window; {_duration(left)} left",
            math.ceil(left),
        )
    written: list[Proposal] = []

    def work(tx: Tx) -> DecisionRecord:
        current = load(folder, proposal.name, cipher)  # again, under the writer lock: accepted once
        if current.status != "open" or current.text != proposal.text:
            raise conflict(f"proposal {proposal.name} changed or was decided meanwhile; review it again")
        record = _decide(tx, call, current)
        meta = {
            **current.meta,
            "status": "accepted",
            "accepted_decision": record.public_id,
            "decided_at": isoformat(call.runtime.clock.now()),
            "decided_by": call.principal.id,
        }
        _replace(current.path, render(meta, current.body), cipher)
        written.append(current)
        return record

    committed = False
    try:
        record = await call.transact(work)
        committed = True
    finally:
        if not committed:  # the decision was not recorded: the proposal stays open
            for original in written:
                _replace(original.path, original.text, cipher)
    old = ", ".join(DEC(i) for i in record.supersedes)
    replaced = f", superseding {old}" if old else ""
    return m.BaseResponse(
        status="success", message=f"proposal {proposal.name} accepted as {record.public_id}{replaced}"
    )


async def reject(call: Call, proposal_id: str, reason: str) -> Proposal:
    """Close an open proposal without a decision (a person, at the CLI)."""
    folder, cipher = directory(call), cipher_of(call)
    await call.read(lambda tx: _gate(tx, call, None))
    proposal = load(folder, proposal_id, cipher)
    if proposal.status != "open":
        raise conflict(f"proposal {proposal.name} is already {proposal.status}")
    meta = {
        **proposal.meta,
        "status": "rejected",
        "note": reason or proposal.meta.get("note", ""),
        "decided_at": isoformat(call.runtime.clock.now()),
        "decided_by": call.principal.id,
    }
    _replace(proposal.path, render(meta, proposal.body), cipher)
    await call.record("ok")
    return load(folder, proposal.name, cipher)
