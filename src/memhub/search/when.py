"""Time in a query: the spans of time a search names ("in June", "May 3, 2023", "last week",
"4 years ago", 「2023年5月」, 「先週」), read against a reference moment (`now`), and how near a
memory's date is to them. Pure functions, English and Japanese; no expression, no span.

A span is [start, end) in UTC. What is read:

- absolute dates: a month name with a day and/or a year ("May 3, 2023", "3rd May 2023",
  "October 2023"), a month alone after a word of time ("in June", "during March"; the short
  forms dec, oct, sep, jan only dated), a year after a word that leads a time, not a
  quantity ("in 2022", "since 2020"; not "about 2000 users"), ISO dates (2023-05-03,
  2023/5/3), 2023年5月3日, 2023年5月, 5月3日, 5月 (not 5月間), 2023年 (not 2023年前/間);
  a date without its year is its latest `years` occurrences begun by `now` (years=1: June
  asked in March 2024 is June 2023);
  a season with a year or after a word of time ("summer 2021", "in the fall": March,
  June, September or December and the two months after);
- relative ones, against `now`: today, yesterday, the day before yesterday, this/last
  week, weekend, month, year, "N days/weeks/months/years ago" (a span of one unit around
  that moment), 今日 昨日 一昨日 先週 今週 先月 今月 去年 昨年 今年 一昨年, N日前 N週間前 Nか月前
  N年前.

Ambiguous words are read as time only where nothing else fits: a month name ("june",
"august" are names too) counts only with a day or a year beside it or after a word of time
(in, on, during, since, until, by, of, early, late, …); "may" and "march", verbs too, only
dated or after a word that can only lead a time (in, during, since, until, early, late, …;
capitalised, also after this/last/next), so "How big may a change be?" and "this may be"
name no time; 前日 ("the day before" something) and 先日 ("the other day") name none either.
Spans are returned merged and in time order.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = ["Span", "nearness", "spans"]

DAY = timedelta(days=1)
ZERO = timedelta(0)


@dataclass(frozen=True, slots=True)
class Span:
    """[start, end) in UTC (and as POSIX seconds, for `nearness`)."""

    start: datetime
    end: datetime
    first: float = field(init=False, repr=False, compare=False)
    last: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "first", self.start.timestamp())
        object.__setattr__(self, "last", self.end.timestamp())


MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
# short forms that are other words as often ("dec"imal, "oct"al, "sep"arator, "Jan" the name):
# months only with a day or a year ("Dec 3", "Oct 2023")
DATED_ONLY = frozenset(("dec", "oct", "sep", "sept", "jan"))
# words after which a bare month or year is a time ("in June", "during 2022", "early May")
LEAD = (
    "in|on|during|since|until|till|by|of|from|to|through|before|after|between|and|or|"
    "early|late|mid|last|next|this|every|around|about|throughout|year"
)
# "may" and "march" are verbs too: undated, they are months only after a word that can only
# lead a time (or, capitalised, after any but the weak ones)
AMBIGUOUS = ("may", "march")
STRONG = ("in", "during", "since", "until", "till", "early", "late", "mid", "throughout")
WEAK = ("and", "or", "to", "on", "about", "from", "by", "of", "year")
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(?P<{}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{}>(?:19|20)\d\d)"
# month day[,] [year] | day [of] month[,] [year] | month[,] year | lead month
_EN_DATE = re.compile(
    rf"\b(?:(?P<lead>{LEAD})\s+(?:the\s+)?)?"
    rf"(?:{_DAY.format('d1')}\s+(?:of\s+)?)?"
    rf"(?P<month>{_MONTH})\.?"
    rf"(?:\s+{_DAY.format('d2')}(?![\d:]))?"
    rf"(?:,?\s+{_YEAR.format('year')})?\b",
    re.IGNORECASE,
)
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month (north)
_EN_SEASON = re.compile(
    rf"\b(?:(?P<lead>{LEAD}|the end of|the start of)\s+(?:the\s+)?)?"
    rf"(?P<season>spring|summer|autumn|fall|winter)(?:\s+of)?(?:,?\s+{_YEAR.format('year')})?\b",
    re.IGNORECASE,
)
# a bare year only after a word that leads a time, not a quantity ("about 2000 users",
# "a budget of 2023 dollars", "timeout to 2000" name none)
YEAR_LEAD = "in|during|since|until|till|throughout|from|through|between|before|after|early|late|mid|year"
_EN_YEAR = re.compile(
    rf"\b(?:{YEAR_LEAD})\s+(?:the\s+year\s+)?{_YEAR.format('year')}\b(?![-/])", re.IGNORECASE
)
_ISO = re.compile(r"(?<!\d)((?:19|20)\d\d)[-/](\d{1,2})[-/](\d{1,2})(?!\d)")
_JA_DATE = re.compile(r"(?<!\d)(?:((?:19|20)\d\d)年)?(?:(\d{1,2})月(?!間|曜)(?:(\d{1,2})日(?!間))?)")
_JA_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)年(?!前|間|後|\d{1,2}月)")
_NUMBER = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
    "一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "数": 3,
}  # fmt: skip
_EN_AGO = re.compile(
    r"\b(\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"\s+(day|week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
_JA_AGO = re.compile(
    r"(?<!\d)(\d{1,3}|[一二三四五六七八九十数])\s*(日|週間|週|か月|ヶ月|カ月|ケ月|箇月|ヵ月|年)前"
)
_EN_RELATIVE = re.compile(
    r"\b(today|tonight|yesterday|the day before yesterday|last night|"
    r"(?:this|last|past|previous)\s+(?:week|weekend|month|year))\b",
    re.IGNORECASE,
)
_JA_RELATIVE = re.compile(
    r"一昨日|おととい|昨日|昨夜|昨晩|今日|今朝|先週末|先週|今週|先月|今月|一昨年|おととし|去年|昨年|今年"
)
_UNIT_DAYS = {"day": 1, "日": 1, "week": 7, "週間": 7, "週": 7, "month": 30, "year": 365, "年": 365}


def spans(query: str, now: datetime, years: int = 1) -> tuple[Span, ...]:
    """The spans of time `query` names, read against `now` (aware; naive is taken as UTC), in
    time order, overlapping or touching ones merged; () when it names none. A date written
    without its year names its latest `years` occurrences begun by `now` (1: only the latest).
    A span that begins after `now` is dropped: no memory can be in it ("limit to 2048 tokens")."""
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    try:
        found = _read(unicodedata.normalize("NFKC", query), now, years)
    except (OverflowError, ValueError):  # a date beyond datetime's years 1-9999 names none
        return ()
    return tuple(span for span in found if span.start <= now)  # nothing is stored in the future


def _read(text: str, now: datetime, years: int) -> tuple[Span, ...]:
    found: list[tuple[int, Span]] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], named: Span | tuple[Span, ...] | None) -> None:
        if not named or any(s < match.end() and match.start() < e for s, e in taken):
            return
        found.extend((match.start(), span) for span in (named if isinstance(named, tuple) else (named,)))
        taken.append((match.start(), match.end()))

    for match in _ISO.finditer(text):
        add(match, _day(int(match[1]), int(match[2]), int(match[3])))
    for match in _JA_DATE.finditer(text):
        add(match, _dated(match[1], match[2], match[3], now, years))
    for match in _JA_YEAR.finditer(text):
        add(match, _year(int(match[1])))
    for match in _EN_DATE.finditer(text):
        add(match, _english(match, now, years))
    for match in _EN_SEASON.finditer(text):
        add(match, _season(match, now, years))
    for match in _EN_YEAR.finditer(text):
        add(match, _year(int(match["year"])))
    for match in _EN_AGO.finditer(text):
        add(match, _ago(_NUMBER.get(match[1].lower()) or int(match[1]), match[2].lower(), now))
    for match in _JA_AGO.finditer(text):
        unit = match[2] if match[2] in _UNIT_DAYS else "month"
        add(match, _ago(_NUMBER.get(match[1]) or int(match[1]), unit, now))
    for match in _EN_RELATIVE.finditer(text):
        add(match, _relative(" ".join(match[1].lower().split()), now))
    for match in _JA_RELATIVE.finditer(text):
        add(match, _relative(match[0], now))
    return _merged(span for _, span in found)


def nearness(moment: datetime, found: Sequence[Span], before: timedelta, after: timedelta) -> float:
    """How well `moment` (a memory's date) matches the best of `found` (disjoint spans in time
    order, as `spans` returns them): 1 inside a span, falling linearly to 0 at `before` ahead
    of its start and `after` past its end (a memory is often written a while after what it
    tells); 0 with no span."""
    at = (moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment).timestamp()
    # `spans` gives disjoint spans in time order: only the last begun by `at` and the next count
    i = bisect_right(found, at, key=lambda span: span.first)
    best = 0.0
    for span in found[max(0, i - 1) : i + 1]:
        if at < span.first:
            near = 1.0 - (span.first - at) / before.total_seconds() if before > ZERO else 0.0
        elif at >= span.last:
            near = 1.0 - (at - span.last) / after.total_seconds() if after > ZERO else 0.0
        else:
            return 1.0
        best = max(best, near)
    return best


def _merged(found: Iterable[Span]) -> tuple[Span, ...]:
    """`found` in time order, overlapping or touching spans joined into one."""
    out: list[Span] = []
    for span in sorted(found, key=lambda s: (s.start, s.end)):
        if out and span.start <= out[-1].end:
            if span.end > out[-1].end:
                out[-1] = Span(out[-1].start, span.end)
        else:
            out.append(span)
    return tuple(out)


# -- the spans --------------------------------------------------------------------------------


def _english(match: re.Match[str], now: datetime, years: int) -> tuple[Span, ...]:
    day, year, lead = match["d1"] or match["d2"], match["year"], (match["lead"] or "").lower()
    word = match["month"]
    name = word.lower().rstrip(".")
    if name in DATED_ONLY and not (day or year):
        return ()  # "values in dec", "chmod in oct", "split on sep", "written by Jan"
    if name in AMBIGUOUS and match["d1"] and not year:
        between = match.string[match.end("d1") : match.start("month")].lower()
        if not (between.startswith(("st", "nd", "rd", "th")) or "of" in between.split()):
            return ()  # "step 2 may fail": a number before a verb; "2nd May", "2 of March" are dates
    if not (day or year):
        if not lead:
            return ()  # a bare month name: a word or a name as often as a month
        if word.lower() in AMBIGUOUS and lead not in STRONG and (word.islower() or lead in WEAK):
            return ()  # "this may be", "and March on", "to May": words, not months
    return _dated(year, str(MONTHS[word.lower()]), day, now, years)


def _season(match: re.Match[str], now: datetime, years: int) -> tuple[Span, ...]:
    """Three months from the season's first (winter: December to February); without a year,
    the latest `years` begun by `now`."""
    year, lead = match["year"], (match["lead"] or "").lower()
    if not year and (not lead or lead in WEAK):
        return ()  # "fall", "spring" are words too
    first = _SEASONS[match["season"].lower()]
    carry, after = divmod(first + 2, 12)  # the month after the season's last, 0-based
    out = []
    for y in _years(year, now, years):
        start = datetime(y, first, 1, tzinfo=UTC)
        if year or start <= now:
            out.append(Span(start, datetime(y + carry, after + 1, 1, tzinfo=UTC)))
    return tuple(out[: 1 if year else years])


def _years(year: str | None, now: datetime, years: int) -> range:
    """The year written, or the years a date without one may fall in (newest first)."""
    return range(int(year), int(year) - 1, -1) if year else range(now.year, now.year - years - 1, -1)


def _dated(
    year: str | None, month: str | None, day: str | None, now: datetime, years: int
) -> tuple[Span, ...]:
    """Year, month and day as written (any may be missing); a date without its year is the
    latest `years` not after `now`."""
    if month is None:
        return (_year(int(year)),) if year else ()
    m, d = int(month), int(day) if day else None
    if not 1 <= m <= 12 or (d is not None and not 1 <= d <= 31):
        return ()
    out = []
    for y in _years(year, now, years):
        span = _day(y, m, d) if d is not None else _month(y, m)
        if span is not None and (year or span.start <= now):
            out.append(span)
    return tuple(out[: 1 if year else years])


def _day(year: int, month: int, day: int) -> Span | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return Span(start, start + DAY)


def _month(year: int, month: int) -> Span:
    start = datetime(year, month, 1, tzinfo=UTC)
    return Span(start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC))


def _year(year: int) -> Span:
    return Span(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))


def _ago(n: int, unit: str, now: datetime) -> Span | None:
    """One unit of time around `n` units before `now`."""
    days = _UNIT_DAYS.get(unit, 30)
    if not 0 < n <= 100:
        return None
    centre = now - n * days * DAY
    half = max(DAY, days * DAY / 2)
    return Span(centre - half, centre + half)


def _relative(word: str, now: datetime) -> Span | None:
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - today.weekday() * DAY
    first = today.replace(day=1)
    last_month = (first - DAY).replace(day=1)
    spans_of = {
        ("today", "tonight", "今日", "今朝"): Span(today, today + DAY),
        ("yesterday", "last night", "昨日", "昨夜", "昨晩"): Span(today - DAY, today),
        ("the day before yesterday", "一昨日", "おととい"): Span(today - 2 * DAY, today - DAY),
        ("this week", "今週"): Span(monday, monday + 7 * DAY),
        ("last week", "past week", "previous week", "先週"): Span(monday - 7 * DAY, monday),
        ("this weekend",): Span(monday + 5 * DAY, monday + 7 * DAY),
        ("last weekend", "past weekend", "previous weekend", "先週末"): Span(monday - 2 * DAY, monday),
        ("this month", "今月"): Span(first, _month(first.year, first.month).end),
        ("last month", "past month", "previous month", "先月"): Span(last_month, first),
        ("this year", "今年"): _year(now.year),
        ("last year", "past year", "previous year", "去年", "昨年"): _year(now.year - 1),
        ("一昨年", "おととし"): _year(now.year - 2),
    }
    return next((span for words, span in spans_of.items() if word in words), None)
