"""anthropic (Messages API): unified chat and text-completion requests out, answers, streams and errors back.

Facts relied on, from Anthropic's public API reference and guides (platform.claude.com/docs: "Messages",
"Streaming messages", "Claude API errors", "Vision", "Handle tool calls", "Parallel tool use"):

- ``POST {base}/messages`` with base ``https://api.anthropic.com/v1``; auth in ``x-api-key``; the
  ``anthropic-version`` header is required (``2023-06-01``); ``content-type: application/json``.
- Body: ``model``, ``messages`` (roles ``user`` / ``assistant`` only, turns alternating), ``max_tokens``
  (required), ``system`` (a string or a list of text blocks), ``temperature``, ``top_p``, ``stop_sequences``,
  ``stream``, ``metadata.user_id``, ``tools`` (``{name, description, input_schema}``), ``tool_choice``
  (``{type: auto | any | tool (+ name) | none}``, with ``disable_parallel_tool_use`` on auto/any/tool), ``thinking``;
  with ``any`` or ``tool`` the answer is tool_use blocks without text before them ("Handle tool calls": forced tool
  use prefills the assistant turn).
- Content blocks: ``text``; ``image`` with a ``base64`` source (``media_type``, ``data``) or a ``url`` source;
  ``document``; assistant ``tool_use`` (``id``, ``name``, ``input`` object); user ``tool_result`` (``tool_use_id``,
  ``content`` a string or blocks); ``thinking`` (``thinking``, ``signature``) and ``redacted_thinking`` (``data``).
- Answer: ``{id: msg_…, type: message, role: assistant, model, content: [blocks], stop_reason (end_turn,
  stop_sequence, max_tokens, tool_use, pause_turn, refusal), usage {input_tokens, output_tokens,
  cache_creation_input_tokens, cache_read_input_tokens}}``; input_tokens excludes the cached parts.
- Streams are SSE whose ``event:`` name matches the data's ``type``: ``message_start`` (the message with empty
  content and the input usage), per block ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``input_json_delta`` with ``partial_json``, ``thinking_delta``, ``signature_delta`` just before the thinking block
  stops) / ``content_block_stop``, then ``message_delta`` (``stop_reason``; usage counts are cumulative),
  ``message_stop``; ``ping`` events anywhere; ``error`` events in-band (e.g. ``overloaded_error``); new event types
  may appear and are to be ignored.
- Errors: ``{"type": "error", "error": {"type", "message"}, "request_id"}`` with 400 invalid_request_error, 401
  authentication_error, 402 billing_error, 403 permission_error, 404 not_found_error, 409 conflict_error, 413
  request_too_large, 429 rate_limit_error, 500 api_error, 504 timeout_error, 529 overloaded_error.

Choices made here: ``max_tokens`` is ``max_completion_tokens``, else ``max_tokens``, else 4096; system and developer
messages are joined with newlines into ``system`` (a list of text blocks when any part has ``cache_control``);
consecutive same-role turns are merged; what happens to each unified field is the data of ``request.CHAT_FIELDS`` and
``request.COMPLETION_FIELDS``: ``n > 1``, ``logprobs``, ``functions``/``function_call`` (and the ``function`` role)
are 400s; vendorA-only sampling fields (penalties, logit_bias, seed) and fields unknown here are dropped and named
in ``x-gateway-dropped-params``. ``response_format`` becomes a forced
output tool whose ``input_schema`` is the schema and whose input comes back as ``message.content``
(``structured_output``; chosen over the native ``output_config.format`` because a forced tool works on every model,
while native structured output is limited to recent models and a narrower schema dialect); since the API refuses
forced tool use while thinking is enabled ("Extended thinking": only ``auto`` / ``none`` with thinking),
``response_format`` with ``thinking`` is a 400 naming ``response_format``. Answers and chunks carry
``"system_fingerprint": null`` (the API has none). Upstream error
statuses are relayed unchanged (529 stays 529). Thinking is dropped unless the target's
``strict_vendorA_compliance`` is explicitly false; then it comes back as ``message.content_blocks`` (and as
``delta.content_blocks`` entries in streams). A text completion is one user message holding the prompt.
"""

from __future__ import annotations

from typing import Any

from gateway.http.errors import GatewayError
from gateway.providers.anthropic.request import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    DEFAULT_MAX_TOKENS,
    chat_body,
    completion_body,
)
from gateway.providers.anthropic.response import (
    PROVIDER,
    chat_completion,
    decode_message,
    error_from,
    text_completion,
)
from gateway.providers.anthropic.stream import AnthropicStream
from gateway.providers.base import (
    CHAT,
    COMPLETIONS,
    MESSAGES,
    MESSAGES_COUNT,
    ProviderAdapter,
    UpstreamCall,
    UpstreamResult,
)
from gateway.providers.structured_output import output_tool_name
from gateway.schema.config import Config
from gateway.upstream.request import UpstreamRequest

__all__ = ["AnthropicAdapter", "AnthropicStream", "BASE_URL", "API_VERSION", "DEFAULT_MAX_TOKENS"]

BASE_URL = "https://api.anthropic.com/v1"
API_VERSION = "2023-06-01"
PATH = "/messages"


def is_strict(target: Config) -> bool:
    """strict_vendorA_compliance: unset counts as true."""
    return getattr(target, "strict_vendorA_compliance", None) is not False


class AnthropicAdapter(ProviderAdapter):
    name = PROVIDER
    #: MESSAGES: the Messages API door forwards its body as sent (``resource_request``)
    endpoints = frozenset({CHAT, COMPLETIONS, MESSAGES, MESSAGES_COUNT})
    fields = {CHAT: CHAT_FIELDS, COMPLETIONS: COMPLETION_FIELDS}

    def url(self, call: UpstreamCall) -> str:
        base = call.target.custom_host or BASE_URL
        return base.rstrip("/") + PATH

    async def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        self.check_endpoint(call.endpoint)
        if call.endpoint == CHAT:
            body = chat_body(call.request, call.stream)
        else:
            body = completion_body(call.request, call.stream)
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION}
        api_key = call.target.api_key
        if api_key:
            headers["x-api-key"] = api_key
        return UpstreamRequest(self.url(call), headers, body)

    def resource_request(self, target: Any, method: str, path: str, query: str, body: Any,
                         content_type: str | None) -> UpstreamRequest:
        """The Messages API door's forwarded call (``/messages``, ``/messages/count_tokens``) with anthropic's
        auth; the door adds the client's ``anthropic-version`` / ``anthropic-beta``."""
        base = target.custom_host or BASE_URL
        headers = {"content-type": content_type or "application/json", "anthropic-version": API_VERSION}
        if target.api_key:
            headers["x-api-key"] = target.api_key
        return UpstreamRequest(base.rstrip("/") + path + (f"?{query}" if query else ""), headers, body, method)

    def parse_response(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> UpstreamResult:
        message = decode_message(body)
        if call.endpoint == CHAT:
            data, usage = chat_completion(message, call.model, is_strict(call.target),
                                          output_tool_name(call.request))
        else:
            data, usage = text_completion(message, call.model)
        return UpstreamResult(data, usage, message.model or call.model)

    def parse_error(self, call: UpstreamCall, status: int, headers: Any, body: bytes) -> GatewayError:
        return error_from(status, body, headers)

    def stream(self, call: UpstreamCall) -> AnthropicStream:
        options = getattr(call.request, "stream_options", None)
        include_usage = bool(options is not None and options.include_usage)
        output = output_tool_name(call.request) if call.endpoint == CHAT else None
        return AnthropicStream(call.endpoint == CHAT, is_strict(call.target), include_usage, call.model, output)
