"""Types of ``gateway._speedups.similarity`` (compiled from ``_speedups/similarity.pyx``): its pure twin's public
names, which it checks it has as it loads."""

from gateway.cache.similarity import *  # noqa: F403 - the twin's __all__, whatever it holds
