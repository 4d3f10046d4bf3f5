"""Types of ``gateway._speedups.context`` (compiled from ``_speedups/context.pyx``): its pure twin's public
names, which it checks it has as it loads."""

from gateway.http.context import *  # noqa: F403 - the twin's __all__, whatever it holds
