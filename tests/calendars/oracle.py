"""An independent oracle for `almanac slots` with holiday calendars.

It reads the same iCalendar files with its own small parser, expands RRULEs with
dateutil, computes business days with numpy's busday_offset (weekmask + holidays) and
instants with zoneinfo, and compares every slot and every skipped day `almanac slots
--json` prints over ten years, for every roll convention and business-day rule.

    python oracle.py ALMANAC_BINARY

Exits 1 listing the first differences. Shares no code with Almanac.
"""
import datetime as dt
import json
import os
import subprocess
import sys
from zoneinfo import ZoneInfo

import numpy as np
from dateutil import rrule

HERE = os.path.dirname(os.path.abspath(__file__))
FROM, TO = dt.date(2026, 1, 1), dt.date(2036, 1, 1)


def read_ics(path):
    """{date: name} of the all-day events of an iCalendar file."""
    text = open(path, encoding="utf-8").read().replace("\r\n", "\n").replace("\n ", "")
    events, current = [], None
    for line in text.split("\n"):
        if line == "BEGIN:VEVENT":
            current = []
        elif line == "END:VEVENT":
            events.append(current)
            current = None
        elif current is not None and ":" in line:
            head, value = line.split(":", 1)
            name, *params = head.split(";")
            current.append((name.upper(), params, value))
    closed, moved, parsed = {}, {}, []
    for props in events:
        get = lambda n: [v for (k, _, v) in props if k == n]
        if get("STATUS") == ["CANCELLED"] or len(get("DTSTART")[0]) != 8:
            continue
        day = lambda v: dt.date(int(v[:4]), int(v[4:6]), int(v[6:8]))
        start = day(get("DTSTART")[0])
        length = (day(get("DTEND")[0]) - start).days if get("DTEND") else 1
        uid = (get("UID") or [None])[0]
        if get("RECURRENCE-ID"):
            moved.setdefault(uid, set()).add(day(get("RECURRENCE-ID")[0]))
        parsed.append((uid, bool(get("RECURRENCE-ID")), get("SUMMARY")[0], start, length, get("RRULE"), get("RDATE"), get("EXDATE"), day))
    for uid, is_override, summary, start, length, rules, rdates, exdates, day in parsed:
        starts = {start}
        for r in rules:
            rule = rrule.rrulestr(r.replace("UNTIL=20351231", "UNTIL=20351231T235959"), dtstart=dt.datetime.combine(start, dt.time()))
            starts |= {d.date() for d in rule}
        starts |= {day(v) for rd in rdates for v in rd.split(",")}
        starts -= {day(v) for ex in exdates for v in ex.split(",")}
        if not is_override:
            starts -= moved.get(uid, set())
        for s in starts:
            for i in range(length):
                closed.setdefault(s + dt.timedelta(days=i), summary)
    return closed


class Calendar:
    def __init__(self, names, weekend):
        self.names = {}
        for name in names:
            for day, summary in read_ics(os.path.join(HERE, name + ".ics")).items():
                self.names.setdefault(day, f"{summary} ({name})")
        days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        self.weekmask = [d not in weekend for d in days]
        self.holidays = np.array(sorted(self.names), dtype="datetime64[D]")

    def is_open(self, day):
        return bool(np.is_busday(np.datetime64(day), weekmask=self.weekmask, holidays=self.holidays))

    def offset(self, day, n, roll):
        out = np.busday_offset(np.datetime64(day), n, roll=roll, weekmask=self.weekmask, holidays=self.holidays)
        return out.astype(dt.date)


def days(a, b):
    d = a
    while d < b:
        yield d
        d += dt.timedelta(days=1)


