// Differential test of the engine's time zones and DST policy against Python's zoneinfo:
// tz_reference.py (run by the ctest fixture cron_tz_reference) writes cases with the
// answers it computed independently, from the contract and zoneinfo, for every zone of
// the system tz database from 1970 to 2199; this binary asks the engine the same
// questions and counts every disagreement. See tz_reference.py for what is covered.
//
// The cases file comes from $TICKD_TZ_CASES (set by ctest), else the path CMake baked in.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cron/schedule.h"

namespace tickd::cron {
namespace {

constexpr int kShown = 40;  // disagreements printed in full; all are counted

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

std::string Utc(Instant t) { return FormatRfc3339(t, nullptr); }

struct Group {
  std::string zone, expr, gap, overlap;
  std::string Describe() const {
    return zone + " '" + expr + "' dst_gap=" + gap + " dst_overlap=" + overlap;
  }
};

// 2038-01-01T00:00:00Z: from here on the zones' rules come from the TZif footers.
constexpr std::int64_t k2038 = 2145916800;

class Checker {
 public:
  // `kind` is "off", "next" or "prev".
  void Report(Instant at, const std::string& kind, const std::string& what) {
    if (at.time_since_epoch().count() < k2038) ++before_2038_;
    ++by_kind_[kind];
    if (++disagreements_ <= kShown) shown_ << what << "\n";
  }
  int disagreements() const { return disagreements_; }
  std::string Summary() const {
    std::ostringstream out;
    out << disagreements_ << " disagreements (";
    for (const auto& [kind, n] : by_kind_) out << kind << " " << n << ", ";
    out << before_2038_ << " at instants before 2038); the first " << kShown << ":\n"
        << shown_.str();
    return out.str();
  }

 private:
  int disagreements_ = 0;
  int before_2038_ = 0;
  std::map<std::string, int> by_kind_;
  std::ostringstream shown_;
};

// The engine's answer as text: the instant in the zone and in UTC, or "none".
std::string Text(const std::optional<Instant>& t, const Schedule& s) {
  if (!t) return "none";
  return FormatRfc3339(*t, s.zone()) + " (" + Utc(*t) + ")";
}

}  // namespace

TEST_CASE("every zone and DST case agrees with Python's zoneinfo", "[cron][tz]") {
  const char* env = std::getenv("TICKD_TZ_CASES");
  const std::string path = env != nullptr ? env : TICKD_TZ_CASES;
  std::ifstream in(path);
  INFO("cases file " << path << " (written by tests/cron/tz_reference.py)");
  REQUIRE(in.good());

  std::string header;
  REQUIRE(std::getline(in, header));
  REQUIRE(header.rfind("# ", 0) == 0);
  WARN("reference: " << header.substr(2));

  Checker check;
  Group group;
  std::optional<Schedule> schedule;
  decltype(FindZone("")) zone = nullptr;
  std::string parse_error;
  long cases = 0, offsets = 0, nexts = 0, prevs = 0, groups = 0;
  std::string line;
  long line_no = 1;
  // A malformed line stops the test: the file and this reader disagree on the format.
  auto malformed = [&] { FAIL(path << ":" << line_no << ": malformed line: " << line); };
  while (std::getline(in, line)) {
    ++line_no;
    const auto f = Split(line);
    if (f.size() < 3) malformed();
    if (f[0] == "=") {
      if (f.size() != 5) malformed();
      group = {f[1], f[2], f[3], f[4]};
      ++groups;
      zone = FindZone(group.zone);
      schedule.reset();
      parse_error.clear();
      if (group.expr != "-") {
        ScheduleOptions o;
        o.timezone = group.zone;
        const auto gap = DstGapFromName(group.gap);
        const auto overlap = DstOverlapFromName(group.overlap);
        if (!gap || !overlap) malformed();
        o.dst_gap = *gap;
        o.dst_overlap = *overlap;
        auto s = Schedule::Parse(group.expr, o);
        if (s) {
          schedule = std::move(*s);
        } else {
          parse_error = s.error().message;
        }
      }
      continue;
    }
    ++cases;
    const Instant at{std::chrono::seconds(std::stoll(f[1]))};
    if (f[0] == "off") {
      ++offsets;
      if (zone == nullptr) {
        check.Report(at, f[0], group.zone + ": FindZone knows no such zone");
        continue;
      }
      const std::string got = FormatRfc3339(at, zone);
      if (got != f[2]) {
        check.Report(at, f[0], group.zone + " at " + Utc(at) + ": want " + f[2] + ", got " + got);
      }
      continue;
    }
    if (f[0] != "next" && f[0] != "prev") malformed();
    (f[0] == "next" ? nexts : prevs)++;
    if (!schedule) {
      check.Report(at, f[0], group.Describe() + ": does not parse: " + parse_error);
      continue;
    }
    std::optional<Instant> want;
    if (f[2] != "-") want = Instant(std::chrono::seconds(std::stoll(f[2])));
    const auto got = f[0] == "next" ? schedule->Next(at) : schedule->Prev(at);
    if (got != want) {
      // `want` in the zone as the reference computed it is not known here (the engine's
      // offset may be the thing that is wrong), so it is shown in UTC.
      check.Report(at, f[0],
                   group.Describe() + ": " + f[0] + "(" + Utc(at) + ") want " +
                       (want ? Utc(*want) : "none") + ", got " + Text(got, *schedule));
    }
  }
  INFO(check.Summary());
  INFO(groups << " schedules/zones, " << cases << " cases: " << offsets << " offsets, " << nexts
              << " next, " << prevs << " prev");
  CHECK(cases > 100000);
  CHECK(check.disagreements() == 0);
}

}  // namespace tickd::cron
