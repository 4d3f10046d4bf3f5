"""Types of ``gateway._speedups.conditions`` (compiled from ``_speedups/conditions.pyx``): its pure twin's public
names, which it checks it has as it loads."""

from gateway.routing.conditions import *  # noqa: F403 - the twin's __all__, whatever it holds
