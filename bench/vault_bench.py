"""Latency of vault_find and vault_search on a generated Obsidian-like vault, through the real
MCP client over stdio.

    .venv/bin/python bench/vault_bench.py --notes 10000 [--queries 100]

Generates a deterministic vault of `--notes` Markdown notes (Japanese and English, nested
project/area folders, daily notes, front matter, headings, lists, [[wiki links]]), starts
`memhub serve --vault ...` over stdio (the client spawns it), lets the first calls read the
vault and index its sections into the store (the warm-up, reported separately), then times
`--queries` calls of each operation: vault_find (Japanese, English, other-script and no-hit
queries), vault_search in regex, plain and loose mode. Prints p50/p95 in milliseconds and the
server's resident memory, and writes bench/results/vault_bench.json.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, format_rss, memhub_server, print_table, rss_mib, time_calls, write_report
from corpus import OBJECTS_EN, SUBJECTS_EN, SUBJECTS_JA, sentence

PROJECTS = ["memhub", "web-app", "データ基盤", "mobile", "社内ツール", "infra"]
AREAS = ["設計", "meetings", "research", "運用", "notes"]


def _name(rng: random.Random, i: int) -> str:
    if rng.random() < 0.5:
        return f"{rng.choice(SUBJECTS_JA)}メモ {i}"
    return f"{rng.choice(SUBJECTS_EN).removeprefix('the ').replace(' ', '-')}-{i}"


def generate(root: Path, n: int, seed: int = 5) -> int:
    """Write `n` notes under `root`; the number of bytes written."""
    rng = random.Random(seed)
    n_daily = n // 10
    paths: list[Path] = []
    for i in range(n_daily):
        day = time.gmtime(1_700_000_000 + i * 86_400)
        paths.append(root / "daily" / time.strftime("%Y-%m-%d.md", day))
    for i in range(n - n_daily):
        if rng.random() < 0.2:
            folder = root / "日記" / f"{2020 + i % 6}"
        else:
            folder = root / "projects" / rng.choice(PROJECTS) / rng.choice(AREAS)
            if rng.random() < 0.3:
                folder = folder / f"{rng.choice(SUBJECTS_EN).removeprefix('the ').replace(' ', '-')}"
        paths.append(folder / f"{_name(rng, i)}.md")
    names = [p.stem for p in paths]
    written = 0
    for index, path in enumerate(paths):
        lines = [
            "---",
            f"tags: [{rng.choice(['design', 'ops', 'meeting', '調査'])}]",
            f"created: 2026-{1 + index % 12:02}-01",
            "---",
        ]
        lines.append(f"# {path.stem}")
        lines.append("")
        for _section in range(rng.randint(2, 5)):
            lines.append(f"## {rng.choice(SUBJECTS_JA)} / {rng.choice(SUBJECTS_EN)}")
            lines.append("")
            for _para in range(rng.randint(1, 3)):
                lines.append(" ".join(sentence(rng) for _ in range(rng.randint(1, 3))))
                lines.append("")
            if rng.random() < 0.6:
                lines += [f"- {rng.choice(OBJECTS_EN)}" for _ in range(rng.randint(2, 4))]
                lines.append("")
        lines.append("関連: " + " ".join(f"[[{rng.choice(names)}]]" for _ in range(rng.randint(1, 3))))
        path.parent.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        path.write_bytes(data)
        written += len(data)
    return written


def _note_items(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM items WHERE kind = 'note'").fetchone()[0])


FIND_QUERIES = [
    "データベース移行",
    "キャッシュ戦略を見直す",
    "デプロイ手順を自動化する",
    "retry with backoff",
    "SQLite WAL mode",
    "measure p95 latency for search ranking",
    "ばっくあっぷ",  # hiragana for バックアップ
    "レビューで指摘された",
    "quantum chromodynamics",  # no hit
]
SEARCH_QUERIES = [
    ("regex", r"p9\d latency"),
    ("regex", r"(?i)sqlite wal"),
    ("regex", r"^- drop the legacy"),
    ("plain", "プランモード"),
    ("plain", "streaming responses"),
    ("loose", "依存関係を更新する"),
]


async def measure(db: Path, vault: Path, queries: int) -> tuple[dict[str, Any], dict[str, Any], Any]:
    rng = random.Random(13)
    warmup: dict[str, Any] = {}
    async with memhub_server(db, env={"MEMHUB_VAULT": str(vault)}) as (client, server_pid):
        started = time.perf_counter()
        first = await client.call_tool("vault_ls", {})
        assert not first.is_error
        warmup["first_call_s"] = round(time.perf_counter() - started, 2)
        previous = -1
        while (count := _note_items(db)) != previous:  # index every note before timing
            previous = count
            await anyio.sleep(2.1)  # the vault is re-scanned at most every 2 s
            await client.call_tool("vault_ls", {})
        warmup["index_s"] = round(time.perf_counter() - started, 1)
        warmup["note_items"] = previous
        ops: dict[str, Any] = {
            "vault_find": lambda _: ("vault_find", {"query": rng.choice(FIND_QUERIES)}),
        }
        for mode in ("regex", "plain", "loose"):
            choices = [q for m, q in SEARCH_QUERIES if m == mode]
            ops[f"vault_search {mode}"] = lambda _, m=mode, c=choices: (
                "vault_search",
                {"query": rng.choice(c), "mode": m},
            )
        results = await time_calls(client, ops, queries, 1)
        rss = rss_mib(server_pid)
    return warmup, results, rss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", default=str(RESULTS / "vault_bench.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault, db = Path(tmp) / "vault", Path(tmp) / "bench.db"
        started = time.perf_counter()
        size = generate(vault, args.notes)
        generated = time.perf_counter() - started
        warmup, results, rss = anyio.run(measure, db, vault, args.queries)
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "transport": "stdio",
        "notes": args.notes,
        "vault_mib": round(size / 2**20, 1),
        "generate_s": round(generated, 1),
        "warmup": warmup,
        "ops": results,
        "rss_mib": rss,
    }
    print(
        f"\n{args.notes:,} notes ({report['vault_mib']} MiB) generated in {generated:.1f}s; first call "
        f"{warmup['first_call_s']}s, all {warmup['note_items']:,} sections indexed after {warmup['index_s']}s"
    )
    print_table(f"stdio, {args.queries} calls each", results)
    print(format_rss(rss))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
