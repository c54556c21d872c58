"""Cron semantics: five fields, names, refusals, translation to Scheduler's six-field
expressions (checked against croniter on both forms) and fire times across DST days."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from croniter import croniter

from relayflow.errors import ValidationError
from relayflow.schedules.cron import parse_cron, scheduler_to_unix
from relayflow.schedules.times import (
    cron_fire_times,
    expression_fire_times,
    interval_fire_times,
    iso_utc,
    rate_expression,
)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


@pytest.mark.parametrize(
    ("expression", "translated"),
    [
        ("0 9 * * MON-FRI", "cron(0 9 ? * MON-FRI *)"),
        ("0 9 * * 1-5", "cron(0 9 ? * MON-FRI *)"),
        ("*/15 * * * *", "cron(0/15 * * * ? *)"),
        ("30 2 1,15 * *", "cron(30 2 1,15 * ? *)"),
        ("0 0 * JAN-MAR *", "cron(0 0 * 1-3 ? *)"),
        ("0 12 * * 0", "cron(0 12 ? * SUN *)"),
        ("0 12 * * 7", "cron(0 12 ? * SUN *)"),
        ("0 12 * * sat,sun", "cron(0 12 ? * SUN,SAT *)"),
        ("5-7 0-3 * * *", "cron(5-7 0-3 * * ? *)"),
        ("0,30 8-18/2 * * *", "cron(0,30 8,10,12,14,16,18 * * ? *)"),
        ("0 0 */1 * *", "cron(0 0 * * ? *)"),
    ],
)
def test_translation_to_scheduler(expression: str, translated: str) -> None:
    assert parse_cron(expression).scheduler_expression() == translated


@pytest.mark.parametrize(
    "expression",
    [
        "0 9 * * MON-FRI",
        "*/15 * * * *",
        "30 2 1,15 * *",
        "0 0 * JAN-MAR *",
        "0 12 * * 0",
        "0 12 * * sat,sun",
        "0,30 8-18/2 * * *",
        "7 */5 * * 2-4",
        "0 0 29 2 *",
    ],
)
def test_the_translation_fires_when_the_expression_does(expression: str) -> None:
    # Evaluate the original and the six-field translation (read back to five fields) with
    # croniter from the same start: the fire times must agree.
    back = scheduler_to_unix(parse_cron(expression).scheduler_expression())
    start = datetime(2026, 1, 1, tzinfo=UTC)
    original, translated = croniter(expression, start), croniter(back, start)
    for _ in range(60):
        assert original.get_next(datetime) == translated.get_next(datetime)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 9 1 * MON", "restricts both day of month and day of week"),
        ("0 9 */2 * 1-5", "restricts both"),
        ("0 9 * *", "must have five fields"),
        ("0 0 9 * * *", "must have five fields"),
        ("61 * * * *", "invalid"),
        ("0 0 L * *", "bad day of month"),
        ("0 0 ? * *", "bad day of month"),
        ("0 0 * * 1#2", "bad day of week"),
        ("@daily", "five fields"),
    ],
)
def test_refused_expressions(expression: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_cron(expression)


def test_berlin_weekday_mornings_in_utc_follow_summer_time() -> None:
    times = cron_fire_times("0 9 * * MON-FRI", "Europe/Berlin", ms("2026-03-26T00:00:00Z"), 4)
    # Thu 26 and Fri 27 March are CET (UTC+1); after the switch on Sun 29, CEST (UTC+2).
    assert [iso_utc(t) for t in times] == [
        "2026-03-26T08:00:00Z",
        "2026-03-27T08:00:00Z",
        "2026-03-30T07:00:00Z",
        "2026-03-31T07:00:00Z",
    ]


def test_a_time_skipped_by_spring_forward_does_not_fire_that_day() -> None:
    # Berlin goes from 02:00 to 03:00 on 29 March 2026: 02:30 does not exist that day.
    times = cron_fire_times("30 2 * * *", "Europe/Berlin", ms("2026-03-27T12:00:00Z"), 3)
    assert [iso_utc(t) for t in times] == [
        "2026-03-28T01:30:00Z",  # 02:30 CET
        "2026-03-30T00:30:00Z",  # 02:30 CEST; 29 March is skipped
        "2026-03-31T00:30:00Z",
    ]


def test_a_time_repeated_by_fall_back_fires_once_at_its_first_occurrence() -> None:
    # Berlin goes from 03:00 back to 02:00 on 25 October 2026: 02:30 happens twice.
    times = cron_fire_times("30 2 * * *", "Europe/Berlin", ms("2026-10-24T12:00:00Z"), 2)
    assert [iso_utc(t) for t in times] == [
        "2026-10-25T00:30:00Z",  # 02:30 CEST, the first one; not again at 01:30Z (CET)
        "2026-10-26T01:30:00Z",
    ]


def test_sub_hourly_cron_does_not_repeat_the_fall_back_hour() -> None:
    start = ms("2026-10-25T00:40:00Z")  # 02:40 CEST, in the first pass of the repeated hour
    times = cron_fire_times("*/20 * * * *", "Europe/Berlin", start, 3)
    assert [iso_utc(t) for t in times] == [
        "2026-10-25T02:00:00Z",  # 03:00 CET: the second pass of 02:xx does not fire again
        "2026-10-25T02:20:00Z",
        "2026-10-25T02:40:00Z",
    ]


def test_starting_inside_the_repeated_hour_second_pass_finds_the_next_day() -> None:
    start = ms("2026-10-25T01:10:00Z")  # 02:10 CET, second pass
    times = cron_fire_times("30 2 * * *", "Europe/Berlin", start, 1)
    assert [iso_utc(t) for t in times] == ["2026-10-26T01:30:00Z"]


def test_new_york_dst_days() -> None:
    spring = cron_fire_times("30 2 * * *", "America/New_York", ms("2026-03-07T00:00:00Z"), 2)
    assert [iso_utc(t) for t in spring] == ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"]
    fall = cron_fire_times("30 1 * * *", "America/New_York", ms("2026-10-31T12:00:00Z"), 2)
    assert [iso_utc(t) for t in fall] == ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]


def test_utc_when_no_time_zone() -> None:
    times = cron_fire_times("0 0 * * *", None, ms("2026-01-01T00:00:00Z"), 2)
    assert [iso_utc(t) for t in times] == ["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]


def test_scheduler_expressions_read_back_give_the_same_times() -> None:
    parsed = parse_cron("0 9 * * MON-FRI")
    after = ms("2026-03-26T00:00:00Z")
    assert expression_fire_times(
        parsed.scheduler_expression(), "Europe/Berlin", None, after, 5
    ) == cron_fire_times(parsed, "Europe/Berlin", after, 5)


def test_rates_and_intervals() -> None:
    assert rate_expression(15 * 60_000) == "rate(15 minutes)"
    assert rate_expression(3_600_000) == "rate(1 hour)"
    assert rate_expression(2 * 86_400_000) == "rate(2 days)"
    assert rate_expression(90 * 60_000) == "rate(90 minutes)"
    with pytest.raises(ValidationError, match="whole number of minutes"):
        rate_expression(30_000)
    assert interval_fire_times(1_000, 100, 1_000, 3) == [1_100, 1_200, 1_300]
    assert interval_fire_times(1_000, 100, 1_250, 2) == [1_300, 1_400]
    start = ms("2026-01-01T00:15:00Z")
    assert expression_fire_times("rate(15 minutes)", "UTC", start, start - 1, 2) == [
        start,
        start + 900_000,
    ]


def test_one_time_expressions() -> None:
    at = ms("2026-05-09T13:22:00Z")
    assert expression_fire_times("at(2026-05-09T13:22:00)", "UTC", None, at - 1, 3) == [at]
    assert expression_fire_times("at(2026-05-09T13:22:00)", "UTC", None, at, 3) == []
