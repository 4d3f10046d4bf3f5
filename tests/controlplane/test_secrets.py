"""Sealing provider secrets: round trips, a wrong key or another record's context refused, the key file."""

from __future__ import annotations

import multiprocessing

import pytest

from gateway.controlplane.secrets import KEY_FILE, SecretBox, SecretError, generated_key, open_box


def test_sealed_values_open_with_the_same_key_and_context():
    box = SecretBox.from_text("a long random value")
    sealed = box.seal(b"sk-secret", "provider/ws/slug")
    assert sealed.startswith("v1.") and "sk-secret" not in sealed
    assert box.open(sealed, "provider/ws/slug") == b"sk-secret"
    assert box.seal(b"sk-secret", "provider/ws/slug") != sealed  # a fresh nonce every time


def test_another_key_is_named_in_the_error():
    sealed = SecretBox.from_text("one").seal(b"x", "c")
    with pytest.raises(SecretError, match="GATEWAY_SECRET_KEY"):
        SecretBox.from_text("two").open(sealed, "c")


def test_a_value_moved_to_another_record_or_damaged_does_not_open():
    box = SecretBox.from_text("k")
    sealed = box.seal(b"x", "provider/ws/a")
    with pytest.raises(SecretError):
        box.open(sealed, "provider/ws/b")
    with pytest.raises(SecretError):
        box.open(sealed[:-4] + "AAAA", "provider/ws/a")
    with pytest.raises(SecretError):
        box.open("nonsense", "provider/ws/a")


def _key_of(path: str, out) -> None:
    from pathlib import Path

    out.put(generated_key(Path(path)))


def test_the_generated_key_is_made_once_even_by_racing_processes(tmp_path):
    queue = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(target=_key_of, args=(str(tmp_path), queue))
             for _ in range(4)]
    for proc in procs:
        proc.start()
    keys = {queue.get(timeout=30) for _ in procs}
    for proc in procs:
        proc.join(30)
    assert len(keys) == 1 and len(keys.pop()) == 32
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]


def test_the_setting_wins_over_the_key_file(tmp_path):
    from_file = open_box(None, tmp_path)
    from_setting = open_box("configured", tmp_path)
    assert from_file.key_id != from_setting.key_id
    assert open_box(None, tmp_path).key_id == from_file.key_id
