"""Types of ``gateway._speedups.recordrow`` (compiled from ``_speedups/recordrow.pyx``): its pure twin's public
names, which it checks it has as it loads."""

from gateway.observability.recordrow import *  # noqa: F403 - the twin's __all__, whatever it holds
