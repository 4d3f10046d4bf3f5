"""Mock of cloudC: Gemini generateContent / streamGenerateContent, text-embedding predict, and the OAuth token endpoint.

Imagen models' ``:predict`` answers generated images (``_imagen``). Model routes
(``/v1/projects/{p}/locations/{r}/publishers/google/models/{m}:{method}``) require
``Authorization: Bearer <token>`` where the token is ``TEST_TOKEN`` or one this mock's token endpoint issued (else
401 in Google's error format ``{"error": {"code", "message", "status"}}``). ``streamGenerateContent?alt=sse`` answers
server-sent events ``data: {GenerateContentResponse}`` with CRLF line ends like the real service (without
``alt=sse``: one JSON array). Answers carry ``modelVersion``, ``responseId``, ``createTime`` and ``usageMetadata``;
the last stream event holds ``finishReason`` and ``usageMetadata``; ``candidateCount`` gives that many candidates;
``thinkingConfig.includeThoughts`` adds a ``thought: true`` part and ``thoughtsTokenCount``. Scenario knobs beyond
kit's: a step with status 200 and ``error_type`` ``SAFETY`` (or another finish reason such as ``MAX_TOKENS``) ends
the candidate with that finishReason (SAFETY with no content). ``generationConfig.responseMimeType``
``application/json`` makes the reply JSON: made from ``responseSchema`` or ``responseJsonSchema``
(``schema_sample``), ``{"answer": ...}`` without a schema. Like the service, ``responseSchema`` accepts only the
fields of its OpenAPI-subset Schema (``$ref``, ``$defs``, ``additionalProperties``... are a 400; they belong in
``responseJsonSchema``), may not be sent together with ``responseJsonSchema``, and needs the JSON MIME type.

Token endpoint ``POST /token`` (form ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>``)
verifies the assertion: RS256 signature against the public key registered for its ``iss``, ``aud`` equal to the
registered token_uri, the cloud-platform ``scope``, ``iat``/``exp`` (at most an hour, not expired); it answers
``{"access_token", "expires_in": 3599, "token_type": "Bearer"}`` or 400 ``{"error": "invalid_grant",
"error_description"}``. Test fixtures register a service account's public key with
``POST /cloudC/service-accounts`` ``{"client_email", "public_key" (PEM), "token_uri"}``;
``GET /cloudC/service-accounts/{client_email}`` answers ``{"issued": n}`` (tokens issued to that account).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from urllib.parse import parse_qs

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from gateway_mock import anthropic, vendorA_media
from gateway_mock.asgi import Send
from gateway_mock.kit import (
    MockRequest,
    count_tokens,
    end_stream,
    respond_json,
    retry_headers,
    start_stream,
    stream_part,
)
from gateway_mock.schema_sample import sample
from gateway_mock.vendorA import embedding_vector

#: a bearer token the model routes always accept (test data, not a credential)
TEST_TOKEN = "ya29.cloudc-mock-test-token"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "NOT_IMPLEMENTED",
           503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
_encode = msgspec.json.encode


def google_error(status: int, message: str) -> dict:
    return {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}


async def error(req: MockRequest, send: Send) -> None:
    step = req.step
    if req.path == "/token":
        await respond_json(send, step.status, {"error": step.error_type or "invalid_grant",
                                               "error_description": step.message or "mock token refusal"})
        return
    await respond_json(send, step.status, google_error(step.status, step.message or f"mock cloudC error {step.status}"),
                       retry_headers(step))


# --- token endpoint ------------------------------------------------------------------------------------------

def _unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _verify(accounts: dict[str, tuple[rsa.RSAPublicKey, str]], assertion: str) -> tuple[str | None, str]:
    """(client_email, "") when the assertion is valid for one of ``accounts``, else (None, why)."""
    try:
        head_b64, claims_b64, sig_b64 = assertion.split(".")
        header = msgspec.json.decode(_unb64(head_b64))
        claims = msgspec.json.decode(_unb64(claims_b64))
        signature = _unb64(sig_b64)
    except (ValueError, msgspec.DecodeError):
        return None, "malformed JWT assertion"
    if header.get("alg") != "RS256" or header.get("typ") != "JWT":
        return None, "JWT header must be alg RS256, typ JWT"
    email = claims.get("iss")
    account = accounts.get(email) if isinstance(email, str) else None
    if account is None:
        return None, f"unknown service account {email!r}"
    public_key, token_uri = account
    try:
        public_key.verify(signature, f"{head_b64}.{claims_b64}".encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return None, "Invalid JWT Signature."
    now = time.time()
    if claims.get("aud") != token_uri:
        return None, f"aud must be {token_uri}"
    if SCOPE not in str(claims.get("scope", "")).split():
        return None, "scope must include cloud-platform"
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        return None, "iat and exp must be integers"
    if exp <= now or iat > now + 60 or exp - iat > 3600:
        return None, "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
    return email, ""


async def token(req: MockRequest, send: Send) -> None:
    form = parse_qs(req.body.decode("utf-8", "replace"))
    if form.get("grant_type") != [GRANT_TYPE] or len(form.get("assertion", [])) != 1:
        await respond_json(send, 400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"})
        return
    email, why = _verify(req.state.service_accounts, form["assertion"][0])
    if email is None:
        await respond_json(send, 400, {"error": "invalid_grant", "error_description": why})
        return
    access = "ya29.mock-" + os.urandom(16).hex()
    req.state.issued_tokens.add(access)
    req.state.issued_count[email] = req.state.issued_count.get(email, 0) + 1
    await respond_json(send, 200, {"access_token": access, "expires_in": 3599, "token_type": "Bearer"})


async def register(req: MockRequest, send: Send) -> None:
    doc = req.json()
    try:
        key = serialization.load_pem_public_key(doc["public_key"].encode())
        if not isinstance(key, rsa.RSAPublicKey):
            raise ValueError("public_key must be an RSA key")
        req.state.service_accounts[doc["client_email"]] = (key, doc["token_uri"])
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        await respond_json(send, 400, {"error": f"bad service account registration: {exc}"})
        return
    req.state.issued_count.setdefault(doc["client_email"], 0)
    await respond_json(send, 200, {"ok": True})


async def issued(req: MockRequest, send: Send) -> None:
    await respond_json(send, 200, {"issued": req.state.issued_count.get(req.match.group("email"), 0)})


# --- model routes --------------------------------------------------------------------------------------------

def _authorized(req: MockRequest) -> bool:
    value = req.headers.get("authorization", "")
    if value[:7].lower() != "bearer ":
        return False
    supplied = value[7:].strip()
    return supplied == TEST_TOKEN or supplied in req.state.issued_tokens


def _prompt_text(doc: dict) -> str:
    texts = []
    for content in [doc.get("systemInstruction") or {}, *(doc.get("contents") or [])]:
        for part in content.get("parts") or []:
            if "text" in part:
                texts.append(part["text"])
            elif "functionResponse" in part:
                texts.append(_encode(part["functionResponse"]).decode())
    return " ".join(texts)


def _first_function(doc: dict) -> str | None:
    for tool in doc.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or []:
            return declaration.get("name")
    return None


#: the fields of the generateContent Schema object (an OpenAPI 3.0 subset)
_SCHEMA_FIELDS = frozenset({"type", "format", "title", "description", "nullable", "default", "items", "minItems",
                            "maxItems", "enum", "properties", "propertyOrdering", "required", "minProperties",
                            "maxProperties", "minimum", "maximum", "minLength", "maxLength", "pattern", "example",
                            "anyOf"})


class BadRequest(Exception):
    """A request the service refuses with 400 INVALID_ARGUMENT."""


def _check_schema(schema: object, where: str) -> None:
    if not isinstance(schema, dict):
        raise BadRequest(f"Invalid value at '{where}': expected an object")
    for key, value in schema.items():
        if key not in _SCHEMA_FIELDS:
            raise BadRequest(f'Invalid JSON payload received. Unknown name "{key}" at \'{where}\': Cannot find field.')
        if key == "properties":
            for name, sub in value.items():
                _check_schema(sub, f"{where}.properties[{name}].value")
        elif key == "items":
            _check_schema(value, f"{where}.items")
        elif key == "anyOf":
            for i, sub in enumerate(value):
                _check_schema(sub, f"{where}.any_of[{i}]")


def _json_reply(doc: dict) -> str | None:
    """The JSON text a JSON-mode request gets (None for text mode); raises BadRequest like the service."""
    config = doc.get("generationConfig") or {}
    schema, json_schema = config.get("responseSchema"), config.get("responseJsonSchema")
    if schema is not None and json_schema is not None:
        raise BadRequest("responseSchema and responseJsonSchema may not both be set.")
    if schema is not None:
        _check_schema(schema, "generation_config.response_schema")
    if config.get("responseMimeType") != "application/json":
        if schema is not None or json_schema is not None:
            raise BadRequest("response_mime_type must be application/json when a response schema is set.")
        return None
    return json.dumps(sample(schema if schema is not None else json_schema))


def _json_pieces(text: str) -> list[str]:
    cut = text.find(":")
    return [text[:cut], text[cut:]] if cut > 0 else [text]


def _meta(model: str) -> dict:
    return {"modelVersion": model, "createTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "responseId": os.urandom(9).hex()}


def _usage(prompt: str, completion: str, candidates: int, thoughts: int) -> dict:
    p, c = count_tokens(prompt), count_tokens(completion) * candidates
    usage = {"promptTokenCount": p, "candidatesTokenCount": c, "totalTokenCount": p + c + thoughts,
             "trafficType": "ON_DEMAND"}
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return usage


async def model_route(req: MockRequest, send: Send) -> None:
    if not _authorized(req):
        await respond_json(send, 401, google_error(
            401, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                 "other valid authentication credential."))
        return
    method = req.match.group("method")
    if method == "predict":
        await _predict(req, send)
        return
    try:
        json_reply = _json_reply(req.json())
    except BadRequest as exc:
        await respond_json(send, 400, google_error(400, str(exc)))
        return
    if method == "generateContent":
        await _generate(req, send, json_reply)
    else:
        await _stream(req, send, "alt=sse" in req.query.split("&"), json_reply)


#: Imagen's aspect ratios and the size the mock draws each at (small: the content is made up)
_IMAGEN_SIZES = {"1:1": (64, 64), "3:4": (48, 64), "4:3": (64, 48), "9:16": (36, 64), "16:9": (64, 36)}


async def _imagen(req: MockRequest, send: Send, doc: dict) -> None:
    """Imagen ``:predict``: ``instances[0].prompt``, ``parameters.sampleCount`` (1-4), ``aspectRatio``,
    ``outputOptions.mimeType``; predictions ``{"bytesBase64Encoded", "mimeType"}``; a prompt holding ``unsafe``
    gets a ``raiFilteredReason`` prediction without an image, as the platform's safety filter answers."""
    instances = doc.get("instances") or []
    prompt = str(instances[0].get("prompt", "")) if instances and isinstance(instances[0], dict) else ""
    parameters = doc.get("parameters") or {}
    count = parameters.get("sampleCount", 1)
    ratio = parameters.get("aspectRatio", "1:1")
    if not prompt or not isinstance(count, int) or not 1 <= count <= 4 or ratio not in _IMAGEN_SIZES:
        await respond_json(send, 400, google_error(400, "Invalid instance or parameters for Imagen predict."))
        return
    mime = (parameters.get("outputOptions") or {}).get("mimeType", "image/png")
    predictions: list[dict] = []
    for i in range(count):
        if "unsafe" in prompt:
            predictions.append({"raiFilteredReason": "The prompt could not be submitted."})
        else:
            image = vendorA_media.png(*_IMAGEN_SIZES[ratio], seed=len(prompt) + i)
            predictions.append({"bytesBase64Encoded": base64.b64encode(image).decode(), "mimeType": mime})
    await respond_json(send, 200, {"predictions": predictions})


