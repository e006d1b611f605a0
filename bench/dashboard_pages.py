"""Dashboard page latency on a large store.

    .venv/bin/python bench/dashboard_pages.py [--memories 100000] [--loads 30]

Seeds a fresh store in-process (`--memories` memories from bench/corpus.py in the global and
the user domain, a project with a three-level topic tree, logs and decisions in a supersede
chain, a vault note, `--events` audit events naming memories), starts a real `memhub serve
--transport http` (auth none: the local user) on it, and loads every dashboard page `--loads`
times over HTTP, timing the whole answer. The overview's first load (its counts are
computed, then cached for 30 s) is reported on its own as `overview (cold)`. Writes
bench/results/dashboard_pages.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MEMHUB, RESULTS, free_port, print_table, summary, write_report
from corpus import texts
from memhub.cli.container import build_runtime
from memhub.core.hashing import content_hash
from memhub.core.models import Principal
from memhub.core.settings import Settings
from memhub.services import decision_model
from memhub.store.base import NewItem

BATCH = 5_000


def seed(home: Path, db: Path, memories: int, events: int = 0) -> dict[str, int]:
    settings = Settings(home=home, db=str(db), user="bench", project="bench", embedder="none")
    runtime = build_runtime(settings)
    me = Principal("bench", default_project="bench")
    bodies = texts(min(memories, 20_000))
    ids: dict[str, int] = {}
    try:
        with runtime.store.transaction(write=True) as tx:
            tx.ensure_principal("bench")
            project = tx.insert_project("bench", "page benchmark", {}, "bench")
            ids["project"] = project.id
        for start in range(0, memories, BATCH):
            with runtime.store.transaction(write=True) as tx:
                for i in range(start, min(memories, start + BATCH)):
                    body = f"{bodies[i % len(bodies)]} #{i}"
                    row = tx.insert_item(
                        NewItem(
                            kind="memory", owner="bench", scope="global" if i % 2 else "user", body=body,
                            content_hash=content_hash(body), importance=(i % 10) / 10, tags=(f"t{i % 50}",),
                        )
                    )  # fmt: skip
                    ids.setdefault("memory", row.id)
            print(f"seeded {min(memories, start + BATCH)} memories", flush=True)
        with runtime.store.transaction(write=True) as tx:
            parent = None
            for depth in range(3):
                topic = tx.insert_item(
                    NewItem(
                        kind="topic", owner="bench", scope="project", project_id=ids["project"],
                        parent_id=parent,
                        title=f"topic level {depth}", body="", attrs={"has_description": False},
                    )
                )  # fmt: skip
                ids.setdefault("topic", topic.id)
                parent = topic.id
                for n in range(20):
                    tx.insert_item(
                        NewItem(kind="log", owner="bench", scope="project", project_id=ids["project"],
                                parent_id=topic.id, body=f"log {n} on the deploy pipeline")
                    )  # fmt: skip
            previous: list[int] = []
            for n in range(10):
                new = decision_model.NewDecision(
                    project_id=ids["project"], title=f"database choice {n}",
                    rationale="the deploy pipeline needs it", target="database_policy", origin="decisions",
                    supersedes=previous,
                )  # fmt: skip
                row = decision_model.create(tx, me, new)
                previous = [row.id]
            ids["decision"] = previous[0]
        for start in range(0, events, BATCH):  # an audit log of `events` events naming memories
            with runtime.store.transaction(write=True) as tx:
                for n in range(start, min(events, start + BATCH)):
                    tx.append_event(
                        "bench", "memory", "ok", {"memory_id": f"mem_{ids['memory'] + n % memories}"}
                    )
    finally:
        runtime.close()
    (home / "vault").mkdir(exist_ok=True)
    (home / "vault" / "note.md").write_text("# Deploy\n\n" + "- step **one** `x`\n" * 200, encoding="utf-8")
    return ids


def get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        assert response.status == 200, url
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=30)
    parser.add_argument("--events", type=int, default=100_000, help="audit events seeded")
    parser.add_argument("--out", default=str(RESULTS / "dashboard_pages.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, db = Path(tmp), Path(tmp) / "bench.db"
        started = time.perf_counter()
        ids = seed(home, db, args.memories, args.events)
        seeded_s = time.perf_counter() - started
        port = free_port()
        env = {**os.environ, "MEMHUB_HOME": str(home)}
        proc = subprocess.Popen(
            [MEMHUB, "--db", str(db), "--user", "bench", "--project", "bench", "serve", "--transport", "http",
             "--host", "127.0.0.1", "--port", str(port), "--embedder", "none"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    get(f"{base}/health")
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
                    time.sleep(0.05)
            pages = {
                "overview": "/",
                "search": "/ui/search?q=deploy+pipeline",
                "search (CJK)": "/ui/search?q=%E8%A8%AD%E8%A8%88",
                "memory": f"/ui/item/{ids['memory']}",
                "decision": f"/ui/item/{ids['decision']}",
                "projects": "/ui/projects",
                "project": f"/ui/projects/{ids['project']}",
                "topic": f"/ui/projects/{ids['project']}/topics/{ids['topic']}",
                "proposals": "/ui/proposals",
                "admin": "/ui/admin",
                "audit": "/ui/audit",
                "audit (rare filter)": "/ui/audit?who=nobody&tool=x",
                "policies": "/ui/policies",
                "vault": "/ui/vault",
                "vault note": "/ui/vault/note?path=note.md",
            }
            results: dict[str, dict[str, float]] = {"overview (cold)": summary([get(base + "/")])}
            for name, path in pages.items():
                get(base + path)  # warm
                results[name] = summary([get(base + path) for _ in range(args.loads)])
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print_table(f"dashboard pages, {args.memories} memories", results)
    report: dict[str, Any] = {
        "memories": args.memories,
        "loads": args.loads,
        "events": args.events,
        "seed_s": round(seeded_s, 1),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
        "pages": results,
    }
    write_report(args.out, report)


if __name__ == "__main__":
    main()
