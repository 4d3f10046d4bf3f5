"""Noticing a stop signal: the chained handler sets the event and still runs the server's own handler; nothing is
installed over a default action."""

from __future__ import annotations

import os
import signal

from gateway.http.shutdown import StopNotice
from gateway.waiting import within


async def test_a_stop_signal_sets_the_event_and_reaches_the_previous_handler():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        notice = StopNotice()
        event = notice.event
        assert not event.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        await within(event.wait(), 5)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


async def test_a_default_action_is_left_alone():
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        StopNotice().event  # noqa: B018 - the property is what is tested: reading it installs nothing
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
