"""Measure the semantic cache's threshold on the labelled pairs with the packaged model; print a table.

    python bench/semantic_threshold.py            # table of hits per threshold, cosine alone and with the guard
    python bench/semantic_threshold.py --write    # also store each pair's score in the pairs file

The pairs live in tests/cache/data/semantic_pairs.json: 'paraphrase' pairs should hit, 'different' pairs
(unrelated, same topic another question, same template another value) must not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gateway.cache.literals import same_literals  # noqa: E402
from gateway.cache.local_model import MODEL_ID, MiniLmModel  # noqa: E402

PAIRS = ROOT / "tests" / "cache" / "data" / "semantic_pairs.json"
THRESHOLDS = [round(0.80 + 0.01 * i, 2) for i in range(19)]


def score_pairs(model: MiniLmModel, data: dict) -> tuple[list[dict], list[dict]]:
    def score(a: str, b: str) -> float:
        return round(float(model.embed(a) @ model.embed(b)), 4)

    para = [{"a": a, "b": b, "score": score(a, b), "guard": same_literals(a, b)} for a, b, *_ in data["paraphrase"]]
    diff = [{"a": a, "b": b, "kind": kind, "score": score(a, b), "guard": same_literals(a, b)}
            for a, b, kind, *_ in data["different"]]
    return para, diff


def table(para: list[dict], diff: list[dict]) -> list[dict]:
    rows = []
    for t in THRESHOLDS:
        rows.append({
            "threshold": t,
            "paraphrase_hits": sum(p["score"] >= t for p in para),
            "paraphrase_hits_guarded": sum(p["score"] >= t and p["guard"] for p in para),
            "different_hits": sum(d["score"] >= t for d in diff),
            "different_hits_guarded": sum(d["score"] >= t and d["guard"] for d in diff),
        })
    return rows


def summary(para: list[dict], diff: list[dict]) -> dict:
    def stats(scores: list[float]) -> dict:
        s = sorted(scores)
        return {"min": s[0], "median": s[len(s) // 2], "max": s[-1]}

    by_kind: dict[str, list[float]] = {}
    for d in diff:
        by_kind.setdefault(d["kind"], []).append(d["score"])
    return {
        "model": MODEL_ID,
        "paraphrase": stats([p["score"] for p in para]),
        "different": {kind: stats(scores) for kind, scores in sorted(by_kind.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the scores in the pairs file")
    args = parser.parse_args()
    data = json.loads(PAIRS.read_text())
    para, diff = score_pairs(MiniLmModel(), data)
    rows = table(para, diff)
    print(f"{len(para)} paraphrase pairs, {len(diff)} different-question pairs")
    print("threshold  paraphrase hits (guarded)  different hits (guarded)")
    for r in rows:
        print(f"  {r['threshold']:.2f}     {r['paraphrase_hits']:3d} ({r['paraphrase_hits_guarded']:3d})"
              f"                {r['different_hits']:3d} ({r['different_hits_guarded']:3d})")
    print(json.dumps(summary(para, diff), indent=1))
    if args.write:
        data["paraphrase"] = [[p["a"], p["b"], p["score"]] for p in para]
        data["different"] = [[d["a"], d["b"], d["kind"], d["score"]] for d in diff]
        data["figures"] = {**summary(para, diff), "table": rows}
        PAIRS.write_text(dump(data))


def dump(data: dict) -> str:
    """The pairs file with one pair (or table row) a line."""
    parts = []
    for key, value in data.items():
        if isinstance(value, list):
            items = ",\n".join("  " + json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f" {json.dumps(key)}: [\n{items}\n ]")
        elif isinstance(value, dict):
            inner = ",\n".join(
                f"  {json.dumps(k)}: " + (
                    "[\n" + ",\n".join("   " + json.dumps(r) for r in v) + "\n  ]" if isinstance(v, list)
                    else json.dumps(v, ensure_ascii=False))
                for k, v in value.items()
            )
            parts.append(f" {json.dumps(key)}: {{\n{inner}\n }}")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


if __name__ == "__main__":
    main()
