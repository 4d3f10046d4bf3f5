# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of gateway.http.sse: SSE splitting and encoding over raw byte pointers.

Lines are found with memchr (the next LF and the next CR are each searched once and reused until passed),
fields are told apart with memcmp, and only ``data`` and ``event`` values become bytes objects. An unfinished
line is kept in a bytearray that grows in place, so buffering stays linear. Behaviour is the pure twin's.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from libc.string cimport memchr, memcmp, memcpy

__all__ = ["DONE", "RELAY_CR", "RELAY_DONE", "RELAY_ERROR", "RELAY_USAGE", "Event", "SseSplitter", "encode_event",
           "is_done", "scan_relay"]

#: One dispatched event: (event name or None, data).
Event = tuple["bytes | None", bytes]

#: The vendorA end-of-stream event.
DONE = b"data: [DONE]\n\n"

# A build from older sources must not pass for this twin: its public names and constants must be the pure module's.
from gateway.http import sse as _pure

RELAY_CR = 1
RELAY_ERROR = 2
RELAY_DONE = 4
RELAY_USAGE = 8

for _name, _mine, _theirs in (("__all__", __all__, _pure.__all__), ("DONE", DONE, _pure.DONE),
                              ("RELAY_CR", RELAY_CR, _pure.RELAY_CR), ("RELAY_ERROR", RELAY_ERROR, _pure.RELAY_ERROR),
                              ("RELAY_DONE", RELAY_DONE, _pure.RELAY_DONE),
                              ("RELAY_USAGE", RELAY_USAGE, _pure.RELAY_USAGE)):
    if _mine != _theirs:
        raise ImportError(f"gateway._speedups.sse is stale: {_name} differs from the pure module")
del _name, _mine, _theirs, _pure

cdef bytes _LF = b"\n"


cdef inline Py_ssize_t _find(const char* buf, Py_ssize_t pos, Py_ssize_t n, char c) noexcept nogil:
    """Index of the first ``c`` in buf[pos:n], or n."""
    cdef const char* hit
    if pos >= n:
        return n
    hit = <const char*>memchr(buf + pos, c, <size_t>(n - pos))
    if hit == NULL:
        return n
    return hit - buf


cdef inline bytes _as_bytes(object data):
    if type(data) is bytes:
        return <bytes>data
    return bytes(data)


