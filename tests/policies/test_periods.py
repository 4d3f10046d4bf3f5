"""Windows and reset periods: aligned to the clock in UTC, every rollover a new tag, resets at UTC midnight."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from gateway.policies import periods


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def test_rate_windows_are_aligned_to_the_clock():
    now = ms("2026-03-10T12:34:56.789")
    assert periods.window("rpm", now)[1] == ms("2026-03-10T12:35:00")
    assert periods.window("rph", now)[1] == ms("2026-03-10T13:00:00")
    assert periods.window("rpd", now)[1] == ms("2026-03-11T00:00:00")
    assert periods.window("rpm", now)[0] != periods.window("rpm", ms("2026-03-10T12:35:00"))[0]
    assert periods.window("rpm", now)[0] == periods.window("rpm", ms("2026-03-10T12:34:00"))[0]


def test_retry_after_is_whole_seconds_until_the_window_ends():
    now = ms("2026-03-10T12:34:56.200")
    assert periods.seconds_until(periods.window("rpm", now)[1], now) == 4
    assert periods.seconds_until(now, now) == 1


def test_weekly_runs_monday_to_monday_and_monthly_first_to_first():
    wednesday = ms("2026-03-11T08:00:00")
    week = periods.period("weekly", None, 0, wednesday)
    assert (periods.iso(week.start_ms), periods.iso(week.end_ms)) == ("2026-03-09T00:00:00.000Z",
                                                                     "2026-03-16T00:00:00.000Z")
    month = periods.period("monthly", None, 0, wednesday)
    assert periods.iso(month.end_ms) == "2026-04-01T00:00:00.000Z"
    december = periods.period("monthly", None, 0, ms("2026-12-31T23:59:59"))
    assert periods.iso(december.end_ms) == "2027-01-01T00:00:00.000Z"


def test_periodic_reset_days_count_from_the_day_the_period_was_set():
    since = ms("2026-03-10T15:00:00")
    first = periods.period(None, 3, since, ms("2026-03-12T23:00:00"))
    assert periods.iso(first.start_ms) == "2026-03-10T00:00:00.000Z"
    assert periods.iso(first.end_ms) == "2026-03-13T00:00:00.000Z"
    assert periods.last_reset_ms(first, since) is None  # no reset yet
    second = periods.period(None, 3, since, ms("2026-03-13T00:00:00"))
    assert second.tag != first.tag
    assert periods.iso(periods.last_reset_ms(second, since)) == "2026-03-13T00:00:00.000Z"


def test_a_cumulative_limit_never_resets():
    forever = periods.period(None, None, 0, ms("2026-03-10T00:00:00"))
    assert forever.end_ms is None and forever.tag == "all"
    assert forever.ttl_ms(0) >= 10 * 365 * periods.DAY_MS


@given(st.integers(min_value=0, max_value=4_000_000_000_000), st.sampled_from(["weekly", "monthly", None]),
       st.integers(min_value=1, max_value=365))
def test_every_period_holds_now_and_ends_at_utc_midnight(now, reset, days):
    current = periods.period(reset, None if reset else days, 0, now)
    assert current.start_ms <= now < current.end_ms
    assert current.start_ms % periods.DAY_MS == 0 and current.end_ms % periods.DAY_MS == 0
    assert periods.period(reset, None if reset else days, 0, current.end_ms).tag != current.tag
    assert periods.period(reset, None if reset else days, 0, current.end_ms - 1).tag == current.tag
