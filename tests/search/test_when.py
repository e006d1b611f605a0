"""Time in a query (search/when.py): the spans English and Japanese expressions name, and nearness."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memhub.search.when import Span, nearness, spans

NOW = datetime(2024, 1, 4, 0, 19, tzinfo=UTC)  # a Thursday


def days(query: str, now: datetime = NOW) -> list[tuple[str, str]]:
    """Each span as (first day, day after the last), ISO dates."""
    return [(s.start.date().isoformat(), s.end.date().isoformat()) for s in spans(query, now)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Who did Maria have dinner with on May 3, 2023?", [("2023-05-03", "2023-05-04")]),
        ("What news did Evan share on 9th December 2023?", [("2023-12-09", "2023-12-10")]),
        ("What did Calvin book on 1st September 2023?", [("2023-09-01", "2023-09-02")]),
        ("the 3rd of May", [("2023-05-03", "2023-05-04")]),  # no year: the latest not after now
        ("What setback did Melanie face in October 2023?", [("2023-10-01", "2023-11-01")]),
        ("Did Andrew have a pet dog during March 2023?", [("2023-03-01", "2023-04-01")]),
        ("When did Melanie go camping in June?", [("2023-06-01", "2023-07-01")]),
        ("what did we ship in feb", [("2023-02-01", "2023-03-01")]),
        ("Which countries did James visit in 2010?", [("2010-01-01", "2011-01-01")]),
        ("logs from 2023-05-03", [("2023-05-03", "2023-05-04")]),
        ("release 2023/5/3", [("2023-05-03", "2023-05-04")]),
        ("between August and November 2023", [("2023-08-01", "2023-09-01"), ("2023-11-01", "2023-12-01")]),
        ("in December", [("2023-12-01", "2024-01-01")]),
        ("in January", [("2024-01-01", "2024-02-01")]),  # the current month has begun
        ("on February 29", []),  # 2023 has none, 2024's is still ahead
    ],
)
def test_english_absolute_dates(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did we decide yesterday?", [("2024-01-03", "2024-01-04")]),
        ("what was fixed today", [("2024-01-04", "2024-01-05")]),
        ("the day before yesterday", [("2024-01-02", "2024-01-03")]),
        ("notes from last week", [("2023-12-25", "2024-01-01")]),  # Monday to Monday
        ("this week", [("2024-01-01", "2024-01-08")]),
        ("What did John do last weekend?", [("2023-12-30", "2024-01-01")]),
        ("last month's outage", [("2023-12-01", "2024-01-01")]),
        ("this month", [("2024-01-01", "2024-02-01")]),
        ("What did Melanie see during their camping trip last year?", [("2023-01-01", "2024-01-01")]),
        ("Where did Caroline move from 4 years ago?", [("2019-07-06", "2020-07-05")]),
        ("a week ago", [("2023-12-24", "2023-12-31")]),
        ("two days ago", [("2024-01-01", "2024-01-03")]),
    ],
)
def test_english_relative_expressions_are_read_against_now(
    query: str, expected: list[tuple[str, str]]
) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("2023年5月3日の障害", [("2023-05-03", "2023-05-04")]),
        ("2023年5月に決めたこと", [("2023-05-01", "2023-06-01")]),
        ("２０２３年５月", [("2023-05-01", "2023-06-01")]),  # full-width digits
        ("5月3日のリリース", [("2023-05-03", "2023-05-04")]),
        ("12月の売上", [("2023-12-01", "2024-01-01")]),
        ("2022年の方針", [("2022-01-01", "2023-01-01")]),
        ("昨日の作業", [("2024-01-03", "2024-01-04")]),
        ("一昨日", [("2024-01-02", "2024-01-03")]),
        ("先週の会議", [("2023-12-25", "2024-01-01")]),
        ("今週", [("2024-01-01", "2024-01-08")]),
        ("先月のリリース", [("2023-12-01", "2024-01-01")]),
        ("去年の方針", [("2023-01-01", "2024-01-01")]),
        ("今年", [("2024-01-01", "2025-01-01")]),
        ("3日前に直したバグ", [("2023-12-31", "2024-01-02")]),
        ("2ヶ月前に決めた", [("2023-10-21", "2023-11-20")]),
        ("三年前", [("2020-07-05", "2021-07-05")]),
    ],
)
def test_japanese_expressions(query: str, expected: list[tuple[str, str]]) -> None:
    assert days(query) == expected


@pytest.mark.parametrize(
    "query",
    [
        "",
        "How does the reservation API handle payments?",
        "How big may a change set for review be?",  # the verb, not the month
        "May I deploy on a Friday?",
        "this may be wrong",
        "they march on",
        "Is June on the team?",  # a bare month name is a name as often
        "Mars rover",
        "本番DBのバックアップ手順",
        "前日に取り消した場合いくら払う?",  # the day before something, not before now
        "先日の件",  # "the other day": too vague to date
        "3ヶ月間の計画",  # a duration
        "月曜日の定例",
        "listen on port 8080 until 17",
        # numbers and short forms that are not dates
        "step 2 may fail",
        "2 may be enough",
        "convert hex to dec",
        "use chmod in oct",
        "split on sep",
        "notes written by Jan",
        "a budget of 2023 dollars",
        "about 2000 users",
        "timeout to 2000",
        "limit to 2048 tokens",  # after now: no memory can be in it
        "in 2030",
    ],
)
def test_queries_that_name_no_time(query: str) -> None:
    assert spans(query, NOW) == ()


def test_may_and_march_are_months_with_a_date_or_after_a_word_of_time() -> None:
    assert days("in May") == [("2023-05-01", "2023-06-01")]
    assert days("what did we do in may") == [("2023-05-01", "2023-06-01")]
    assert days("last May") == [("2023-05-01", "2023-06-01")]
    assert days("since March") == [("2023-03-01", "2023-04-01")]
    assert days("May 2023") == [("2023-05-01", "2023-06-01")]
    assert days("may 3, 2023") == [("2023-05-03", "2023-05-04")]
    assert days("this may be it") == []


def test_spans_come_in_time_order_merged_and_a_naive_now_is_utc() -> None:
    assert days("昨日と先週") == [("2023-12-25", "2024-01-01"), ("2024-01-03", "2024-01-04")]
    assert days("in 2023, in June 2023 and on July 1, 2023") == [("2023-01-01", "2024-01-01")]
    assert days("June 2023 or July 2023") == [("2023-06-01", "2023-08-01")]  # touching: one span
    assert days("yesterday", NOW.replace(tzinfo=None)) == [("2024-01-03", "2024-01-04")]
    tokyo = NOW.astimezone(timezone(timedelta(hours=9)))
    assert days("yesterday", tokyo) == [("2024-01-03", "2024-01-04")]  # read in UTC


def test_impossible_dates_name_nothing() -> None:
    assert days("on February 30, 2023") == []
    assert days("2023年13月") == []
    assert days("1000 years ago") == []
    assert days("0月") == [] and days("2月30日") == [] and days("0 days ago") == []


def test_a_clock_at_the_end_of_time_or_a_wall_of_digits_names_nothing() -> None:
    """No user input raises: dates past datetime's range name none, and a long run of digits
    is read in linear time (the numbers of "N days ago" have at most three digits)."""
    end = datetime(9999, 12, 31, tzinfo=UTC)
    for query in ("in the winter", "last month", "next week", "昨日", "in December", "1 year ago"):
        spans(query, end)
        spans(query, datetime(1, 1, 1, tzinfo=UTC))
    assert spans("9" * 5000 + " days ago", NOW) == ()
    assert spans("\u2473" * 2000 + "日前", NOW) == ()  # NFKC: "20" two thousand times
    assert days("12 days ago") == [("2023-12-22", "2023-12-24")]
    assert days("12日前") == [("2023-12-22", "2023-12-24")]


def test_short_forms_and_may_after_a_number_are_dates_only_when_dated() -> None:
    assert days("Dec 3, 2023") == [("2023-12-03", "2023-12-04")]
    assert days("in Oct 2023") == [("2023-10-01", "2023-11-01")]
    assert days("2nd May 2023") == [("2023-05-02", "2023-05-03")]
    assert days("the 2nd of May") == [("2023-05-02", "2023-05-03")]
    assert days("2 May 2023") == [("2023-05-02", "2023-05-03")]


def test_nearness_is_one_inside_and_falls_off_linearly_outside() -> None:
    june = Span(datetime(2023, 6, 1, tzinfo=UTC), datetime(2023, 7, 1, tzinfo=UTC))
    before, after = timedelta(days=2), timedelta(days=10)
    assert nearness(datetime(2023, 6, 15, tzinfo=UTC), [june], before, after) == 1.0
    assert nearness(datetime(2023, 7, 6, tzinfo=UTC), [june], before, after) == pytest.approx(0.5)
    assert nearness(datetime(2023, 5, 31, tzinfo=UTC), [june], before, after) == pytest.approx(0.5)
    assert nearness(datetime(2023, 8, 1, tzinfo=UTC), [june], before, after) == 0.0
    assert nearness(datetime(2023, 6, 15, tzinfo=UTC), [], before, after) == 0.0
    may = Span(datetime(2023, 5, 1, tzinfo=UTC), datetime(2023, 6, 1, tzinfo=UTC))
    assert nearness(datetime(2023, 6, 3, tzinfo=UTC), [may, june], before, after) == 1.0  # the best span
    july = Span(datetime(2023, 7, 3, tzinfo=UTC), datetime(2023, 7, 4, tzinfo=UTC))
    # 1.5 days past June's end (0.85 of the way back) beats half a day before July 3rd (0.75)
    assert nearness(datetime(2023, 7, 2, 12, tzinfo=UTC), [june, july], before, after) == pytest.approx(0.85)
    assert nearness(datetime(2023, 7, 2, 12, tzinfo=UTC), [july], before, after) == pytest.approx(0.75)
    assert nearness(datetime(2023, 7, 1, tzinfo=UTC), [june], timedelta(0), timedelta(0)) == 0.0
