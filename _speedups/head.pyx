# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of gateway.upstream.head: the request head written into one buffer.

Names and values are read in place when they are ASCII (the common case; others are encoded to UTF-8 once), checked
over their bytes (a 256-entry token table for names, a scan for CR, LF and NUL in values) and copied into one buffer
on the C stack (moved to the heap past 2 KiB) that becomes the head's bytes object at the end; the three default
names are recognised by length and a case-insensitive compare, without lowering. Behaviour is the pure twin's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdio cimport snprintf
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


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)
    void* PyUnicode_DATA(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(object text)


cdef struct Buffer:
    char* data
    Py_ssize_t size
    Py_ssize_t capacity
    bint on_heap


cdef int _put(Buffer* out, const char* data, Py_ssize_t size) except -1:
    """Append ``size`` bytes, moving the buffer to the heap (then growing it) when it is full."""
    cdef Py_ssize_t need = out.size + size
    cdef Py_ssize_t capacity
    cdef char* grown
    if need > out.capacity:
        capacity = max(out.capacity * 2, need)
        if out.on_heap:
            grown = <char*>PyMem_Realloc(out.data, capacity)
        else:
            grown = <char*>PyMem_Malloc(capacity)
            if grown != NULL:
                memcpy(grown, out.data, out.size)
        if grown == NULL:
            raise MemoryError()
        out.data = grown
        out.capacity = capacity
        out.on_heap = True
    memcpy(out.data + out.size, data, size)
    out.size = need
    return 0


cdef inline const char* _ascii(str text, Py_ssize_t* size):
    """The characters of an ASCII-only string as bytes, in place; NULL for any other string."""
    if PyUnicode_IS_ASCII(text):
        size[0] = PyUnicode_GET_LENGTH(text)
        return <const char*>PyUnicode_DATA(text)
    return NULL


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
    cdef char first[2048]
    cdef Buffer out
    out.data = first
    out.size = 0
    out.capacity = sizeof(first)
    out.on_heap = False
    try:
        _write(&out, method, target, defaults, headers, length)
        return PyBytes_FromStringAndSize(out.data, out.size)
    finally:
        if out.on_heap:
            PyMem_Free(out.data)


cdef int _put_text(Buffer* out, str text) except -1:
    """Append ``text`` as UTF-8 (surrogates escaped as the pure twin writes them)."""
    cdef Py_ssize_t n
    cdef const char* p = _ascii(text, &n)
    cdef bytes encoded
    if p == NULL:
        encoded = text.encode("utf-8", "surrogateescape")
        _put(out, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded))
    else:
        _put(out, p, n)
    return 0


cdef int _write(Buffer* out, str method, str target, defaults, dict headers, Py_ssize_t length) except -1:
    cdef Py_ssize_t start, n, i
    cdef const char* p
    cdef unsigned char c
    cdef bytes encoded
    _put_text(out, method)
    _put(out, b" ", 1)
    start = out.size
    _put_text(out, target)
    for i in range(start, out.size):
        c = <unsigned char>out.data[i]
        if c == 32 or c == 13 or c == 10 or c == 0:
            raise HeaderRefused(":path", "must not contain spaces, CR, LF or NUL characters")
    _put(out, b" HTTP/1.1\r\n", 11)
    cdef bint own_host = False, own_agent = False, own_encoding = False
    cdef int kind
    for name, value in headers.items():
        p = _ascii(<str>name, &n)
        if p == NULL:  # not ASCII: never a token (a lone surrogate included)
            raise HeaderRefused(name, "is not a valid header name")
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
        _put(out, p, n)
        _put(out, b": ", 2)
        start = out.size
        _put_text(out, <str>value)
        for i in range(start, out.size):
            c = <unsigned char>out.data[i]
            if c == 13 or c == 10 or c == 0:
                raise HeaderRefused(name, _BREAK_WHY)
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
    cdef char digits[32]
    if length or method not in _BODYLESS:
        n = snprintf(digits, sizeof(digits), "%zd", length)
        _put(out, b"Content-Length: ", 16)
        _put(out, digits, n)
        _put(out, b"\r\n", 2)
    _put(out, b"\r\n", 2)
    return 0
