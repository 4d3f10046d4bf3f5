"""One keep-alive connection of the lean exchange: an asyncio protocol that parses answers with llhttp.

The answer is parsed by llhttp through PyPI ``httptools`` (``HttpResponseParser``: status, header fields, body
pieces with Content-Length, chunked framing and chunk extensions or trailers handled by llhttp (trailer fields are
dropped, not added to the head's: aiohttp does not show them either), message completion, ``should_keep_alive`` from
the version and ``Connection``). httptools bounds nothing, so this protocol does: at most ``MAX_HEAD_BYTES`` before
the head ends and ``MAX_HEADERS`` fields (aiohttp's defaults are 8 KiB a line and 128 fields; a provider's head is
well under 2 KiB), and as much of chunk framing or trailer fields between body bytes (llhttp hands a trailer field
over whole, so it would be kept whatever its size). llhttp is as lenient as in aiohttp's own build (folded and bare-
LF heads, any octet but NUL in a value, spaces after a chunk size) and a value's trailing whitespace is dropped as
aiohttp drops it, so an upstream aiohttp read is read the same. Interim answers (1xx but 101) are skipped, as RFC
9110 section 15.2 asks of a client that did not ask for them, up to ``MAX_INTERIM`` of them (more is a 502: each
would otherwise move a stream's silence deadline for ever). An answer with neither Content-Length nor chunked
framing (chunked as the last transfer coding) ends when the upstream closes (RFC 9112 section 6.3, rule 8):
httptools has no end-of-input call, so that case is recognised here (a cut body otherwise). Bytes that arrive while
no exchange is on the connection mean it is out of step with its upstream: it is closed.

Body pieces are queued as they arrive, not copied further; past ``HIGH_WATER`` queued bytes the socket stops being
read until the reader catches up below ``LOW_WATER`` (a client that reads slowly holds at most that much here).

One timer an exchange: ``begin`` sets a deadline (the whole answer for a JSON answer; the longest silence for a
stream, where each read only moves it, and which is not counted while the socket is not read because the reader is
behind), and the timer, firing early, waits for the moved deadline. When it runs out the exchange fails with
``AnswerTimeout`` and the connection is closed; so is a connection whose exchange was abandoned
(``pool.ConnectionPool.discard``).
"""

from __future__ import annotations

import asyncio
from collections import deque

import httptools

#: the most a head may take before it ends (status line and fields)
MAX_HEAD_BYTES = 64 * 1024
#: the most interim (1xx) answers skipped before the answer
MAX_INTERIM = 16
#: the most header fields an answer may have
MAX_HEADERS = 128
#: queued body bytes past which the socket is no longer read
HIGH_WATER = 256 * 1024
#: queued body bytes under which it is read again
LOW_WATER = 64 * 1024


class AnswerTimeout(TimeoutError):
    """The upstream fell silent past the read timeout (or a JSON answer took longer than it)."""


class ConnectionBroke(Exception):
    """The connection ended or failed before the answer did; ``answered`` says whether any of it had arrived."""

    def __init__(self, what: str, answered: bool) -> None:
        super().__init__(what)
        self.what = what
        self.answered = answered


