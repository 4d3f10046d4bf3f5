"""The open-files limit a worker needs for the requests it serves at once, checked (and raised) when serving starts.

A streamed answer holds two sockets in the worker for as long as it lasts (the client's and the upstream's), so a
worker serving ``backpressure`` requests at once needs about twice that many file descriptors plus a reserve for
its stores, logs and event loop. ``gateway serve`` raises the soft limit towards the hard one when it must; when
even the hard limit is too low it lowers the backpressure to what fits (a request beyond it waits in the listen
backlog instead of failing to be accepted) and says so, naming the limit to set.
"""

from __future__ import annotations

import resource

#: descriptors a worker uses besides its requests' sockets (stores, log files, metrics files, event loop, Redis)
RESERVE = 512
#: sockets one request may hold at once: the client's and the upstream's
PER_REQUEST = 2


def needed(backpressure: int) -> int:
    """The open-files limit a worker serving ``backpressure`` requests at once needs."""
    return PER_REQUEST * backpressure + RESERVE


def fits(limit: int) -> int:
    """How many requests at once a worker can serve within an open-files limit of ``limit``."""
    return max(1, (limit - RESERVE) // PER_REQUEST)


def ensure(backpressure: int) -> tuple[int, str | None]:
    """Raise this process's soft open-files limit (inherited by the workers) to what ``backpressure`` needs, up to
    the hard limit. Returns the backpressure the limit allows (``backpressure`` itself when it fits) and, when it
    does not fit, a message saying what to raise."""
    want = needed(backpressure)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= want:
        return backpressure, None
    allowed = fits(soft)
    return allowed, (
        f"the open-files limit ({soft}, hard limit {hard}) lets each worker serve {allowed} requests or streams at "
        f"once, not the {backpressure} asked for (GATEWAY_BACKPRESSURE): further ones wait to be accepted. Raise "
        f"the limit to {want} (ulimit -n {want}; docker run --ulimit nofile={want}; compose `ulimits: nofile`)")
