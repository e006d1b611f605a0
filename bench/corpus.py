"""Deterministic, realistic-looking memories: mixed Japanese and English sentences about coding work."""

from __future__ import annotations

import random

SUBJECTS_JA = [
    "認証フロー",
    "データベース移行",
    "キャッシュ戦略",
    "テスト方針",
    "デプロイ手順",
    "ログ設計",
    "エラー処理",
    "API設計",
    "検索機能",
    "権限管理",
    "プランモード",
    "タスク分解",
    "レビュー手順",
    "パフォーマンス改善",
    "バックアップ",
    "監視アラート",
    "型チェック",
    "依存関係の更新",
]
SUBJECTS_EN = [
    "the auth flow",
    "the database migration",
    "the cache layer",
    "the test strategy",
    "deploys",
    "structured logging",
    "error handling",
    "the REST API",
    "search ranking",
    "access control",
    "plan mode",
    "task breakdown",
    "code review",
    "latency",
    "backups",
    "alerting",
    "type checking",
    "dependency upgrades",
]
VERBS_JA = ["を見直す", "を先に決める", "は後回しにする", "を簡素化する", "を自動化する", "を文書化する"]
REASONS_JA = [
    "本番で障害が出たため",
    "レビューで指摘されたため",
    "速度が足りないため",
    "ユーザーから要望があったため",
    "保守コストが高いため",
    "セキュリティ上の懸念があるため",
]
ACTIONS_EN = ["We agreed to", "The user asked to", "AI proposed to", "Next sprint we will", "Decided to"]
OBJECTS_EN = [
    "use SQLite WAL mode",
    "pin every dependency",
    "add a retry with backoff",
    "split the module",
    "move secrets to the vault",
    "measure p95 latency",
    "switch to streaming responses",
    "drop the legacy endpoint",
    "write an integration test",
    "cache embeddings on disk",
]


def sentence(rng: random.Random) -> str:
    i = rng.randrange(len(SUBJECTS_JA))
    form = rng.randrange(3)
    if form == 0:
        return f"{SUBJECTS_JA[i]}{rng.choice(VERBS_JA)}。{rng.choice(REASONS_JA)}。"
    if form == 1:
        return f"{rng.choice(ACTIONS_EN)} {rng.choice(OBJECTS_EN)} for {SUBJECTS_EN[i]}."
    proposal = f"AI: {SUBJECTS_JA[i]}について {rng.choice(OBJECTS_EN)} を提案します"
    return f"{proposal}\nユーザー：{rng.choice(REASONS_JA)}同意します"


def texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(sentence(rng) for _ in range(rng.randint(1, 3))) for _ in range(n)]


# what the search benchmarks ask: the subjects, a few phrases (repeated across calls, as an
# agent repeats a query), then `queries(n)` adds single sentences of the corpus's kind: each new
# to the server, several terms each (Japanese, English and mixed)
QUERIES = [
    *SUBJECTS_JA,
    *SUBJECTS_EN,
    "how do we deploy safely",
    "データベースの移行手順",
    "retry with backoff",
]


def queries(n: int) -> list[str]:
    """`QUERIES`, then distinct single sentences of the corpus (a fixed seed), `n` in all."""
    rng = random.Random(2026)
    found = list(dict.fromkeys(QUERIES))
    while len(found) < n:
        text = sentence(rng).split("\n")[0]
        if text not in found:
            found.append(text)
    return found[:n]
