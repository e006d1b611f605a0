"""The largest input of every channel of e5's matrices: what the `int8s` graph smooths by.

An int8 product quantizes each token's input row on one scale. A few of e5's channels carry
inputs 10-50x the others' (after the LayerNorms and the GELU), so one scale per row leaves the
ordinary channels a handful of steps. SmoothQuant (Xiao et al. 2023) divides each input
channel by a factor and multiplies the weights' column by it: the product is unchanged and
the inputs are flatter. The factor needs each channel's largest input, which depends on
texts, not on the weights: it was measured once, by running the 4-bit graph on 300 bilingual
memories (bench/corpus.py), 16 conversational lines and 44 queries (none from an evaluation
set), and is shipped
beside this module (`e5_inputs.npz`, ~0.1 MB, float32), with a fingerprint of the weights it
was measured on. `bench/e5_inputs.py` measures it again (a new model file).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memhub.search.embedders.e5_weights import E5Weights, Floats

MAXIMA_FILE = Path(__file__).with_name("e5_inputs.npz")
_FINGERPRINT = "__weights__"
_SUFFIX = ".input"


def fingerprint(weights: E5Weights) -> str:
    """A digest of a few of the weights' tensors (first and last layer, the embeddings' norm):
    another model file gives another digest, at the cost of ~0.4 MB read."""
    digest = hashlib.sha256()
    last = weights.config.layers - 1
    for name in ("emb.ln.w", "emb.ln.b", "l0.q.w", "l0.fo.w", f"l{last}.q.w", f"l{last}.fo.w"):
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(weights.tensors[name]).tobytes())
    return digest.hexdigest()[:32]


def load(weights: E5Weights, path: Path | None = None) -> tuple[dict[str, Floats] | None, str]:
    """The shipped maxima by matrix tag and "", or None and why not (missing, unreadable,
    measured on other weights, or not one finite positive value per input channel of every
    matrix): the caller then runs another graph and says so."""
    try:
        with np.load(path or MAXIMA_FILE, allow_pickle=False) as data:
            stored = {name: np.asarray(data[name]) for name in data.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    mark = stored.pop(_FINGERPRINT, None)
    if mark is None or str(mark) != fingerprint(weights):
        return None, "measured on other weights"
    widths = expected_widths(weights)
    if set(stored) != set(widths):
        return None, "not one entry per matrix"
    for tag, values in stored.items():
        if values.shape != (widths[tag],) or not np.all(np.isfinite(values)) or not np.all(values > 0):
            return None, f"malformed ({tag})"
    return {tag: values.astype(np.float32) for tag, values in stored.items()}, ""


def expected_widths(weights: E5Weights) -> dict[str, int]:
    """Every matrix's tag (e5_onnx.build_model) and its input width."""
    cfg = weights.config
    inputs = {"q_k_v": cfg.hidden, "ao": cfg.hidden, "fi": cfg.hidden, "fo": len(weights.vector("l0.fi.b"))}
    return {f"l{layer}.{name}": width for layer in range(cfg.layers) for name, width in inputs.items()}


def measure(encoder: object, sequences: Iterable[Sequence[int]]) -> dict[str, Floats]:
    """Run `encoder` (an OnnxEncoder built with `expose_inputs`) on each sequence alone and
    keep every matrix input channel's largest absolute value."""
    maxima: dict[str, Floats] = {}
    for sequence in sequences:
        outputs = encoder.outputs([sequence])  # type: ignore[attr-defined]
        for name, values in outputs.items():
            if not name.endswith(_SUFFIX):
                continue
            tag = name[: -len(_SUFFIX)]
            peak = np.abs(values).reshape(-1, values.shape[-1]).max(axis=0)
            maxima[tag] = np.maximum(maxima[tag], peak) if tag in maxima else peak
    return maxima


def dump(weights: E5Weights, maxima: dict[str, Floats]) -> bytes:
    """The npz file's bytes for `maxima` measured on `weights`."""
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {
        name: np.asarray(values, dtype=np.float32) for name, values in sorted(maxima.items())
    }
    arrays[_FINGERPRINT] = np.array(fingerprint(weights))
    np.savez_compressed(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()
