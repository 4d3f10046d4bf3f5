# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of gateway.upstream.head: the request head written into one buffer.

Each name and value is encoded once (UTF-8), checked over its bytes (a 256-entry token table for names, a scan for
CR, LF and NUL in values) and copied into a bytearray that grows in place; the three default names are recognised by
length and a case-insensitive compare before any lowering. Behaviour is the pure twin's.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.string cimport memcpy

# A build from older sources must not pass for this twin: its public names and constants must be the pure module's.
from gateway.upstream import head as _pure
from gateway.upstream.head import HeaderRefused, TargetHead

__all__ = ["TargetHead", "HeaderRefused", "request_head"]

if __all__ != getattr(_pure, "__all__", None):
    raise ImportError("gateway._speedups.head is stale: __all__ differs from the pure module")
if _pure._FRAMING != frozenset(("content-length", "transfer-encoding", "connection")):
    raise ImportError("gateway._speedups.head is stale: the framing headers differ from the pure module")
if _pure._BODYLESS != frozenset(("GET", "HEAD", "OPTIONS", "TRACE", "CONNECT", "DELETE")):
    raise ImportError("gateway._speedups.head is stale: the bodyless methods differ from the pure module")
del _pure

cdef bint _TOKEN[256]
cdef int _i
for _i in range(256):
    _TOKEN[_i] = (48 <= _i <= 57) or (65 <= _i <= 90) or (97 <= _i <= 122) or chr(_i) in "!#$%&'*+-.^_`|~"

cdef frozenset _BODYLESS = frozenset(("GET", "HEAD", "OPTIONS", "TRACE", "CONNECT", "DELETE"))
cdef str _BREAK_WHY = ("must not contain CR, LF or NUL characters (it is sent in the upstream request's head)")


cdef inline void _put(bytearray out, const char* data, Py_ssize_t size):
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, at + size)
    memcpy(PyByteArray_AS_STRING(out) + at, data, size)


cdef inline bint _same_lower(const char* data, const char* lowered, Py_ssize_t size):
    """``data`` equals the lower-case ``lowered``, ignoring ASCII case."""
    cdef Py_ssize_t i
    cdef char c
    for i in range(size):
        c = data[i]
        if 65 <= c <= 90:
            c = c + 32
        if c != lowered[i]:
            return False
    return True


cdef int _kind(const char* name, Py_ssize_t size):
    """0 a plain header; 1 framing (dropped); 2 host; 3 user-agent; 4 accept-encoding."""
    if size == 4 and _same_lower(name, b"host", 4):
        return 2
    if size == 10:
        if _same_lower(name, b"user-agent", 10):
            return 3
        if _same_lower(name, b"connection", 10):
            return 1
    if size == 14 and _same_lower(name, b"content-length", 14):
        return 1
    if size == 15 and _same_lower(name, b"accept-encoding", 15):
        return 4
    if size == 17 and _same_lower(name, b"transfer-encoding", 17):
        return 1
    return 0


def request_head(str method, str target, defaults, dict headers, Py_ssize_t length):
    """The whole head of one request (ending with the empty line); raises ``HeaderRefused`` as the pure twin."""
    if " " in target or "\r" in target or "\n" in target or "\x00" in target:
        raise HeaderRefused(":path", "must not contain spaces, CR, LF or NUL characters")
    cdef bytearray out = bytearray()
    cdef bytes line = f"{method} {target} HTTP/1.1\r\n".encode()
    _put(out, PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line))
    cdef bint own_host = False, own_agent = False, own_encoding = False
    cdef bytes name_b, value_b
    cdef const char* p
    cdef Py_ssize_t n, i
    cdef unsigned char c
    cdef int kind
    for name, value in headers.items():
        try:
            name_b = (<str>name).encode()
        except UnicodeEncodeError:  # a lone surrogate: not a token either (the pure twin refuses it the same way)
            raise HeaderRefused(name, "is not a valid header name") from None
        p = PyBytes_AS_STRING(name_b)
        n = PyBytes_GET_SIZE(name_b)
        kind = _kind(p, n)
        if kind == 1:
            continue
        if kind == 2:
            own_host = True
        elif kind == 3:
            own_agent = True
        elif kind == 4:
            own_encoding = True
        if n == 0:
            raise HeaderRefused(name, "is not a valid header name")
        for i in range(n):
            if not _TOKEN[<unsigned char>p[i]]:
                raise HeaderRefused(name, "is not a valid header name")
        value_b = (<str>value).encode("utf-8", "surrogateescape")
        _put(out, p, n)
        _put(out, b": ", 2)
        p = PyBytes_AS_STRING(value_b)
        n = PyBytes_GET_SIZE(value_b)
        for i in range(n):
            c = <unsigned char>p[i]
            if c == 13 or c == 10 or c == 0:
                raise HeaderRefused(name, _BREAK_WHY)
        _put(out, p, n)
        _put(out, b"\r\n", 2)
    cdef bytes default
    if not own_host:
        default = defaults.host
        _put(out, PyBytes_AS_STRING(default), PyBytes_GET_SIZE(default))
    if not own_agent:
        default = defaults.agent
        _put(out, PyBytes_AS_STRING(default), PyBytes_GET_SIZE(default))
    if not own_encoding:
        default = defaults.encoding
        _put(out, PyBytes_AS_STRING(default), PyBytes_GET_SIZE(default))
    if length or method not in _BODYLESS:
        line = b"Content-Length: %d\r\n" % length
        _put(out, PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line))
    _put(out, b"\r\n", 2)
    return bytes(out)
