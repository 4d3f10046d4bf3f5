"""Types of ``gateway._speedups.sse`` (compiled from ``_speedups/sse.pyx``): its pure twin's public
names, which it checks it has as it loads."""

from gateway.http.sse import *  # noqa: F403 - the twin's __all__, whatever it holds
