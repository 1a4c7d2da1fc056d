#!/usr/bin/python3
"""Reference cases for cron_tz_diff_test: tickd's zones and DST policy vs Python's zoneinfo.

What it computes
  For every zone of the system tz database (zoneinfo.available_timezones(), each file
  read from /usr/share/zoneinfo itself with ZoneInfo.from_file, so no pip `tzdata`
  package can stand in), it writes test cases with the answer tickd must give:
    off   the local time and UTC offset at an instant, as cron::FormatRfc3339 writes it
          ("2040-07-01T08:00:00-04:00"; the offset's seconds are cut, as tickd does);
    next  the first firing strictly after an instant (cron::Schedule::Next);
    prev  the last firing strictly before an instant (cron::Schedule::Prev).
  Where: offsets just before / at / after every transition from 1970 to 2199 (those the
  TZif file lists, to 2037 for most zones, then those of the POSIX rule in its footer,
  which zoneinfo follows: that is where the date library went wrong), at mid-January and
  mid-July of every year, and next/prev at the ends of the horizon (1970 .. 2199).
  Next/prev cases around every transition to 2037 and in 2038, 2040, 2045, 2050, 2060,
  ..., 2190, 2199: they start shortly before / after the transition and use expressions
  built from its wall times: fixed local times at the start, middle, last minute and
  end of the gap or overlap, an hour before, an hour list and a minute list spanning it,
  noon, a weekly one on that day; every-hour ones (0 * * * *, */15 * * * *, * * * * *,
  30 * * * *), @every and `0,30 */1 * * *` (a fixed-time schedule); a 6-field one with
  seconds where the offset has seconds (Africa/Monrovia to 1972). A transition gets this
  full battery, with dst_gap=skip and dst_overlap=both/first too, when it is the first
  of its kind in its zone (old offset, new offset, wall time of day) or lies in 2026,
  2038, 2040, 2045, 2100 or 2199; a light one (default options, a fixed time mid-gap/
  overlap and */15) otherwise.

How: the DST policy is implemented here from the contract (docs/design.md §2), not from
tickd's code. Over a window of instants, the zone is a list of periods [a, b) with one
UTC offset each (zoneinfo's utcoffset, split where TZif lists a transition or where a
weekly sample of the footer rule shows a change, found to the second by bisection). The
firings of a schedule in the window are a set of instants:
  - each instant t whose wall time t + offset(t) matches the expression fires, unless it
    is a second occurrence (an earlier period covered the same wall time) and the
    schedule fires only at first occurrences: fixed-time schedules (hour field
    restricted) under dst_overlap=auto, any schedule under dst_overlap=first;
  - a fixed-time schedule under dst_gap=run whose wall time no instant has (a spring-
    forward gap at transition T) fires at T, once however many of its times the gap
    holds (a set: several collapse into one);
  - @every fires at multiples of its period since the epoch;
  - wall times outside 1970-01-01T00:00 .. 2199-12-31T23:59:59 local never fire.
Next/prev pick the nearest firing in the window, widening it until one is found or the
horizon is passed (then the answer is "none").

Output, tab-separated (zone names and expressions hold no tabs): a group line
  =  zone  expr  dst_gap  dst_overlap        (expr "-" for offset cases)
then its cases, one a line:
  off   at  want_text    FormatRfc3339(at, zone) must be want_text
  next  at  want         Next(at) must be want (seconds since the epoch; "-" = none)
  prev  at  want         Prev(at) likewise
so the reader parses each schedule once. The first line, '#', says how many zones and
transitions were covered and which names were skipped and why.

Before writing anything it checks itself against answers worked out by hand
(HAND_CHECKED) and exits non-zero if one differs.

Usage: /usr/bin/python3 tz_reference.py OUT.tsv   (Debian's python3, not a pyenv one:
zoneinfo then reads /usr/share/zoneinfo, as the engine does; TZPATH is forced to it)
"""

import bisect
import datetime
import os
import struct
import sys
import zoneinfo

TZDIR = "/usr/share/zoneinfo"
# Names in the database that are not zones: `localtime` links to /etc/localtime, the
# machine's own setting (it means a different zone on each host).
NOT_ZONES = {"localtime": "a link to /etc/localtime, the host's setting, not an IANA zone"}

