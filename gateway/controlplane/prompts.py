"""Prompt templates: stored per workspace with every version kept, compiled once, rendered into chat requests.

A template is ``{name, model, provider?, messages, hyperparameters?}``: ``messages`` are chat messages whose text
(``content`` as a string, the ``text`` and ``image_url.url`` of content parts, and ``name``) may use mustache
variables (``gateway.controlplane.mustache``: the supported subset); ``provider`` is a provider slug of the same
workspace; ``hyperparameters`` are default chat fields (``Hyperparameters``: every chat field but ``messages`` and
``model``, with the chat request's limits).

Versions: creation is version 1; every update stores the whole template as the next version and keeps the earlier
ones (``GET /v1/prompts/{id}/versions``, ``.../versions/{n}``). The prompt itself is its newest version. Updates at
once (``PromptVersions.next``): a version record is written only while its number is free
(``StateStore.record_create``), so each update's number is the one its write won; one that finds its number taken
builds on the version that took it (so neither update's change is lost) and tries the next number. The prompt then
becomes the new version unless a later one is already stored (``PromptVersions.make_current``): two updates at once
give two versions, each with its own template, and the prompt is the later one.

Rendering (``POST /v1/prompts/{id}/render``): the body holds ``variables`` and, at its root, any hyperparameter
(``Hyperparameters``' fields) and the ``model`` and ``messages`` every client library sends; the answer's ``data``
is a chat request: the template's ``messages`` rendered followed by the request's own (as sent, never rendered),
the template's ``model`` (the request's is ignored), and the template's hyperparameters with the request's over
them. A required variable that is missing is a 400 naming it
(``variables.<name>``). ``data`` is checked as a chat body (so it can be sent to ``/v1/chat/completions`` as is).
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import TYPE_CHECKING, Annotated, Any, Callable

import msgspec

from gateway.controlplane.mustache import (
    MissingVariable,
    RenderBudget,
    RenderLimit,
    TemplateError,
    compile_template,
    render,
    required_variables,
)
from gateway.controlplane.records import UPDATE_ATTEMPTS, Entity, Repository, now_iso, store_unavailable
from gateway.http.errors import Conflict, InvalidRequest, NotFound
from gateway.schema.chat import ChatRequest, FunctionDefinition, Message, Tool, parse_chat
from gateway.schema.common import BodyDecoder
from gateway.state.base import StateStoreError

KIND = "prompt"
VERSION_KIND = "prompt_version"
#: how many version numbers one update tries before a 409: each number taken is another update's version, so this
#: many updates of one prompt at once all get one
VERSION_ATTEMPTS = 20
Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


#: kept as sent, as plain objects: decoded as Structs their unset members would be written back as nulls
_KEPT_AS_SENT = (Tool, FunctionDefinition)


def _as_sent(type_: Any) -> Any:
    """A chat field's type, with tool and function definitions read as plain objects: the same limits (ranges,
    lengths, choices) as a chat request's; the definitions themselves are checked by ``check_request``."""
    if type_ in _KEPT_AS_SENT:
        return dict[str, Any]
    origin, args = typing.get_origin(type_), typing.get_args(type_)
    if origin is None or not args:
        return type_
    if origin is Annotated:
        return Annotated[(_as_sent(args[0]), *type_.__metadata__)]
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, (_as_sent(a) for a in args))
    return origin[tuple(_as_sent(a) for a in args)]


#: the chat fields a template may default and a render may set: every chat field but ``messages`` and ``model``
HYPERPARAMETER_FIELDS = tuple(f for f in msgspec.structs.fields(ChatRequest) if f.name not in ("messages", "model"))