async def _predict(req: MockRequest, send: Send) -> None:
    doc = req.json()
    if "imagen" in req.match.group("model"):
        await _imagen(req, send, doc)
        return
    dims = (doc.get("parameters") or {}).get("outputDimensionality") or 8
    predictions = []
    chars = 0
    for instance in doc.get("instances") or []:
        text = str(instance.get("content", ""))
        chars += len(text)
        predictions.append({"embeddings": {"values": embedding_vector(text, dims),
                                           "statistics": {"token_count": count_tokens(text), "truncated": False}}})
    await respond_json(send, 200, {"predictions": predictions, "metadata": {"billableCharacterCount": chars}})


def _plan(req: MockRequest) -> tuple[dict, int, bool, str | None, str | None]:
    """(request doc, candidate count, thoughts wanted, function to call, finish reason override)."""
    doc = req.json()
    config = doc.get("generationConfig") or {}
    count = config.get("candidateCount") or 1
    thoughts = bool((config.get("thinkingConfig") or {}).get("includeThoughts"))
    function = _first_function(doc) if req.step.tool_call else None
    step = req.step
    override = step.error_type if step.status == 200 and step.error_type else None
    return doc, count, thoughts, function, override


_THOUGHT = "Let me think about what the user asked."


async def _generate(req: MockRequest, send: Send, json_reply: str | None) -> None:
    doc, count, thoughts, function, override = _plan(req)
    model = req.match.group("model")
    reply = json_reply if json_reply is not None else req.reply_text()
    parts: list[dict] = []
    if thoughts:
        parts.append({"text": _THOUGHT, "thought": True})
    if override == "SAFETY":
        parts, reply = [], ""
    elif function:
        parts.append({"functionCall": {"name": function, "args": {"location": "Paris"}}})
        reply = ""
    else:
        parts.append({"text": reply})
    thought_tokens = count_tokens(_THOUGHT) * count if thoughts else 0
    candidates = [{"content": {"role": "model", "parts": parts}, "finishReason": override or "STOP",
                   "avgLogprobs": -0.12, "index": i} for i in range(count)]
    if override == "SAFETY":
        for candidate in candidates:
            candidate["content"] = {}
            candidate["safetyRatings"] = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                                           "blocked": True}]
    body = {"candidates": candidates, "usageMetadata": _usage(_prompt_text(doc), reply, count, thought_tokens),
            **_meta(model)}
    await respond_json(send, 200, body)


