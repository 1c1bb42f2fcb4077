"""Schedules: cron (with cron's own weekday numbers and day OR weekday), intervals, off."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.config import load_settings
from bot.core.errors import ConfigError
from bot.ops.schedules import Kind, Schedule, day_of_week, make_trigger, parse_schedule

# A Wednesday, 10:07 UTC.
NOW = datetime(2026, 7, 15, 10, 7, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "kind", "cron", "every_s", "described"),
    [
        ("*/15 * * * *", Kind.CRON, ("*/15", "*", "*", "*", "*"), 0, "cron */15 * * * * (UTC)"),
        ("0 9 * * *", Kind.CRON, ("0", "9", "*", "*", "*"), 0, "cron 0 9 * * * (UTC)"),
        ("  0   9 * *   1-5 ", Kind.CRON, ("0", "9", "*", "*", "1-5"), 0, "cron 0 9 * * 1-5 (UTC)"),
        (
            "0 9 * JAN-MAR MON",
            Kind.CRON,
            ("0", "9", "*", "jan-mar", "mon"),
            0,
            "cron 0 9 * jan-mar mon (UTC)",
        ),
        ("@daily", Kind.CRON, ("0", "0", "*", "*", "*"), 0, "cron 0 0 * * * (UTC)"),
        ("@hourly", Kind.CRON, ("0", "*", "*", "*", "*"), 0, "cron 0 * * * * (UTC)"),
        ("every 30s", Kind.INTERVAL, (), 30, "every 30s"),
        ("every 5m", Kind.INTERVAL, (), 300, "every 5m"),
        ("every 1h", Kind.INTERVAL, (), 3600, "every 1h"),
        ("Every 90 seconds", Kind.INTERVAL, (), 90, "every 90s"),
        ("every 2 minutes", Kind.INTERVAL, (), 120, "every 2m"),
        ("every 1s", Kind.INTERVAL, (), 1, "every 1s"),
        ("every 168h", Kind.INTERVAL, (), 604_800, "every 168h"),
        ("off", Kind.OFF, (), 0, "off"),
        (" OFF ", Kind.OFF, (), 0, "off"),
    ],
)
def test_good_schedules(
    text: str, kind: Kind, cron: tuple[str, ...], every_s: int, described: str
) -> None:
    s = parse_schedule(text)
    assert s == Schedule(kind, cron=cron, every_s=every_s)
    assert s.describe() == described
    assert s.off is (kind is Kind.OFF)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "found an empty value"),
        ("   ", "found an empty value"),
        ("* * * *", "found 4 fields"),
        ("* * * * * *", "found 6 fields"),
        ("hourly", "found 1 field"),
        ("61 * * * *", "cron minute field '61'"),
        ("0 24 * * *", "cron hour field '24'"),
        ("0 9 32 * *", "cron day field '32'"),
        ("0 9 * 13 *", "cron month field '13'"),
        ("0 9 * foo *", "cron month field 'foo'"),
        ("0 9 * * 8", "day-of-week item '8'"),
        ("0 9 * * fri-mon", "runs backwards"),
        ("0 9 * * funday", "day-of-week item 'funday'"),
        ("0 9 * * xyz", "day-of-week 'xyz'"),
        ("0 9 * * */0", "at least 1"),
        ("0 0 31 2 *", "never fires"),
        ("@often", "unknown cron shorthand"),
        ("every", "interval 'every'"),
        ("every 0s", "between 1 second and 7 days"),
        ("every 169h", "between 1 second and 7 days"),
        ("every 5 days", "interval 'every 5 days'"),
        ("every -5m", "interval 'every -5m'"),
        ("every 1.5h", "interval 'every 1.5h'"),
        ("sometimes", "found 1 field"),
    ],
)
def test_bad_schedules_say_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="expected") as info:
        parse_schedule(text)
    assert says in str(info.value)


@pytest.mark.parametrize(
    ("field", "apscheduler"),
    [
        ("*", "*"),
        ("0", "sun"),
        ("7", "sun"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("mon-fri", "mon,tue,wed,thu,fri"),
        ("fri-sun", "fri,sat,sun"),
        ("5-7", "fri,sat,sun"),
        ("0,6", "sat,sun"),
        ("*/2", "tue,thu,sat,sun"),  # cron: 0,2,4,6
        ("1-5/2", "mon,wed,fri"),
        ("0-7", "*"),
        ("sun,mon,tue,wed,thu,fri,sat", "*"),
    ],
)
def test_weekday_numbers_mean_what_cron_means(field: str, apscheduler: str) -> None:
    assert day_of_week(field) == apscheduler


def next_fires(text: str, n: int, after: datetime = NOW) -> list[datetime]:
    trigger = make_trigger(parse_schedule(text))
    out: list[datetime] = []
    prev = None
    at = after
    for _ in range(n):
        nxt = trigger.get_next_fire_time(prev, at)
        out.append(nxt)
        prev = at = nxt
        at = nxt.replace(second=1)
    return out


def test_cron_runs_in_utc_on_cron_weekdays() -> None:
    fires = next_fires("0 9 * * 0", 2)  # Sunday in cron (Monday to APScheduler's from_crontab)
    assert [f.strftime("%a %H:%M %Z") for f in fires] == ["Sun 09:00 UTC"] * 2
    assert fires[0] == datetime(2026, 7, 19, 9, 0, tzinfo=UTC)


def test_day_of_month_or_weekday_as_cron_does() -> None:
    fires = next_fires("0 9 1 * mon", 4, datetime(2026, 7, 27, 10, 0, tzinfo=UTC))  # a Monday
    assert [f.date().isoformat() for f in fires] == [
        "2026-08-01",
        "2026-08-03",
        "2026-08-10",
        "2026-08-17",
    ]  # the 1st (a Saturday), Mondays


def test_every_fifteen_minutes_fires_on_the_quarter() -> None:
    assert [f.strftime("%H:%M") for f in next_fires("*/15 * * * *", 3)] == [
        "10:15",
        "10:30",
        "10:45",
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("*/15 * * * *", 900.0),
        ("0 9 * * *", 86_400.0),
        ("0 9,17 * * *", 16 * 3600.0),  # the longer of the two gaps
        ("0 9 * * 1-5", 72 * 3600.0),  # Friday to Monday: no alarm every weekend
        ("every 30s", 30.0),
        ("every 5m", 300.0),
        ("every 1h", 3600.0),
        ("off", None),
    ],
)
def test_interval_estimate(text: str, seconds: float | None) -> None:
    assert parse_schedule(text).interval_seconds(NOW) == seconds


def test_interval_trigger_and_off() -> None:
    trigger = make_trigger(parse_schedule("every 5m"))
    assert trigger.interval.total_seconds() == 300
    with pytest.raises(ValueError, match="off"):
        make_trigger(parse_schedule("off"))


def test_settings_defaults_and_errors_name_the_variable() -> None:
    s = load_settings({})
    assert s.scan_schedule == "*/15 * * * *"
    assert s.digest_schedule == "0 9 * * *"
    assert s.scan_schedule_spec.interval_seconds(NOW) == 900
    assert s.digest_schedule_spec.cron == ("0", "9", "*", "*", "*")
    assert s.leader_lease_seconds == 30
    s = load_settings(
        {
            "LOCKGUARD_SCAN_SCHEDULE": "every 30s",
            "LOCKGUARD_DIGEST_SCHEDULE": "off",
            "LOCKGUARD_LEADER_LEASE_SECONDS": "5",
        }
    )
    assert s.scan_schedule_spec.every_s == 30
    assert s.digest_schedule_spec.off
    assert s.leader_lease_seconds == 5
    with pytest.raises(ConfigError) as info:
        load_settings(
            {
                "LOCKGUARD_SCAN_SCHEDULE": "every 2 weeks",
                "LOCKGUARD_DIGEST_SCHEDULE": "0 25 * * *",
                "LOCKGUARD_LEADER_LEASE_SECONDS": "4",
            }
        )
    text = str(info.value)
    assert "LOCKGUARD_SCAN_SCHEDULE: interval 'every 2 weeks': expected 'every <n>s'" in text
    assert "LOCKGUARD_DIGEST_SCHEDULE: cron hour field '25'" in text
    assert "LOCKGUARD_LEADER_LEASE_SECONDS: Input should be greater than or equal to 5" in text