cdef class SseSplitter:
    """Turns stream chunks, cut anywhere, into complete ``(event_name_or_None, data)`` events."""

    cdef bytearray _partial  # the unfinished last line
    cdef bint _cr  # the previous chunk ended with CR: a leading LF belongs to it
    cdef object _event  # bytes or None
    cdef object _data  # None, one data line (bytes), or a list of data lines

    def __cinit__(self):
        self._partial = bytearray()
        self._cr = False
        self._event = None
        self._data = None

    cdef int _dispatch(self, list events) except -1:
        cdef object data = self._data
        if data is not None:
            if type(data) is list:
                data = _LF.join(<list>data)
            PyList_Append(events, (self._event, data))
            self._data = None
        self._event = None
        return 0

    cdef int _line(self, const char* p, Py_ssize_t length, list events) except -1:
        """One complete line (without its end)."""
        cdef const char* colon
        cdef Py_ssize_t name_len, start
        cdef object value
        if length == 0:
            return self._dispatch(events)
        if p[0] == b':':
            return 0
        colon = <const char*>memchr(p, b':', <size_t>length)
        if colon == NULL:
            name_len = length
            start = length
        else:
            name_len = colon - p
            start = name_len + 1
            if start < length and p[start] == b' ':
                start += 1
        if name_len == 4 and memcmp(p, b"data", 4) == 0:
            value = PyBytes_FromStringAndSize(p + start, length - start)
            if self._data is None:
                self._data = value
            elif type(self._data) is list:
                PyList_Append(<list>self._data, value)
            else:
                self._data = [self._data, value]
        elif name_len == 5 and memcmp(p, b"event", 5) == 0:
            if length > start:
                self._event = PyBytes_FromStringAndSize(p + start, length - start)
            else:
                self._event = None
        return 0

    cdef int _keep(self, const char* p, Py_ssize_t length) except -1:
        """Appends to the unfinished line (bytearray over-allocates: amortised linear)."""
        cdef Py_ssize_t old = PyByteArray_GET_SIZE(self._partial)
        PyByteArray_Resize(self._partial, old + length)
        memcpy(PyByteArray_AS_STRING(self._partial) + old, p, <size_t>length)
        return 0

    def feed(self, data):
        """The events completed by ``data`` (possibly none)."""
        cdef bytes chunk = _as_bytes(data)
        cdef const char* buf = PyBytes_AS_STRING(chunk)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(chunk)
        cdef Py_ssize_t pos = 0, end, lf_at, cr_at, plen
        cdef list events = []
        if n == 0:
            return events
        if self._cr:
            self._cr = False
            if buf[0] == b'\n':
                pos = 1
        lf_at = _find(buf, pos, n, b'\n')
        cr_at = _find(buf, pos, n, b'\r')
        plen = PyByteArray_GET_SIZE(self._partial)
        if plen:
            end = lf_at if lf_at < cr_at else cr_at
            self._keep(buf + pos, end - pos)
            if end == n:
                return events
            self._line(PyByteArray_AS_STRING(self._partial), PyByteArray_GET_SIZE(self._partial), events)
            PyByteArray_Resize(self._partial, 0)
            pos = end + 1
            if buf[end] == b'\r':
                if pos == n:
                    self._cr = True
                elif buf[pos] == b'\n':
                    pos += 1
        while pos < n:
            if lf_at < pos:
                lf_at = _find(buf, pos, n, b'\n')
            if cr_at < pos:
                cr_at = _find(buf, pos, n, b'\r')
            end = lf_at if lf_at < cr_at else cr_at
            if end == n:
                self._keep(buf + pos, n - pos)
                break
            self._line(buf + pos, end - pos, events)
            pos = end + 1
            if buf[end] == b'\r':
                if pos == n:
                    self._cr = True
                elif buf[pos] == b'\n':
                    pos += 1
        return events

    def close(self):
        """The last event when the stream ended without its blank line; then starts over, empty."""
        cdef list events = []
        cdef Py_ssize_t plen = PyByteArray_GET_SIZE(self._partial)
        if plen:
            self._line(PyByteArray_AS_STRING(self._partial), plen, events)
        self._dispatch(events)
        self._partial = bytearray()
        self._cr = False
        self._event = None
        self._data = None
        return events


def encode_event(data, event=None):
    """The wire form of one event: ``event: NAME`` (when named), one ``data:`` line per line of data, a blank line.

    CR, LF and CRLF inside ``data`` all end a line (SSE cannot carry a bare CR in data). An event name containing
    CR or LF raises ValueError: it would break the framing.
    """
    cdef bytes d = _as_bytes(data)
    cdef bytes name
    cdef const char* src = PyBytes_AS_STRING(d)
    cdef const char* ev = NULL
    cdef Py_ssize_t n = PyBytes_GET_SIZE(d)
    cdef Py_ssize_t ev_len = 0, head = 0, size, i, ends = 0, end_bytes = 0
    cdef char* out
    cdef char c
    cdef bytes result
    if event is not None:
        name = _as_bytes(event)
        ev = PyBytes_AS_STRING(name)
        ev_len = PyBytes_GET_SIZE(name)
        if memchr(ev, b'\n', <size_t>ev_len) != NULL or memchr(ev, b'\r', <size_t>ev_len) != NULL:
            raise ValueError("event name must not contain CR or LF")
        head = ev_len + 8  # "event: " NAME "\n"
    if n == 0 or (memchr(src, b'\n', <size_t>n) == NULL and memchr(src, b'\r', <size_t>n) == NULL):
        size = head + n + 8  # "data: " DATA "\n\n"
    else:
        i = 0
        while i < n:
            c = src[i]
            if c == b'\n':
                ends += 1
                end_bytes += 1
            elif c == b'\r':
                ends += 1
                end_bytes += 1
                if i + 1 < n and src[i + 1] == b'\n':
                    end_bytes += 1
                    i += 1
            i += 1
        size = head + (n - end_bytes) + 7 * (ends + 1) + 1
    result = PyBytes_FromStringAndSize(NULL, size)
    out = PyBytes_AS_STRING(result)
    if head:
        memcpy(out, b"event: ", 7)
        memcpy(out + 7, ev, <size_t>ev_len)
        out[7 + ev_len] = b'\n'
        out += head
    memcpy(out, b"data: ", 6)
    out += 6
    if ends == 0:
        memcpy(out, src, <size_t>n)
        out += n
    else:
        i = 0
        while i < n:
            c = src[i]
            if c == b'\n' or c == b'\r':
                if c == b'\r' and i + 1 < n and src[i + 1] == b'\n':
                    i += 1
                memcpy(out, b"\ndata: ", 7)
                out += 7
            else:
                out[0] = c
                out += 1
            i += 1
    out[0] = b'\n'
    out[1] = b'\n'
    return result


