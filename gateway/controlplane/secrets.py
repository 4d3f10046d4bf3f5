"""Encryption at rest of secrets the gateway stores (provider slugs' credentials, gateway-run batches' request
headers): AES-256-GCM with one gateway key.

The key comes from ``GATEWAY_SECRET_KEY`` (any text; its SHA-256 is the AES key, so use a long random value such
as ``openssl rand -base64 32``). Without it the gateway generates 32 random bytes once into ``<data dir>/secret.key``
(mode 0600, created atomically so every worker of a machine reads the same key). Instances that share one Redis
but not one data directory must set the same ``GATEWAY_SECRET_KEY``: a record sealed under another key cannot be
opened, and the error says so.

A sealed value is text: ``v1.<key id>.<base64url(nonce | ciphertext+tag)>``. The key id (8 hex of the key's own
SHA-256) tells a wrong key from a damaged value. The caller's ``context`` (record kind, workspace and id) is
authenticated with the value, so a sealed value copied into another record does not open.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets as random_source
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cryptography (some 6 MB resident) is loaded when a worker first opens its box
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_FILE = "secret.key"
_VERSION = "v1"


class SecretError(Exception):
    """A sealed value could not be opened (another key sealed it, or it was damaged)."""


def _key_id(key: bytes) -> str:
    return hashlib.sha256(b"gateway-key-id:" + key).hexdigest()[:8]


class SecretBox:
    """Seals and opens small secrets with one AES-256-GCM key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the secret key must be 32 bytes")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead: AESGCM = AESGCM(key)
        self.key_id = _key_id(key)

    @classmethod
    def from_text(cls, text: str) -> SecretBox:
        """The box for a ``GATEWAY_SECRET_KEY`` value."""
        if not text.strip():
            raise ValueError("GATEWAY_SECRET_KEY is empty")
        return cls(hashlib.sha256(text.encode("utf-8")).digest())

    def seal(self, plaintext: bytes, context: str) -> str:
        nonce = random_source.token_bytes(12)
        sealed = nonce + self._aead.encrypt(nonce, plaintext, context.encode("utf-8"))
        return f"{_VERSION}.{self.key_id}.{base64.urlsafe_b64encode(sealed).decode()}"

    def open(self, token: str, context: str) -> bytes:
        version, _, rest = token.partition(".")
        key_id, _, payload = rest.partition(".")
        if version != _VERSION or not payload:
            raise SecretError("the stored secret is not in a known format")
        if key_id != self.key_id:
            raise SecretError(
                f"the stored secret was sealed with another secret key (id {key_id}; this gateway's is "
                f"{self.key_id}): set the same GATEWAY_SECRET_KEY on every instance"
            )
        from cryptography.exceptions import InvalidTag

        try:
            sealed = base64.urlsafe_b64decode(payload.encode())
            return self._aead.decrypt(sealed[:12], sealed[12:], context.encode("utf-8"))
        except (InvalidTag, ValueError):
            raise SecretError("the stored secret is damaged or belongs to another record") from None


def generated_key(data_dir: Path) -> bytes:
    """The key in ``data_dir/secret.key``, generated there first when missing (race-free across processes)."""
    path = data_dir / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    temp = data_dir / f".{KEY_FILE}.{os.getpid()}.{random_source.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(base64.b64encode(random_source.token_bytes(32)) + b"\n")
        try:
            os.link(temp, path)  # atomic, and fails when another process made the file first
        except FileExistsError:
            pass
    finally:
        temp.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    key = base64.b64decode(path.read_bytes().strip())
    if len(key) != 32:
        raise ValueError(f"{path} does not hold a 32-byte base64 key")
    return key


def open_box(secret_key: str | None, data_dir: Path) -> SecretBox:
    """The gateway's box: from ``GATEWAY_SECRET_KEY`` when set, else from the generated key file."""
    if secret_key:
        return SecretBox.from_text(secret_key)
    return SecretBox(generated_key(data_dir))