def period_bounds(of, day):
    if of == "month":
        first = day.replace(day=1)
        months = 1
    elif of == "quarter":
        first = dt.date(day.year, (day.month - 1) // 3 * 3 + 1, 1)
        months = 3
    else:
        first = dt.date(day.year, 1, 1)
        months = 12
    m = first.month - 1 + months
    return first, dt.date(first.year + m // 12, m % 12 + 1, 1) - dt.timedelta(days=1)


def instant(day, hh, mm, zone):
    local = dt.datetime(day.year, day.month, day.day, hh, mm, tzinfo=ZoneInfo(zone), fold=0)
    return local.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def expect_nth(cal, n, of, hh, mm, zone):
    slots, seen = [], set()
    for day in days(FROM, TO):
        first, last = period_bounds(of, day)
        if first in seen:
            continue
        seen.add(first)
        if n > 0:
            chosen = cal.offset(first, n - 1, "forward")
        else:
            chosen = cal.offset(last, n + 1, "backward")
        if first <= chosen <= last:
            slots.append((instant(chosen, hh, mm, zone), str(chosen), str(chosen)))
    return slots, None


ROLLS = {"following": "forward", "preceding": "backward", "modified-following": "modifiedfollowing", "modified-preceding": "modifiedpreceding"}


def expect_roll(cal, roll, dom, hh, mm, zone):
    """Slots of a cron firing on day `dom` of each month (None: every day)."""
    slots, skipped, used = [], [], set()
    nominal = [d for d in days(FROM, TO) if dom is None or d.day == dom]
    own = {d for d in nominal if cal.is_open(d)}
    for d in nominal:
        if cal.is_open(d):
            slots.append((instant(d, hh, mm, zone), str(d), str(d)))
            continue
        to = None if roll == "skip" else cal.offset(d, 0, ROLLS[roll])
        skipped.append((str(d), cal.names.get(d), None if to is None else str(to)))
        if to is not None and to not in own and to not in used:
            used.add(to)
            slots.append((instant(to, hh, mm, zone), str(d), str(to)))
    # `almanac slots` selects slots by their start: a nominal day of the range rolled out
    # of it is not listed (it is the neighbouring range's).
    return sorted(s for s in slots if str(FROM) <= s[2] < str(TO)), skipped


def almanac(binary, cron, zone, calendars, weekend, extra):
    args = [binary, "slots", "--cron", cron, "--zone", zone, "--from", str(FROM), "--to", str(TO), "--json", "--weekend", weekend]
    for c in calendars:
        args += ["--calendar", os.path.join(HERE, c + ".ics")]
    out = subprocess.run(args + extra, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"almanac failed: {' '.join(args + extra)}\n{out.stderr}")
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    slots = [(l["start"], l["business"]["nominal"], l["business"]["date"]) for l in lines if "start" in l]
    skipped = [(l["skipped"], l["reason"], l["rolled_to"]) for l in lines if "skipped" in l]
    return slots, skipped


def compare(name, got, want):
    if got == want:
        return 0
    g, w = set(got), set(want)
    print(f"MISMATCH {name}: {len(got)} from almanac, {len(want)} expected")
    for x in sorted(w - g)[:5]:
        print(f"  missing {x}")
    for x in sorted(g - w)[:5]:
        print(f"  extra   {x}")
    if g == w:
        print("  same set, different order or repeats")
    return 1


def main(binary):
    cases = []
    for calendars, weekend, zone in [(["de-be"], "sat,sun", "Europe/Berlin"), (["us-nyse"], "sat,sun", "America/New_York"), (["il-test"], "fri,sat", "Asia/Jerusalem"), (["de-be", "us-nyse"], "sat,sun", "Europe/Berlin")]:
        cal = Calendar(calendars, weekend.title().split(","))
        label = "+".join(calendars)
        hh, mm = (1, 30) if zone == "Asia/Jerusalem" else (6, 0)
        daily = f"{mm} {hh} * * *"
        for n, of in [(1, "month"), (3, "month"), (-1, "month"), (-2, "month"), (1, "quarter"), (-1, "year")]:
            cases.append((f"{label} business_day={n} of {of}", calendars, weekend, zone, daily, ["--business-day", str(n), "--period", of], expect_nth(cal, n, of, hh, mm, zone)))
        for roll in ["following", "modified-following", "preceding", "modified-preceding", "skip"]:
            for dom in [1, 25, 31]:
                cron = f"{mm} {hh} {dom} * *"
                cases.append((f"{label} day {dom} roll={roll}", calendars, weekend, zone, cron, ["--roll", roll], expect_roll(cal, roll, dom, hh, mm, zone)))
        cases.append((f"{label} every business day", calendars, weekend, zone, daily, [], expect_roll(cal, "skip", None, hh, mm, zone)))
    failures, slots = 0, 0
    for name, calendars, weekend, zone, cron, extra, (want_slots, want_skipped) in cases:
        got_slots, got_skipped = almanac(binary, cron, zone, calendars, weekend, extra)
        failures += compare(name + " (slots)", got_slots, want_slots)
        slots += len(want_slots)
        if want_skipped is not None:
            # Almanac's reason names the holiday and its calendar, or says weekend.
            got = [(d, (r.split("holiday: ", 1)[1].split(";")[0] if r.startswith("holiday: ") else None), t) for (d, r, t) in got_skipped]
            failures += compare(name + " (skipped days)", got, want_skipped)
    print(f"{len(cases)} cases, {slots} slots over {FROM}..{TO}: {failures} mismatch(es)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
