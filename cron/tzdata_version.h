// Which release of the IANA time-zone database ("2025b") the engine computes with.
//
// A tick's instant is a function of the schedule, its zone and the tz database
// (DESIGN §1): two replicas with different releases can compute different instants
// for the same job (a country that changed its rules), and then race for different
// ticks. Replicas therefore send this version with every claim, next to the config
// hash, and compare it (app/tzdata.h).
//
// The only I/O in cron/: a small read of the database's own version stamp, once at
// start (and again on reload, to notice an update), never while computing instants.
//
// TZDIR is honoured as Abseil's cctz, which loads the zones (cron/zone.h), honours it:
// the version reported is the version of the files the engine reads.
#pragma once

#include <string>
#include <string_view>

namespace tickd::cron {

inline constexpr std::string_view kDefaultTzdataDir = "/usr/share/zoneinfo";
// What TzdataVersion() answers when the database carries no readable version.
inline constexpr std::string_view kUnknownTzdataVersion = "unknown";

// The folder of the tz database: $TZDIR when it is set and not empty, else
// /usr/share/zoneinfo (Abseil's cctz and glibc look there the same way).
std::string TzdataDir();

// The version of the database in `dir`: the `# version 2025b` first line of
// `dir`/tzdata.zi, else the first word of `dir`/+VERSION, else "unknown" (a missing
// or unreadable file, or a version that is not 1–32 of [A-Za-z0-9._+-]: it travels
// inside claim records and log lines, so nothing else is let through).
std::string TzdataVersionIn(const std::string& dir);

// TzdataVersionIn(TzdataDir()), read now.
std::string TzdataVersion();

// TzdataVersion() as read at the first call, kept for the life of the process: the
// version the engine computes with. The engine reads each zone's rules once and keeps
// them (date's tzdb and cctz both cache them for good), so a database updated on disk
// is used only after a restart, and reporting the new version before would hide a
// real difference between replicas. The daemon calls it first at start.
// Thread-safe.
const std::string& TzdataVersionInUse();

}  // namespace tickd::cron