class BadAnswer(Exception):
    """The upstream sent something that is not a valid HTTP answer (or one past the head bounds)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class UpstreamConnection(asyncio.Protocol):
    """A connection to one upstream; the pool lends it to one exchange at a time (see the module docstring)."""

    __slots__ = ("loop", "key", "transport", "_parser", "closed", "busy", "answers", "idle_since", "single_use",
                 "status", "raw_headers", "head_bytes", "field_bytes", "framing_bytes", "head_done", "trailers",
                 "interim", "interims", "complete", "keep_alive", "received", "pieces", "buffered", "paused", "error",
                 "waiter", "stream", "silence", "deadline", "_timer", "_close_delimited", "coding")

    def __init__(self, loop: asyncio.AbstractEventLoop, key: object) -> None:
        self.loop = loop
        #: the pool's key of the upstream this connection goes to
        self.key = key
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        # what aiohttp's response parser allows (its llhttp build, outside its debug mode): obs-folded and bare-LF
        # heads, any octet but NUL in a value (refused in ``on_header``), spaces after a chunk size
        self._parser.set_dangerous_leniencies(lenient_headers=True, lenient_optional_cr_before_lf=True,
                                              lenient_spaces_after_chunk_size=True)
        self.closed = False
        #: the exchange in progress has its connection here
        self.busy = False
        #: answers completed on this connection (0: a new one)
        self.answers = 0
        #: when it went back to the pool
        self.idle_since = 0.0
        #: closed after its one exchange (the resend after a stale connection: as aiohttp's fresh session does)
        self.single_use = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.field_bytes = 0
        self.framing_bytes = 0
        self.head_done = False
        self.trailers = 0
        self.interim = False
        self.interims = 0
        self.complete = False
        self.keep_alive = False
        self.received = False
        self.pieces: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.stream = False
        self.silence = 0.0
        self.deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._close_delimited = False
        #: the answer's Content-Encoding, when it has one (read with the framing fields)
        self.coding: bytes | None = None

    # --- the exchange's side -------------------------------------------------------------------------------------

    def begin(self, stream: bool, read_s: float) -> None:
        """Start an exchange: fresh answer state and its one timer (``read_s`` the whole answer, or for a
        ``stream`` the longest silence)."""
        self._reset()
        self.busy = True
        self.stream = stream
        self.silence = read_s
        if read_s > 0:
            self.deadline = self.loop.time() + read_s
            self._timer = self.loop.call_at(self.deadline, self._on_timer)

    def finish(self) -> None:
        """The exchange is over (whatever its end): the timer stops, the answer state is dropped."""
        self.busy = False
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._timer = None
        self.pieces.clear()
        self.waiter = None
        if self.paused and not self.closed and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def wait(self) -> asyncio.Future[None]:
        """A future done when something arrives (the head, a body piece, the end or a failure)."""
        waiter = self.waiter = self.loop.create_future()
        return waiter

    def took(self, size: int) -> None:
        """The reader took ``size`` queued bytes: read the socket again once the queue is short."""
        self.buffered -= size
        if self.paused and self.buffered <= LOW_WATER and not self.closed:
            self._resume()

    def _resume(self) -> None:
        self.paused = False
        self.transport.resume_reading()  # type: ignore[union-attr]
        if self.stream and self.busy and not self.complete and self.error is None and self.silence > 0:
            # the silence is the upstream's again from now (aiohttp stops sock_read while paused the same way)
            self.deadline = self.loop.time() + self.silence
            if self._timer is None:
                self._timer = self.loop.call_at(self.deadline, self._on_timer)

    def abort(self) -> None:
        """Close the connection now (never reused)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # --- the event loop's side -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # nothing was asked: the connection is out of step with its upstream
            self.abort()
            return
        self.received = True
        if self.stream:
            self.deadline = self.loop.time() + self.silence
        if not self.head_done:
            self.head_bytes += len(data)
        else:
            self.framing_bytes += len(data)  # since the last body byte (``on_body`` starts it again)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # a bound refused in a callback comes back wrapped ("callback error"), the refusal as its context
            refused = exc.__context__
            self._fail(BadAnswer(str(refused) if isinstance(refused, _HeadRefused)
                                 else f"sent an answer that is not valid HTTP ({exc})"))
            return
        if not self.head_done and self.head_bytes > MAX_HEAD_BYTES:
            self._fail(BadAnswer(f"sent an answer whose head is larger than {MAX_HEAD_BYTES} bytes"))
        elif self.framing_bytes > MAX_HEAD_BYTES and not self.complete:  # llhttp keeps a trailer field whole
            self._fail(BadAnswer(f"sent more than {MAX_HEAD_BYTES} bytes of chunk framing or trailer fields "
                                 "without any body"))

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.busy or self.complete or self.error is not None:
            return
        if self.head_done and self._close_delimited:
            self.complete = True  # a body without framing ends when the upstream closes
            self.keep_alive = False
            self._wake()
            return
        if not self.received:
            what = "closed the connection before answering"
        elif not self.head_done:
            what = "closed the connection in the middle of its answer's head"
        else:
            what = "cut its answer off before the end"
        if isinstance(exc, ConnectionResetError):
            what = "reset the connection" if self.head_done else "reset the connection before answering"
        self._fail(ConnectionBroke(what, self.received), close=False)

    def pause_writing(self) -> None:  # a request body larger than the socket buffer: the transport buffers it
        pass

    def resume_writing(self) -> None:
        pass

    # --- llhttp's callbacks --------------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head_done:  # a trailer field (after a chunked body): not one of the answer's headers, only counted
            self.trailers += 1
            if self.trailers > MAX_HEADERS:
                raise _HeadRefused(f"sent an answer with more than {MAX_HEADERS} trailer fields")
            return
        headers = self.raw_headers
        if len(headers) >= MAX_HEADERS:
            raise _HeadRefused(f"sent an answer with more than {MAX_HEADERS} header fields")
        if b"\x00" in value:  # let through by the lenient parse; aiohttp refuses it too
            raise _HeadRefused("sent an answer that is not valid HTTP (a NUL in a header value)")
        value = value.rstrip(b" \t")  # llhttp strips the whitespace before a value, not after (RFC 9110 5.5)
        # counted field by field too: a whole head that came in one read has ended before ``data_received`` looks
        self.field_bytes += len(name) + len(value) + 4
        if self.field_bytes > MAX_HEAD_BYTES:
            raise _HeadRefused(f"sent an answer whose head is larger than {MAX_HEAD_BYTES} bytes")
        headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.interims += 1
            if self.interims > MAX_INTERIM:  # each moves a stream's silence deadline: endless ones would hold it
                raise _HeadRefused(f"sent more than {MAX_INTERIM} interim (1xx) answers before its answer")
            self.interim = True  # skipped: its end resets the answer (on_message_complete)
            return
        self.status = status
        self.head_done = True
        sized = chunked = False
        for name, value in self.raw_headers:
            if len(name) == 14 and name.lower() == b"content-length":
                sized = True
            elif len(name) == 17 and name.lower() == b"transfer-encoding":
                # chunked only as the last coding frames the body; otherwise it ends at close (RFC 9112 6.3)
                chunked = value.rsplit(b",", 1)[-1].strip().lower() == b"chunked"
            elif len(name) == 16 and name.lower() == b"content-encoding":
                self.coding = value
        self._close_delimited = not (sized or chunked) and status not in (204, 304)
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.framing_bytes = 0
        self.pieces.append(body)
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused:
            self.paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        self._wake()

    def on_message_complete(self) -> None:
        if self.interim:
            self.interim = False
            self.raw_headers = []
            self.head_bytes = self.field_bytes = 0
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._timer = None
        self._wake()

    # --- the rest ------------------------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _fail(self, error: BaseException, close: bool = True) -> None:
        self.error = error
        self._wake()
        if close:
            self.abort()

    def _on_timer(self) -> None:
        self._timer = None
        if not self.busy or self.complete:
            return
        if self.stream and self.paused:  # the reader is behind, the socket not read: not the upstream's silence
            return  # armed again on resume
        deadline = self.deadline
        if self.stream and self.loop.time() < deadline:  # data came since: wait for the moved deadline
            self._timer = self.loop.call_at(deadline, self._on_timer)
            return
        self._fail(AnswerTimeout("timed out"))


class _HeadRefused(Exception):
    """A head past a bound (or holding a NUL), raised inside llhttp's header callback to stop the parse (httptools
    raises ``HttpParserCallbackError`` from ``feed_data``, this one as its ``__context__``)."""