if TYPE_CHECKING:
    class Hyperparameters(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
        """The chat fields a template may default and a render may set, typed as the chat request types them."""
else:
    Hyperparameters = msgspec.defstruct(
        "Hyperparameters", [(f.name, _as_sent(f.type), None) for f in HYPERPARAMETER_FIELDS],
        forbid_unknown_fields=True, omit_defaults=True, module=__name__)


class RenderBody(Hyperparameters, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``POST /v1/prompts/{id}/render`` and ``/completions`` (and of a chat request whose config has
    ``prompt_id``): variables plus hyperparameters, and the ``model`` and ``messages`` client libraries always
    send (the messages go after the template's; the template's model is used)."""

    variables: dict[str, Any] = {}
    model: str | None = None
    messages: list[dict[str, Any]] | None = None


class PromptBody(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /v1/prompts`` (name, model and messages required) and ``PUT /v1/prompts/{id}``."""

    name: str | Unset = UNSET
    model: str | Unset = UNSET
    provider: str | None | Unset = UNSET
    messages: list[dict[str, Any]] | Unset = UNSET
    hyperparameters: Hyperparameters | None | Unset = UNSET
    workspace_id: str | None = None


class Prompt(Entity, kw_only=True):
    object: str = "prompt"
    name: str
    model: str
    #: a provider slug of the workspace (stored without ``@``), or None
    provider: str | None = None
    messages: list[dict[str, Any]]
    hyperparameters: dict[str, Any] = {}
    version: int = 1
    #: the variables a render must be given
    variables: list[str] = []


render_body = BodyDecoder(RenderBody)
_hyper_encoder = msgspec.json.Encoder()


# --- templates -------------------------------------------------------------------------------------------------


class Template:
    """A prompt compiled: for each message, its text fields as compiled mustache, ready to render."""

    __slots__ = ("prompt", "parts", "required")

    def __init__(self, prompt: Prompt) -> None:
        self.prompt = prompt
        self.parts = [_compile_value(m, f"messages[{i}]") for i, m in enumerate(prompt.messages)]
        required: list[str] = []
        for part in self.parts:
            for name in _required(part):
                if name not in required:
                    required.append(name)
        self.required = required

    def messages(self, variables: dict[str, Any]) -> list[Any]:
        """The template's messages rendered with ``variables``, all within one render's limits."""
        budget = RenderBudget()
        try:
            return [_render_value(part, variables, budget) for part in self.parts]
        except MissingVariable as missing:
            raise InvalidRequest(f"missing variable '{missing.name}': the template needs it",
                                 param=f"variables.{missing.name}") from None
        except RenderLimit as exc:
            raise InvalidRequest(f"the prompt cannot be rendered with these variables: {exc}",
                                 param="variables") from None


_TEXT_KEYS = frozenset({"content", "text", "name", "url"})


def _compile_value(value: Any, path: str, key: str = "") -> Any:
    """Compile the text fields of a message (content, text parts, names, image urls); keep other values."""
    if isinstance(value, str):
        if key not in _TEXT_KEYS:
            return value
        try:
            return ("template", compile_template(value))
        except TemplateError as exc:
            raise InvalidRequest(f"{path} is not a valid template: {exc}", param=path) from None
    if isinstance(value, dict):
        return {k: _compile_value(v, f"{path}.{k}", k if k != "role" else "") for k, v in value.items()}
    if isinstance(value, list):
        return [_compile_value(v, f"{path}[{i}]", key) for i, v in enumerate(value)]
    return value


def _required(part: Any) -> list[str]:
    if isinstance(part, tuple):
        return required_variables(part[1])
    if isinstance(part, dict):
        return [n for v in part.values() for n in _required(v)]
    if isinstance(part, list):
        return [n for v in part for n in _required(v)]
    return []


def _render_value(part: Any, variables: dict[str, Any], budget: RenderBudget) -> Any:
    if isinstance(part, tuple):
        return render(part[1], variables, budget)
    if isinstance(part, dict):
        return {k: _render_value(v, variables, budget) for k, v in part.items()}
    if isinstance(part, list):
        return [_render_value(v, variables, budget) for v in part]
    return part


# --- validation of create and update bodies --------------------------------------------------------------------


def check_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not messages:
        raise InvalidRequest("messages must hold at least one message", param="messages")
    for i, message in enumerate(messages):
        try:
            msgspec.convert(message, Message)
        except msgspec.ValidationError as exc:
            detail = str(exc)
            where = detail.rsplit("`$.", 1)[-1].rstrip("`") if "`$." in detail else ""
            param = f"messages[{i}].{where}" if where else f"messages[{i}]"
            raise InvalidRequest(f"invalid {param}: {detail.split(' - at ')[0]}", param=param) from None
    return messages


def hyperparameters_of(value: Hyperparameters | None) -> dict[str, Any]:
    return {} if value is None else msgspec.to_builtins(value)


def check_request(messages: list[Any], model: str, hyperparameters: dict[str, Any], where: str = "") -> bytes:
    """The chat body ``{messages, model, **hyperparameters}`` encoded, when it is a valid chat request; else the
    chat validator's 400 (its ``param`` prefixed with ``where``)."""
    body = _hyper_encoder.encode({"messages": messages, "model": model, **hyperparameters})
    try:
        parse_chat(body)
    except InvalidRequest as exc:
        if where and exc.param and exc.param not in ("messages", "model") and not exc.param.startswith("messages"):
            raise InvalidRequest(exc.message, param=f"{where}{exc.param}") from None
        raise
    return body


def build(fields: dict[str, Any], workspace: str) -> tuple[Prompt, Template]:
    """A prompt record (version 1 unless ``fields`` says) and its compiled template, validated."""
    name = fields.get("name")
    if not name or len(name) > 255:
        raise InvalidRequest("name must be 1..255 characters", param="name")
    model = fields.get("model")
    if not model:
        raise InvalidRequest("model is required", param="model")
    messages = check_messages(fields.get("messages") or [])
    hyper = fields.get("hyperparameters") or {}
    prompt = Prompt(name=name, model=model, provider=fields.get("provider"), messages=messages,
                    hyperparameters=hyper, workspace_id=workspace, version=fields.get("version", 1))
    template = Template(prompt)
    check_request(prompt.messages, model, hyper, "hyperparameters.")
    prompt.variables = template.required
    template.prompt = prompt
    return prompt, template


def rendered(template: Template, body: RenderBody) -> dict[str, Any]:
    """The render answer's ``data``: the template's messages then the request's, the template's model, and the
    merged hyperparameters (request over template)."""
    prompt = template.prompt
    messages = template.messages(body.variables)
    if body.messages:
        messages.extend(check_messages(body.messages))
    given = msgspec.to_builtins(body)
    for name in ("variables", "model", "messages"):
        given.pop(name, None)
    data: dict[str, Any] = {"messages": messages, "model": prompt.model}
    data.update(prompt.hyperparameters)
    data.update(given)
    check_request(messages, prompt.model, {k: v for k, v in data.items() if k not in ("messages", "model")})
    return data


# --- storage: the prompt and every version of it ----------------------------------------------------------------


class PromptVersions:
    """Every version of every prompt (kind ``prompt_version``, id ``<prompt id>:<version>``), over the prompts'
    repository ``repo``."""

    def __init__(self, repo: Repository[Prompt]) -> None:
        self.repo = repo
        self.store = repo.store
        self._decoder = msgspec.json.Decoder(Prompt)

    async def first(self, prompt: Prompt) -> None:
        """Store version 1 of a prompt just created (its id is new: the number is free)."""
        await self._create(prompt)

    async def next(self, current: Prompt, make: Callable[[Prompt], Prompt]) -> Prompt:
        """Store the version after ``current``: ``make(base)`` (the update applied to ``base``, validated) numbered
        ``base.version + 1`` and stamped now, written only while no version holds that number. When another update
        took the number, its version is the base and the next number is tried, so every update gets a number of
        its own with its own template, built on the version before it. Returns the version stored; 404 when the
        prompt's versions are deleted meanwhile."""
        base = current
        for _ in range(VERSION_ATTEMPTS):
            version = msgspec.structs.replace(make(base), version=base.version + 1, last_updated_at=now_iso())
            if await self._create(version):
                return version
            taken = await self._read(current, version.version)
            if taken is None:  # deleted since: the prompt with it
                raise NotFound(f"no prompt with id '{current.id}'", param="prompt_id")
            base = taken
        raise Conflict(f"the prompt '{current.id}' changed while it was being updated; retry", param="prompt_id")

    async def make_current(self, version: Prompt) -> None:
        """Store ``version`` as the prompt itself (as it is, so the prompt and its version read alike), unless the
        stored prompt is already at that version or a later one (another update's, built on this one). 404 when
        the prompt was deleted meanwhile (this version is deleted too, so nothing of the prompt is left)."""
        for _ in range(UPDATE_ATTEMPTS):
            stored = await self.repo.lookup(version.workspace_id, version.id)
            if stored is None:
                await self._delete(version.id, version.version, msgspec.json.encode(version))
                raise NotFound(f"no prompt with id '{version.id}'", param="prompt_id")
            if stored.version >= version.version or await self.repo.rewrite(version, expected=stored):
                return
        raise Conflict(f"the prompt '{version.id}' changed while it was being updated; retry", param="prompt_id")

    async def _create(self, version: Prompt) -> bool:
        try:
            return await self.store.record_create(VERSION_KIND, f"{version.id}:{version.version}",
                                                  version.workspace_id, msgspec.json.encode(version))
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def _read(self, prompt: Prompt, version: int) -> Prompt | None:
        try:
            found = await self.store.record_get(VERSION_KIND, f"{prompt.id}:{version}")
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        if found is None or found.workspace != prompt.workspace_id:
            return None
        return self._decoder.decode(found.doc)

    async def _delete(self, id: str, version: int, doc: bytes) -> None:
        try:
            await self.store.record_delete_if(VERSION_KIND, f"{id}:{version}", doc)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None

    async def list(self, prompt: Prompt) -> list[Prompt]:
        """The prompt's versions, oldest first."""
        try:
            found = await self.store.record_list(VERSION_KIND, prompt.workspace_id)
        except StateStoreError as exc:
            raise store_unavailable(exc) from None
        prefix = f"{prompt.id}:"
        versions = [self._decoder.decode(r.doc) for r in found if r.id.startswith(prefix)]
        versions.sort(key=lambda p: p.version)
        return versions

    async def get(self, prompt: Prompt, version: int) -> Prompt:
        found = await self._read(prompt, version)
        if found is None:
            raise NotFound(f"prompt '{prompt.id}' has no version {version}", param="version")
        return found

    async def delete_all(self, prompt: Prompt) -> None:
        for version in await self.list(prompt):
            try:
                await self.store.record_delete(VERSION_KIND, f"{prompt.id}:{version.version}")
            except StateStoreError as exc:
                raise store_unavailable(exc) from None
