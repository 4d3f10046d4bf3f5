# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of gateway.http.context's ``build_context``: the ASGI header list read once into a RequestContext,
with the header names compared in C.

The pure module's tables decide everything: ``_PLAIN_ATTRS`` (a gateway header stored as sent: set here directly),
``_SETTERS`` (the parsed and cloud headers: their setter is called, with its errors), ``_setter_for`` (any other
spelling). ``RequestContext`` is the pure module's own. A header list that is not all (bytes, value) pairs is handed to
the pure ``build_context`` whole, so it fails the same way.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.string cimport memcmp

from gateway.http import context as _pure
from gateway.http.context import (
    _PLAIN_ATTRS,
    _SETTERS,
    RequestContext,
    _setter_for,
    _trace_from_parent,
    new_trace_id,
)

__all__ = ["RequestContext", "build_context"]

# A build from older sources must not pass for this twin: its public names must be the pure module's.
if __all__ != getattr(_pure, "__all__", None):
    raise ImportError("gateway._speedups.context is stale: __all__ differs from the pure module")
if _pure._PREFIX != b"x-gateway-":
    raise ImportError("gateway._speedups.context is stale: the gateway header prefix differs from the pure module")

cdef object _pure_build = _pure.build_context
del _pure

cdef dict _plain = _PLAIN_ATTRS
cdef dict _setters = _SETTERS


def build_context(raw_headers):
    """Read the ASGI header list once into a RequestContext. Bad gateway header values raise InvalidRequest."""
    for pair in raw_headers:
        if type(pair) is not tuple or len(<tuple>pair) != 2 or type((<tuple>pair)[0]) is not bytes:
            return _pure_build(raw_headers)
    ctx = RequestContext()
    ctx.raw_headers = raw_headers
    cdef bytes name
    cdef const char* p
    cdef Py_ssize_t n
    for name, raw_value in raw_headers:
        n = PyBytes_GET_SIZE(name)
        p = PyBytes_AS_STRING(name)
        if n >= 10 and memcmp(p, b"x-gateway-", 10) == 0:
            attr = _plain.get(name)
            if attr is not None:
                setattr(ctx, attr, raw_value.decode("latin-1"))
                continue
            setter = _setters.get(name)
            if setter is None:
                setter = _setter_for(name)
            if setter is not None:
                setter(ctx, raw_value.decode("latin-1"))
        elif n == 13 and memcmp(p, b"authorization", 13) == 0:
            value = raw_value.decode("latin-1")
            if value[:7].lower() == "bearer ":
                ctx.bearer = value[7:].strip()
        elif n == 11 and memcmp(p, b"traceparent", 11) == 0:
            ctx.traceparent = raw_value.decode("latin-1")
        elif n == 25 and memcmp(p, b"x-cloudc-llm-request-type", 25) == 0:
            ctx.cloudC_llm_request_type = raw_value.decode("latin-1")
    if not ctx.trace_id:
        ctx.trace_id = _trace_from_parent(ctx.traceparent) or new_trace_id()
    return ctx
