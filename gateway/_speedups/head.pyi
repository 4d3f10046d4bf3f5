"""Types of ``gateway._speedups.head`` (compiled from ``_speedups/head.pyx``): its pure twin's public names, which it
checks it has as it loads."""

from gateway.upstream.head import *  # noqa: F403 - the twin's __all__, whatever it holds
