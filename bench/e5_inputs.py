"""Measure e5's input maxima for the `int8s` graph and write src/memhub/search/embedders/e5_inputs.npz.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/e5_inputs.py \
        [--check [--limit N] [--over X]]

Runs the 4-bit graph (the default's numbers, with every matrix's input exposed) on 300
generated bilingual memories (bench/corpus.py, seed 11), the conversational lines below and
the queries, as passages and as queries, one text a run, and keeps every input channel's
largest absolute value (search/embedders/e5_inputs.py). No evaluation set is read: the ja set
and LoCoMo measure the graph afterwards. `--check` compares with the shipped file instead of
writing it and exits 1 unless they agree (relative difference per channel under 1e-5);
`--limit N` measures the first N texts only, which must then stay at or under the shipped
maxima (a quick check that the file is this script's output: tests/search/test_search_e5_int8.py),
or, with `--over X`, at most X over them (relative): ONNX Runtime's 4-bit kernels round
differently on another CPU (on an AMD EPYC with AVX-512 VNNI, 2026-11-29, the first 40 texts
went up to 30 % over one channel of the file measured on the machine before; 3.8 % of the
channels over at all, 0.012 % by more than 5 %). So that a looser `--over` still tells a wrong
file, in every matrix at most 1 % of the channels may be more than 5 % over, and the median of
measured / shipped must lie in [0.5, 1]: a file of other maxima (doubled, another model's)
falls outside; on that machine the medians were 0.73-0.96. These bounds suit a few dozen texts
(the test's 40): with all 360 texts that machine's medians reach 1.001 and two matrices have
1.4-1.6 % of their channels more than 5 % over.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from corpus import SUBJECTS_EN, SUBJECTS_JA, texts

LINES = [
    "Hey! How was your weekend? I finally went hiking with my sister.",
    "I started learning the guitar last month, it is harder than I thought.",
    "We adopted a dog from the shelter on Saturday, her name is Luna.",
    "Can you remind me what we decided about the release date?",
    "My flight to Tokyo was delayed by three hours because of the storm.",
    "That sounds amazing, send me the photos when you get a chance!",
    "I've been volunteering at the community garden every Sunday morning.",
    "The conference talk went well, people asked a lot of questions afterwards.",
    "昨日は雨だったので一日中家で本を読んでいました。",
    "来週の会議の資料はもう準備できましたか?",
    "新しいカフェが駅前にできたので行ってみました。",
    "子供の運動会が土曜日にあって、とても楽しかったです。",
    "このバグは再現手順が分からないので、ログを追加して様子を見ます。",
    "本番環境のデータベースは毎晩3時にバックアップしています。",
    "Error: ECONNREFUSED 127.0.0.1:5432 when the migration runs in CI.",
    "src/memhub/store/sqlite/fts.py: bm25() over at most 3,000 rows, then visibility.",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file, write nothing")
    parser.add_argument("--limit", type=int, default=None, help="with --check: the first N texts only")
    parser.add_argument(
        "--over", type=float, default=None, help="with --limit: how far over the shipped maxima they may go"
    )
    args = parser.parse_args()
    if args.limit is not None and not args.check:
        parser.error("--limit goes with --check")
    if args.over is not None and args.limit is None:
        parser.error("--over goes with --limit")
    over = 1e-5 if args.over is None else args.over
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from memhub.search.embedders import e5_inputs
    from memhub.search.embedders.e5 import E5Embedder
    from memhub.search.embedders.e5_onnx import GraphOptions, OnnxEncoder
    from memhub.search.embedders.e5_weights import load_weights

    e5 = E5Embedder(runtime="onnx")
    weights = load_weights(e5._weights_path())
    encoder = OnnxEncoder(weights, options=GraphOptions(expose_inputs=True))
    passages = [*texts(300, seed=11), *LINES]
    queries = [*SUBJECTS_JA, *SUBJECTS_EN, *LINES[:8]]
    sequences = [e5.sequences(weights.tokenizer, [text], is_query=False)[0] for text in passages]
    sequences += [e5.sequences(weights.tokenizer, [text], is_query=True)[0] for text in queries]
    if args.limit is not None:
        sequences = sequences[: args.limit]
    maxima = e5_inputs.measure(encoder, sequences)
    print(f"{len(sequences)} texts, {len(maxima)} matrices", file=sys.stderr)
    if args.check:
        shipped, why = e5_inputs.load(weights)
        if shipped is None:
            print(f"the shipped file is {why}", file=sys.stderr)
            return 1
        worst, bulk_ok = 0.0, True
        for tag in sorted(shipped):
            if tag not in maxima:
                print(f"{tag:12s} not measured")
                return 1
            rel = (maxima[tag] - shipped[tag]) / np.maximum(shipped[tag], 1e-6)
            worst = max(worst, float(rel.max() if args.limit is not None else np.abs(rel).max()))
            far, median = float(np.mean(rel > 0.05)), float(np.median(rel)) + 1.0
            bulk_ok = bulk_ok and (args.limit is None or (far <= 0.01 and 0.5 <= median <= 1.0 + 1e-5))
            print(
                f"{tag:12s} max relative difference {np.abs(rel).max():.6f} (over by {rel.max():.2e};"
                f" {far:.2%} more than 5 % over; median measured / shipped {median:.3f})"
            )
        ok = worst <= over and bulk_ok and set(maxima) == set(shipped)
        print("agrees with the shipped file" if ok else "differs from the shipped file")
        return 0 if ok else 1
    Path(e5_inputs.MAXIMA_FILE).write_bytes(e5_inputs.dump(weights, maxima))
    print(f"wrote {e5_inputs.MAXIMA_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
