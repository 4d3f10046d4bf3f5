"""A worker asked to stop before its server listens for the signal still stops, promptly and gracefully
(``gateway.http.early_stop``): the window Granian leaves between forking a worker and installing its handlers.

Each case runs in a fresh interpreter (the fork hook ``arm`` registers lasts as long as its process): a parent with
a flag-only SIGTERM handler, as Granian's main process has, forks a child that stands for a worker still importing
the app when the signal comes, then installs its loop's handler as Granian does and starts up."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import asyncio, os, signal, sys, time
    from gateway.http import early_stop

    ARMED = sys.argv[1] == "armed"
    signal.signal(signal.SIGTERM, lambda *_: None)  # the main process's handler: it only flags its own server
    if ARMED:
        early_stop.arm()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        os.close(read)
        os.write(write, b"forked")
        time.sleep(1.0)  # importing the app: the signal arrives now
        loop = asyncio.new_event_loop()
        stopped = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stopped.set)  # the server's own handler, as Granian installs it
        if ARMED:
            early_stop.hand_on()  # the lifespan startup
        async def serve():
            try:
                await asyncio.wait_for(stopped.wait(), 5.0)
                return 0
            except asyncio.TimeoutError:
                return 3  # served on: the stop was lost
        os._exit(loop.run_until_complete(serve()))
    os.close(write)
    os.read(read, 16)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
""")


def _worker_exit(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60,
                          check=True)
    return int(done.stdout.strip())


def test_a_stop_signal_before_the_server_listens_stops_the_worker_once_it_does():
    assert _worker_exit("armed") == 0


def test_without_it_the_signal_is_lost_and_the_worker_serves_on():
    """What the module guards against (Granian 2.8's behaviour): the same worker, unarmed, never sees its stop."""
    assert _worker_exit("unarmed") == 3
