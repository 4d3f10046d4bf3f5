"""Shared wire types and the one decoder front: msgspec errors become 400s that name the field (read by
``gateway.http.fields.read_fault``, worded as docs/http-api.md says)."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

import msgspec

from gateway.http.errors import InvalidRequest
from gateway.http.fields import problem_words, read_fault

T = TypeVar("T")
#: the spec's metadata limits (batches, fine-tuning jobs, chat and Responses requests: vendorA's own)
METADATA_PAIRS = 16
METADATA_KEY_CHARS = 64
METADATA_VALUE_CHARS = 512

Penalty = Annotated[float, msgspec.Meta(ge=-2, le=2)]
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]
TopP = Annotated[float, msgspec.Meta(ge=0, le=1)]
ChoiceCount = Annotated[int, msgspec.Meta(ge=1, le=128)]
#: ``seed`` is a signed 64-bit integer upstream; a larger value is a 400 here rather than an upstream surprise
Seed = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
LogitBias = dict[str, Annotated[float, msgspec.Meta(ge=-100, le=100)]]
Stop = str | Annotated[list[str], msgspec.Meta(max_length=4)]

def is_not_utf8(exc: BaseException) -> bool:
    """Whether a decoder failed because its input is not UTF-8: msgspec before 0.23 raises ``UnicodeDecodeError``,
    0.23 and later a ``DecodeError`` saying "Invalid UTF-8 encoded string"."""
    return isinstance(exc, UnicodeDecodeError) or (isinstance(exc, msgspec.DecodeError) and "UTF-8" in str(exc))


def validation_error(exc: msgspec.MsgspecError, what: str = "body") -> InvalidRequest:
    """A 400 naming the field msgspec complained about."""
    if is_not_utf8(exc):
        return not_utf8(what)
    fault = read_fault(exc)
    if fault.kind == "missing":
        return InvalidRequest(f"{fault.path} is required", param=fault.path)
    if fault.kind == "unknown":
        return InvalidRequest(f"unknown field {fault.path}", param=fault.path)
    if not isinstance(exc, msgspec.ValidationError) and not fault.path:
        return InvalidRequest(f"request {what} is not valid JSON: {exc}", param=None)
    if not fault.path:  # the document itself: msgspec's words as they are
        return InvalidRequest(f"invalid request {what}: {exc}", param=None)
    return InvalidRequest(f"invalid {fault.path}: {problem_words(fault)}", param=fault.path)


def not_utf8(what: str = "body") -> InvalidRequest:
    """A 400 for JSON text that is not valid UTF-8 (JSON text must be)."""
    return InvalidRequest(f"request {what} is not valid UTF-8: JSON text must be UTF-8 encoded", param=None)


def unreadable(exc: UnicodeDecodeError | RecursionError, what: str = "body") -> InvalidRequest:
    """A 400 for JSON text a decoder could not read: not UTF-8, or nested deeper than decoding goes."""
    if isinstance(exc, RecursionError):
        return InvalidRequest(f"request {what} nests too deeply to decode", param=None)
    return not_utf8(what)


class BodyDecoder(Generic[T]):
    """A reusable msgspec decoder for one endpoint's body type; errors become 400s naming the field."""

    __slots__ = ("_decoder", "_what")

    def __init__(self, type_: type[T], what: str = "body") -> None:
        self._decoder = msgspec.json.Decoder(type_)
        self._what = what

    def decode(self, body: bytes) -> T:
        if not body:
            raise InvalidRequest(f"request {self._what} is empty; a JSON object is required")
        try:
            decoded = self._decoder.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise validation_error(exc, self._what) from None
        except (UnicodeDecodeError, RecursionError) as exc:
            raise unreadable(exc, self._what) from None
        if not body.isascii():  # fields the Struct skips are not checked by the decoder: JSON text is UTF-8
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                raise not_utf8(self._what) from None
        return decoded


class StreamOptions(msgspec.Struct, frozen=True, gc=False):
    include_usage: bool | None = None


class Usage(msgspec.Struct, gc=False, omit_defaults=True):
    """Token usage as the unified responses carry it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


def check_metadata(metadata: Any, field: str = "metadata") -> dict[str, str] | None:
    """The spec's metadata rules: an object of at most 16 string pairs, keys <= 64 and values <= 512 characters."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise InvalidRequest(f"{field} must be an object of string values", param=field)
    if len(metadata) > METADATA_PAIRS:
        raise InvalidRequest(f"{field} may hold at most {METADATA_PAIRS} pairs, got {len(metadata)}", param=field)
    for key, value in metadata.items():
        if len(key) > METADATA_KEY_CHARS:
            raise InvalidRequest(f"{field} key {key[:20]!r}... is longer than {METADATA_KEY_CHARS} characters",
                                 param=f"{field}.{key[:METADATA_KEY_CHARS]}")
        if not isinstance(value, str):
            raise InvalidRequest(f"{field}.{key} must be a string", param=f"{field}.{key}")
        if len(value) > METADATA_VALUE_CHARS:
            raise InvalidRequest(f"{field}.{key} is longer than {METADATA_VALUE_CHARS} characters",
                                 param=f"{field}.{key}")
    return metadata