DAY = 86400
MIN_WALL = 0  # 1970-01-01T00:00 local
MAX_WALL = (datetime.date(2200, 1, 1) - datetime.date(1970, 1, 1)).days * DAY  # exclusive
HORIZON_END_UTC = MAX_WALL - 1  # @every: 2199-12-31T23:59:59Z
SAMPLED_YEARS = (2038, 2040, 2045, 2100, 2199)
FULL_BATTERY_YEARS = (2026,) + SAMPLED_YEARS
# Past 2037 every transition gets offset cases; these years get next/prev cases too.
FOOTER_BATTERY_YEARS = set(SAMPLED_YEARS) | set(range(2050, 2200, 10))

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def year_start(y):
    return (datetime.date(y, 1, 1) - datetime.date(1970, 1, 1)).days * DAY


def read_tzif(path):
    """The transition times (v2+ 64-bit block) and the footer rule of a TZif file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"TZif":
        raise ValueError(path + ": not a TZif file")

    def counts(at):
        return struct.unpack(">6l", data[at + 20:at + 44])

    isut, isstd, leap, timecnt, typecnt, charcnt = counts(0)
    if data[4:5] == b"\0":  # version 1: 32-bit times only, no footer
        return list(struct.unpack(">%dl" % timecnt, data[44:44 + 4 * timecnt])), ""
    at = 44 + timecnt * 5 + typecnt * 6 + charcnt + leap * 8 + isstd + isut
    isut, isstd, leap, timecnt, typecnt, charcnt = counts(at)
    at += 44
    times = list(struct.unpack(">%dq" % timecnt, data[at:at + 8 * timecnt]))
    end = at + timecnt * 9 + typecnt * 6 + charcnt + leap * 12 + isstd + isut
    return times, data[end:].strip(b"\n").decode("ascii")


class Zone:
    def __init__(self, name):
        self.name = name
        path = os.path.join(TZDIR, name)
        with open(path, "rb") as f:
            self.zi = zoneinfo.ZoneInfo.from_file(f, key=name)
        self.explicit, footer = read_tzif(path)
        self.last_explicit = self.explicit[-1] if self.explicit else -(2**62)
        self.footer_changes = "," in footer  # the footer rule has DST transitions
        self.cache = {}

    def key(self, t):
        d = datetime.datetime.fromtimestamp(t, self.zi)
        return (int(d.utcoffset().total_seconds()), d.dst(), d.tzname())

    def offset(self, t):
        return int(datetime.datetime.fromtimestamp(t, self.zi).utcoffset().total_seconds())

    def _footer_year(self, y):
        """Transitions in year y found by weekly samples of zoneinfo and bisection (a
        footer rule changes twice a year, never twice within a week)."""
        if y in self.cache:
            return self.cache[y]
        out = []
        lo, hi = year_start(y), year_start(y + 1)
        prev_t, prev_k = lo - 1, self.key(lo - 1)
        for t in list(range(lo, hi, 7 * DAY)) + [hi]:
            k = self.key(t)
            if k != prev_k:
                a, b = prev_t, t  # key(a) == prev_k != key(b)
                while b - a > 1:
                    m = (a + b) // 2
                    if self.key(m) == prev_k:
                        a = m
                    else:
                        b = m
                if b < hi and b >= lo:
                    out.append(b)
                prev_k = k
            prev_t = t
        self.cache[y] = out
        return out

    def transitions(self, lo, hi):
        """Instants in [lo, hi) where offset, DST flag or abbreviation changes."""
        out = [t for t in self.explicit[bisect.bisect_left(self.explicit, lo):
                                        bisect.bisect_left(self.explicit, hi)]]
        if self.footer_changes and hi > self.last_explicit:
            start = max(lo, self.last_explicit + 1)
            y0 = datetime.datetime.fromtimestamp(start, UTC).year
            y1 = datetime.datetime.fromtimestamp(hi - 1, UTC).year
            for y in range(y0, y1 + 1):
                out += [t for t in self._footer_year(y) if start <= t < hi]
        return sorted(set(out))

    def periods(self, lo, hi):
        """[(a, b, offset)] covering [lo, hi), one UTC offset each, merged."""
        cuts = [lo] + self.transitions(lo + 1, hi) + [hi]
        out = []
        for a, b in zip(cuts, cuts[1:]):
            off = self.offset(a)
            if out and out[-1][2] == off:
                out[-1] = (out[-1][0], b, off)
            else:
                out.append((a, b, off))
        return out


def rfc3339(t, off):
    """cron::FormatRfc3339(t, zone) for a zone whose offset at t is `off`."""
    local = EPOCH + datetime.timedelta(seconds=t + off)
    a = abs(off)
    return "%04d-%02d-%02dT%02d:%02d:%02d%s%02d:%02d" % (
        local.year, local.month, local.day, local.hour, local.minute, local.second,
        "-" if off < 0 else "+", a // 3600, a // 60 % 60)


class Spec:
    """A 5- or 6-field cron expression with '*' day fields (or a weekday), or @every."""

    def __init__(self, secs=(0,), mins=(0,), hours=None, dow=None, every=0, hour_field=None):
        self.secs, self.mins = sorted(set(secs)), sorted(set(mins))
        self.hours = None if hours is None else sorted(set(hours))
        self.dow, self.every = dow, every
        # Only an hour field of exactly `*` makes an every-hour schedule: `*/1` (written
        # through hour_field) matches every hour but is a fixed-time schedule.
        self.hour_field = hour_field
        self.every_hour = hours is None or every != 0
        self.text = self._text()

    def _text(self):
        if self.every:
            return "@every %ds" % self.every

        def field(values, n):
            if len(values) == n:
                return "*"
            return ",".join(str(v) for v in values)

        hour = self.hour_field or ("*" if self.hours is None else field(self.hours, 24))
        f = [field(self.mins, 60), hour,
             "*", "*", "*" if self.dow is None else str(self.dow)]
        if self.secs != [0]:
            f.insert(0, field(self.secs, 60))
        return " ".join(f)

    def walls(self, lo, hi):
        """Matching wall times (local seconds since 1970) in [lo, hi)."""
        lo, hi = max(lo, MIN_WALL), min(hi, MAX_WALL)
        hours = range(24) if self.hours is None else self.hours
        for d in range(lo // DAY, (hi - 1) // DAY + 1):
            if self.dow is not None and (d + 4) % 7 != self.dow:
                continue
            base = d * DAY
            for h in hours:
                hb = base + h * 3600
                if hb + 3600 <= lo or hb >= hi:
                    continue
                for m in self.mins:
                    mb = hb + m * 60
                    for s in self.secs:
                        if lo <= mb + s < hi:
                            yield mb + s


def firings(zone, spec, gap, overlap, lo, hi):
    """Sorted firing instants in [lo, hi) under the DST policy (see the header)."""
    if spec.every:
        p = spec.every
        first = max(0, -(-lo // p) * p)
        return list(range(first, min(hi, HORIZON_END_UTC + 1), p))
    both = overlap == "both" or (overlap == "auto" and spec.every_hour)
    gap_run = not spec.every_hour and gap == "run"
    margin = 2 * DAY  # every overlap and gap in the database is shorter than a day + 2h
    ps = zone.periods(lo - margin, hi + margin)
    ranges = [(a + off, b + off) for a, b, off in ps]
    out = set()
    for i, (a, b, off) in enumerate(ps):
        ca, cb = max(a, lo), min(b, hi)
        if ca >= cb:
            continue
        for w in spec.walls(ca + off, cb + off):
            if both or not any(r0 <= w < r1 for r0, r1 in ranges[:i]):
                out.add(w - off)
    if gap_run:
        for i in range(1, len(ps)):
            t, old, new = ps[i][0], ps[i - 1][2], ps[i][2]
            if new <= old or not lo <= t < hi:
                continue
            for w in spec.walls(t + old, t + new):
                if not any(r0 <= w < r1 for r0, r1 in ranges):
                    out.add(t)
                    break
    return sorted(out)


def span(spec):
    if spec.every:
        return spec.every + 60
    if spec.dow is not None:
        return 9 * DAY
    if spec.hours is None:
        return 2 * 3600 if len(spec.mins) < 60 else 600
    return 3 * DAY


def next_firing(zone, spec, gap, overlap, at):
    w = span(spec)
    while True:
        f = firings(zone, spec, gap, overlap, at + 1, at + 1 + w)
        if f:
            return f[0]
        if at + w > MAX_WALL + 2 * DAY:
            return None
        w *= 4


def prev_firing(zone, spec, gap, overlap, before):
    w = span(spec)
    while True:
        f = firings(zone, spec, gap, overlap, before - w, before)
        if f:
            return f[-1]
        if before - w < MIN_WALL - 2 * DAY:
            return None
        w *= 4


class Writer:
    def __init__(self):
        self.groups = {}  # (zone, expr, gap, overlap) -> ["kind\tat\twant"]
        self.count = 0

    def add(self, kind, zone, expr, gap, overlap, at, want):
        rows = self.groups.setdefault((zone, expr, gap, overlap), {})
        if (kind, at) not in rows:  # batteries overlap (e.g. noon is also mid-gap)
            rows[(kind, at)] = "%s\t%d\t%s\n" % (kind, at, want)
            self.count += 1

    def case(self, zone, spec, gap, overlap, kind, at, window=None):
        """A next/prev case; `window` = (lo, firings in [lo, some hi)), if computed."""
        want = None
        if window is not None:
            lo, fired = window
            if kind == "next":
                i = bisect.bisect_right(fired, at)
                if at + 1 >= lo and i < len(fired):  # no firing in (at, lo): the first
                    want = fired[i]
            else:
                i = bisect.bisect_left(fired, at)
                if 0 < i < len(fired):  # the window reaches past `at` on both sides
                    want = fired[i - 1]
        if want is None:
            fn = next_firing if kind == "next" else prev_firing
            want = fn(zone, spec, gap, overlap, at)
        self.add(kind, zone.name, spec.text, gap, overlap, at,
                 "-" if want is None else str(want))

    def offset_case(self, zone, t):
        self.add("off", zone.name, "-", "-", "-", t, rfc3339(t, zone.offset(t)))

    def write(self, path, header):
        with open(path + ".tmp", "w") as f:
            f.write(header)
            for (zone, expr, gap, overlap), rows in self.groups.items():
                f.write("=\t%s\t%s\t%s\t%s\n" % (zone, expr, gap, overlap))
                f.writelines(rows.values())
        os.replace(path + ".tmp", path)


def hm(wall):
    """(second, minute, hour) of a local wall time."""
    s = wall % DAY
    return s % 60, s // 60 % 60, s // 3600


def fixed(wall, dow=None):
    s, m, h = hm(wall)
    return Spec(secs=(s,), mins=(m,), hours=(h,), dow=dow)


EVERY_HOUR = [Spec(mins=(0,)), Spec(mins=range(0, 60, 15)), Spec(mins=range(60)),
              Spec(mins=(30,))]


def battery(out, zone, t, old, new, full):
    """Cases around the transition at t (offset old -> new)."""
    d = abs(new - old)
    low = t + min(old, new)  # first wall time of the gap / overlap
    high = t + max(old, new)  # first wall time after it
    s, m, h = hm(low)
    fixed_specs = [fixed(low + (d // 2) // 60 * 60)]
    every_specs = [EVERY_HOUR[1]]
    if full:
        fixed_specs += [fixed(low), fixed(high), fixed(low - 3600),
                        Spec(secs=(s,), mins=(m,), hours=(h, (h + 1) % 24)),
                        Spec(secs=(s,), mins=sorted({m, (m + 15) % 60, (m + 45) % 60}),
                             hours=(h,)),
                        Spec(hours=(12,)),
                        fixed(low + (d // 2) // 60 * 60, dow=(low // DAY + 4) % 7)]
        if d > 60:
            fixed_specs.append(fixed(high - 60))
        every_specs = EVERY_HOUR + [Spec(every=5400)]
        fixed_specs.append(Spec(mins=(0, 30), hours=range(24), hour_field="*/1"))
    froms = sorted({t - d - 3600, t - 1, t, t + d // 2})
    befores = [t + d + 3600]
    if full:
        froms = sorted(set(froms) | {t - DAY - 1, t - 60, t + d})
        befores = sorted({t + DAY + 1, t + d + 3600, t + 1, t + d // 2})
    combos = [(sp, "run", "auto") for sp in fixed_specs + every_specs]
    if full:
        for sp in fixed_specs[:5]:
            combos += [(sp, "skip", "auto"), (sp, "run", "both"), (sp, "run", "first")]
        combos += [(sp, "run", "first") for sp in every_specs[:3]]
        combos += [(fixed_specs[0], "skip", "both")]
    for sp, gap, overlap in combos:
        w = span(sp)
        # Every-hour schedules fire often: their window stays near the transition (the
        # cases a day away get their own small one).
        lo = (froms[0] if not sp.every_hour else max(froms[0], t - d - 3600)) - w
        window = (lo, firings(zone, sp, gap, overlap, lo, froms[-1] + d + w))
        for at in froms:
            out.case(zone, sp, gap, overlap, "next", at, window)
        for at in befores:
            out.case(zone, sp, gap, overlap, "prev", at, window)


# Answers worked out by hand from docs/design.md §2 (not by any program): the reference
# must give them before its own answers are trusted. (zone, expr, gap, overlap, from,
# firings)
HAND_CHECKED = [
    # New York 2021-03-14, 02:00 EST -> 03:00 EDT: a fixed time in the gap fires at 03:00;
    # several scheduled times in one gap collapse; every-hour ones owe nothing.
    ("America/New_York", Spec(mins=(30,), hours=(2,)), "run", "auto",
     "2021-03-14T00:00:00-05:00", ["2021-03-14T03:00:00-04:00", "2021-03-15T02:30:00-04:00"]),
    ("America/New_York", Spec(mins=(30,), hours=(2,)), "skip", "auto",
     "2021-03-14T00:00:00-05:00", ["2021-03-15T02:30:00-04:00"]),
    ("America/New_York", Spec(hours=(1, 2, 3)), "run", "auto", "2021-03-14T00:00:00-05:00",
     ["2021-03-14T01:00:00-05:00", "2021-03-14T03:00:00-04:00", "2021-03-15T01:00:00-04:00"]),
    ("America/New_York", Spec(mins=(30,)), "run", "auto", "2021-03-14T00:00:00-05:00",
     ["2021-03-14T00:30:00-05:00", "2021-03-14T01:30:00-05:00", "2021-03-14T03:30:00-04:00"]),
    # New York 2021-11-07, 02:00 EDT -> 01:00 EST: a fixed time in the overlap fires once,
    # at its first occurrence (also when the search starts in the second pass); both
    # passes with dst_overlap=both and for every-hour schedules; `first` forces one.
    ("America/New_York", Spec(mins=(30,), hours=(1,)), "run", "auto",
     "2021-11-07T00:00:00-04:00", ["2021-11-07T01:30:00-04:00", "2021-11-08T01:30:00-05:00"]),
    ("America/New_York", Spec(mins=(30,), hours=(1,)), "run", "auto",
     "2021-11-07T01:10:00-05:00", ["2021-11-08T01:30:00-05:00"]),
    ("America/New_York", Spec(mins=(30,), hours=(1,)), "run", "both",
     "2021-11-07T00:00:00-04:00", ["2021-11-07T01:30:00-04:00", "2021-11-07T01:30:00-05:00"]),
    ("America/New_York", Spec(mins=(30,)), "run", "auto", "2021-11-07T00:40:00-04:00",
     ["2021-11-07T01:30:00-04:00", "2021-11-07T01:30:00-05:00", "2021-11-07T02:30:00-05:00"]),
    ("America/New_York", Spec(mins=(0, 20, 40)), "run", "first", "2021-11-07T01:05:00-05:00",
     ["2021-11-07T02:00:00-05:00"]),
    # `*/1` in the hour field is a fixed-time schedule: one pass of the overlap only.
    ("America/New_York", Spec(mins=(30,), hours=range(24), hour_field="*/1"), "run", "auto",
     "2021-11-07T00:40:00-04:00", ["2021-11-07T01:30:00-04:00", "2021-11-07T02:30:00-05:00"]),
    # Past 2037 the footer rule holds: New York is on EDT in July 2040.
    ("America/New_York", Spec(hours=(12,)), "run", "auto", "2040-07-01T00:00:00Z",
     ["2040-07-01T12:00:00-04:00"]),
    # Lord Howe 2021-10-03, 02:00 +10:30 -> 02:30 +11:00 (a 30-minute gap).
    ("Australia/Lord_Howe", Spec(mins=(15,), hours=(2,)), "run", "auto",
     "2021-10-03T00:00:00+10:30", ["2021-10-03T02:30:00+11:00", "2021-10-04T02:15:00+11:00"]),
    # Sao Paulo 2018-11-04: the gap is at midnight, so that day has no 00:00.
    ("America/Sao_Paulo", Spec(hours=(0,)), "run", "auto", "2018-11-03T12:00:00-03:00",
     ["2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"]),
    # Apia skipped 2011-12-30 (-10:00 -> +14:00): that day's noon fires when the gap ends.
    ("Pacific/Apia", Spec(hours=(12,)), "run", "auto", "2011-12-29T12:00:00-10:00",
     ["2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"]),
    # Dublin's negative DST: +01:00 in summer (IST, "standard"), +00:00 in winter (GMT).
    ("Europe/Dublin", Spec(hours=(12,)), "run", "auto", "2021-07-01T00:00:00Z",
     ["2021-07-01T12:00:00+01:00"]),
    ("Europe/Dublin", Spec(hours=(12,)), "run", "auto", "2021-01-01T00:00:00Z",
     ["2021-01-01T12:00:00+00:00"]),
]


def self_check():
    """Fails unless the reference reproduces HAND_CHECKED."""
    for name, spec, gap, overlap, start, want in HAND_CHECKED:
        zone = Zone(name)
        at = int(datetime.datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp())
        got = []
        for _ in want:
            at = next_firing(zone, spec, gap, overlap, at)
            got.append(rfc3339(at, zone.offset(at)))
        if got != want:
            sys.exit("tz_reference.py: self-check %s '%s' %s/%s from %s: want %s, got %s" %
                     (name, spec.text, gap, overlap, start, want, got))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: tz_reference.py OUT.tsv")
    # Only the system database (ctest also sets PYTHONTZPATH): the engine reads it too.
    zoneinfo.reset_tzpath([TZDIR])
    self_check()
    names = sorted(zoneinfo.available_timezones())
    skipped = sorted(n for n in names if n in NOT_ZONES)
    for n in names:  # every name must be a system file (no pip tzdata stand-in)
        if n not in NOT_ZONES and not os.path.isfile(os.path.join(TZDIR, n)):
            sys.exit("tz_reference.py: %s is not a file under %s" % (n, TZDIR))
    zones = [Zone(n) for n in names if n not in NOT_ZONES]
    if len(zones) < 300:
        sys.exit("tz_reference.py: only %d zones under %s" % (len(zones), TZDIR))
    out = Writer()
    stats = {"transitions": 0, "full": 0, "light": 0}
    for zone in zones:
        seen = set()
        for t in zone.transitions(MIN_WALL - DAY, MAX_WALL):
            old, new = zone.offset(t - 1), zone.offset(t)
            for at in (t - 1, t, t + 1):
                out.offset_case(zone, at)
            stats["transitions"] += 1
            kind = (old, new, (t + old) % DAY)
            year = datetime.datetime.fromtimestamp(t, UTC).year
            full = kind not in seen or year in FULL_BATTERY_YEARS
            seen.add(kind)
            if full or year < 2038 or year in FOOTER_BATTERY_YEARS:
                stats["full" if full else "light"] += 1
                battery(out, zone, t, old, new, full)
        # Mid-winter / mid-summer of every year (a next case in the sampled ones), and the
        # ends of the horizon.
        for y in range(1970, 2200):
            for month in (1, 7):
                t = int((datetime.datetime(y, month, 15, 12, tzinfo=UTC) - EPOCH).total_seconds())
                out.offset_case(zone, t)
                if y in FULL_BATTERY_YEARS:
                    out.case(zone, Spec(hours=(12,)), "run", "auto", "next", t)
        for sp in (Spec(hours=(12,)), Spec(hours=(0,)), Spec(mins=range(60))):
            for at in (MIN_WALL - 2 * DAY, MIN_WALL + 3600, MAX_WALL - DAY, MAX_WALL - 1):
                out.case(zone, sp, "run", "auto", "next", at)
            for at in (MIN_WALL + DAY, MIN_WALL + 60, MAX_WALL + DAY, MAX_WALL - 3600):
                out.case(zone, sp, "run", "auto", "prev", at)
    header = ("# zones %d; skipped %s; transitions 1970-2199 %d, with the full battery %d, "
              "the light one %d\n") % (
        len(zones), ", ".join("%s (%s)" % (n, NOT_ZONES[n]) for n in skipped) or "none",
        stats["transitions"], stats["full"], stats["light"])
    out.write(sys.argv[1], header)
    sys.stderr.write(header.lstrip("# "))
    sys.stderr.write("cases: %d\n" % out.count)


if __name__ == "__main__":
    main()