def _event(doc: dict) -> bytes:
    return b"data: " + _encode(doc) + b"\r\n\r\n"


async def _stream(req: MockRequest, send: Send, sse: bool, json_reply: str | None) -> None:
    doc, count, thoughts, function, override = _plan(req)
    step = req.step
    meta = _meta(req.match.group("model"))
    events: list[dict] = []

    def event(parts: list[dict], finish: str | None = None, usage: dict | None = None) -> dict:
        candidates = []
        for i in range(count):
            candidate: dict = {"content": {"role": "model", "parts": parts}, "index": i}
            if finish:
                candidate["finishReason"] = finish
            candidates.append(candidate)
        out: dict = {"candidates": candidates, **meta}
        if usage:
            out["usageMetadata"] = usage
        return out

    thought_tokens = count_tokens(_THOUGHT) * count if thoughts else 0
    if thoughts:
        events.append(event([{"text": _THOUGHT, "thought": True}]))
    if function:
        events.append(event([{"functionCall": {"name": function, "args": {"location": "Paris"}}}]))
        reply = ""
    else:
        reply = (json_reply if json_reply is not None else req.reply_text()) if override != "SAFETY" else ""
        pieces = (_json_pieces(reply) if json_reply is not None else req.reply_words()) if reply else []
        events.extend(event([{"text": piece}]) for piece in pieces)
    final_usage = _usage(_prompt_text(doc), reply, count, thought_tokens)
    last = event([], override or "STOP", final_usage)
    if events and "functionCall" not in events[-1]["candidates"][0]["content"]["parts"][0]:
        last["candidates"] = [dict(c, content=events[-1]["candidates"][i]["content"])
                              for i, c in enumerate(last["candidates"])]
        events[-1] = last
    else:
        events.append(last)
    if not sse:
        await respond_json(send, 200, events)
        return
    await start_stream(send)
    if step.stream_error == "first":
        await end_stream(send, _event(google_error(500, step.message or "mock in-band error")))
        return
    half = len(events) // 2
    for i, item in enumerate(events):
        if i == half and step.stream_error == "middle":
            await end_stream(send, _event(google_error(500, step.message or "mock error midway")))
            return
        if i == half and step.stream_error == "cut":
            raise ConnectionResetError("mock cuts the stream")
        await stream_part(send, _event(item), step)
    await end_stream(send)


