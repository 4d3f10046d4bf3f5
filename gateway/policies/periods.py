"""Time math of policies: fixed rate-limit windows aligned to the clock and usage-limit reset periods.

Every window and period has a ``tag`` that goes into its counters' names, so a rollover is a new counter (no
read-then-reset at a boundary) and the old counter simply expires.

- Rate windows (``rpm``, ``rph``, ``rpd``): fixed, aligned to the Unix epoch in UTC: a minute window starts at
  second 0 of each minute, an hour window at minute 0, a day window at UTC midnight. A refused request may retry
  when the current window ends (``Retry-After``).
- Usage periods, all starting and ending at UTC midnight: ``weekly`` runs Monday to Monday, ``monthly`` from the
  1st to the 1st, ``periodic_reset_days: N`` runs N days at a time counted from the UTC midnight of the day the
  period was set (creation, or the update that changed it). Without either the limit is cumulative: one period
  that never ends.
"""

from __future__ import annotations

from datetime import UTC, datetime

SECOND_MS = 1000
DAY_MS = 86_400_000
UNIT_MS = {"rpm": 60_000, "rph": 3_600_000, "rpd": DAY_MS}
UNIT_WORD = {"rpm": "minute", "rph": "hour", "rpd": "day"}
#: how long a counter outlives its window or period (clock skew between instances, late settles)
KEY_MARGIN_MS = 3_600_000
#: the counter lifetime of a cumulative limit (it has no period end)
CUMULATIVE_TTL_MS = 10 * 366 * DAY_MS


def window(unit: str, now_ms: int) -> tuple[str, int]:
    """(tag, end in epoch ms) of the fixed window of ``unit`` holding ``now_ms``."""
    size = UNIT_MS[unit]
    index = now_ms // size
    return f"{unit}{index}", (index + 1) * size


class Period:
    """One usage period: ``tag`` names its counters; ``start_ms``/``end_ms`` are None for a cumulative limit."""

    __slots__ = ("tag", "start_ms", "end_ms")

    def __init__(self, tag: str, start_ms: int | None, end_ms: int | None) -> None:
        self.tag = tag
        self.start_ms = start_ms
        self.end_ms = end_ms

    def ttl_ms(self, now_ms: int) -> int:
        """The lifetime a counter of this period gets when created at ``now_ms``."""
        if self.end_ms is None:
            return CUMULATIVE_TTL_MS
        return max(1, self.end_ms - now_ms) + KEY_MARGIN_MS


CUMULATIVE = Period("all", None, None)


def _month_start(year: int, month: int) -> int:
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp() * 1000)


def period(reset: str | None, days: int | None, since_ms: int, now_ms: int) -> Period:
    """The period holding ``now_ms`` for a reset setting set at ``since_ms``."""
    day = now_ms // DAY_MS
    if reset == "weekly":
        monday = day - (day + 3) % 7  # 1970-01-01 was a Thursday
        return Period(f"w{monday}", monday * DAY_MS, (monday + 7) * DAY_MS)
    if reset == "monthly":
        at = datetime.fromtimestamp(now_ms / 1000, UTC)
        start = _month_start(at.year, at.month)
        end = _month_start(at.year + 1, 1) if at.month == 12 else _month_start(at.year, at.month + 1)
        return Period(f"m{at.year:04d}{at.month:02d}", start, end)
    if days:
        anchor = since_ms // DAY_MS
        first = anchor + max(0, day - anchor) // days * days
        return Period(f"d{days}@{anchor}:{first}", first * DAY_MS, (first + days) * DAY_MS)
    return CUMULATIVE


def last_reset_ms(current: Period, since_ms: int) -> int | None:
    """When usage last went back to zero: the current period's start, if a reset has happened since the period
    was set; else None (and always None for a cumulative limit)."""
    if current.start_ms is None or current.start_ms <= since_ms:
        return None
    return current.start_ms


def iso(ms: int | None) -> str | None:
    """Epoch ms as ISO 8601 UTC (``2026-12-01T00:00:00.000Z``); None stays None."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso_ms(text: str) -> int:
    """ISO 8601 (``...Z`` or with an offset) to epoch ms; 0 for an empty string."""
    if not text:
        return 0
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def seconds_until(end_ms: int, now_ms: int) -> int:
    """Whole seconds (at least 1) from ``now_ms`` to ``end_ms``: a ``Retry-After`` value."""
    return max(1, -(-(end_ms - now_ms) // SECOND_MS))