cdef inline bint _space(char c) noexcept nogil:
    return c == b' ' or c == b'\t' or c == b'\n' or c == b'\r' or c == b'\x0b' or c == b'\x0c'


def is_done(data):
    """True when an event's data is vendorA's ``[DONE]`` marker (ASCII whitespace around it allowed)."""
    cdef bytes d = _as_bytes(data)
    cdef const char* p = PyBytes_AS_STRING(d)
    cdef Py_ssize_t start = 0, end = PyBytes_GET_SIZE(d)
    if end < 6:
        return False
    while start < end and _space(p[start]):
        start += 1
    while end > start and _space(p[end - 1]):
        end -= 1
    return end - start == 6 and memcmp(p + start, b"[DONE]", 6) == 0


def scan_relay(chunk, bint strip_null_usage):
    """``(chunk, flags)`` for a vendorA-format stream chunk: the ``RELAY_*`` flags of what the chunk as received
    holds, and the chunk with every ``,"usage":null`` member removed when ``strip_null_usage`` (the same object
    when it has none). A chunk with no flag set, starting and ending on event boundaries, can be relayed as it is.

    One pass over the bytes (the pure twin makes one per question); removed members are found in the same pass
    and cut out with memcpy.
    """
    cdef bytes c = _as_bytes(chunk)
    cdef const char* p = PyBytes_AS_STRING(c)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(c)
    cdef Py_ssize_t i = 0, cuts = 0, k, src, dst, run
    cdef int flags = 0
    cdef char ch
    cdef Py_ssize_t cut_at[64]
    cdef list more = None
    cdef bytes out
    cdef char* o
    while i < n:
        ch = p[i]
        if ch == b'"':
            if i + 7 <= n and p[i + 6] == b'"':
                if memcmp(p + i + 1, b"error", 5) == 0:
                    flags |= RELAY_ERROR
                elif memcmp(p + i + 1, b"usage", 5) == 0:
                    if i + 12 <= n and memcmp(p + i + 7, b":null", 5) == 0:
                        if strip_null_usage and i > 0 and p[i - 1] == b',':
                            if cuts < 64:
                                cut_at[cuts] = i - 1
                            else:
                                if more is None:
                                    more = []
                                more.append(i - 1)
                            cuts += 1
                        i += 12
                        continue
                    flags |= RELAY_USAGE
            i += 1
        elif ch == b'[':
            if i + 6 <= n and memcmp(p + i, b"[DONE]", 6) == 0:
                flags |= RELAY_DONE
            i += 1
        elif ch == b'\r':
            flags |= RELAY_CR
            i += 1
        else:
            i += 1
    if cuts == 0:
        return c, flags
    out = PyBytes_FromStringAndSize(NULL, n - 13 * cuts)
    o = PyBytes_AS_STRING(out)
    src = 0
    dst = 0
    for k in range(cuts):
        i = cut_at[k] if k < 64 else <Py_ssize_t>more[k - 64]
        run = i - src
        memcpy(o + dst, p + src, <size_t>run)
        dst += run
        src = i + 13
    memcpy(o + dst, p + src, <size_t>(n - src))
    return out, flags