async def anthropic_route(req: MockRequest, send: Send) -> None:
    """Claude models on the platform: anthropic's body without ``model`` and with ``anthropic_version:
    vertex-2023-10-16`` at ``:rawPredict`` / ``:streamRawPredict``, answered as anthropic answers (its events
    for a stream); ``count-tokens:rawPredict`` takes the body with ``model``."""
    if not _authorized(req):
        await respond_json(send, 401, google_error(401, "Request had invalid authentication credentials."))
        return
    doc = req.json()
    model = req.match.group("model")
    if model == "count-tokens":
        await anthropic.count(req, send)
        return
    if doc.get("anthropic_version") != "vertex-2023-10-16" or "model" in doc:
        await respond_json(send, 400, anthropic.error_doc(
            "invalid_request_error", "anthropic_version: vertex-2023-10-16 is required and model is not accepted"))
        return
    body = {k: v for k, v in doc.items() if k != "anthropic_version"}
    body["model"] = model
    body["stream"] = req.match.group("method") == "streamRawPredict"
    inner = MockRequest(req.method, req.path, req.query, {**req.headers, "x-api-key": "vertex",
                                                          "anthropic-version": "2023-06-01"},
                        msgspec.json.encode(body), req.step, req.state)
    await anthropic.messages(inner, send)


ROUTES = [
    ("POST", re.compile(r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/models/"
                        r"(?P<model>[^/:]+):(?P<method>rawPredict|streamRawPredict)$"), anthropic_route),
    ("POST", re.compile(r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/google/models/"
                        r"(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent|predict)$"), model_route),
    ("POST", re.compile(r"^/token$"), token),
    ("POST", re.compile(r"^/cloudC/service-accounts$"), register),
    ("GET", re.compile(r"^/cloudC/service-accounts/(?P<email>[^/]+)$"), issued),
]
