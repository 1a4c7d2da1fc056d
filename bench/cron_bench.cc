// Cron engine benchmarks over the standard set (bench/data/cron_set.txt):
//   BM_Parse/<label>  Schedule::Parse of the line's expression, dialect and zone.
//   BM_Next/<label>   Schedule::Next as a chain: start at 2026-01-01T00:00:00Z and feed
//                     every result back as the next start, so each iteration measures
//                     one real step of a long-running scheduler (not the same lookup
//                     repeated). A nullopt (horizon) restarts the chain.
// The set is read at run time so that adding a line needs no rebuild; its path is
// baked in (TICKD_BENCH_SET) and may be overridden with the TICKD_BENCH_SET env var.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cron/schedule.h"

namespace {

using tickd::cron::Instant;
using tickd::cron::Schedule;
using tickd::cron::ScheduleOptions;

struct SetLine {
  std::string label;
  ScheduleOptions options;
  std::string expression;
};

const Instant kChainStart = Instant(std::chrono::seconds(1767225600));  // 2026-01-01T00:00:00Z

// Reads label<TAB>dialect<TAB>zone<TAB>expression lines; '#' starts a comment line.
// Exits with a message on a malformed line: a silently shorter set would make the
// figures incomparable.
std::vector<SetLine> ReadSet(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cron_bench: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<SetLine> lines;
  int number = 0;
  for (std::string text; std::getline(in, text);) {
    ++number;
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> cols;
    std::istringstream fields(text);
    for (std::string col; std::getline(fields, col, '\t');) cols.push_back(col);
    const auto dialect = cols.size() == 4 ? tickd::cron::DialectFromName(cols[1]) : std::nullopt;
    if (!dialect) {
      std::fprintf(stderr, "cron_bench: %s:%d: expected label, dialect, zone, expression\n",
                   path.c_str(), number);
      std::exit(2);
    }
    SetLine line;
    line.label = cols[0];
    line.expression = cols[3];
    line.options.dialect = *dialect;
    line.options.timezone = cols[2];
    lines.push_back(std::move(line));
  }
  return lines;
}

void BmParse(benchmark::State& state, const SetLine& line) {
  for (auto _ : state) {
    auto schedule = Schedule::Parse(line.expression, line.options);
    benchmark::DoNotOptimize(schedule);
  }
}

// The chain's mean hides a slow step (a search across years); this times each of
// kTimedSteps chain steps alone, outside the measured loop, and reports the 99th
// percentile and the maximum (which includes the odd preemption: read it as a bound).
void TimeSingleCalls(benchmark::State& state, const Schedule& schedule) {
  constexpr int kTimedSteps = 20000;
  std::vector<double> ns;
  ns.reserve(kTimedSteps);
  Instant at = kChainStart;
  for (int i = 0; i < kTimedSteps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto next = schedule.Next(at);
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    at = next ? *next : kChainStart;
  }
  std::sort(ns.begin(), ns.end());
  state.counters["p99_ns"] = ns[ns.size() * 99 / 100];
  state.counters["max_ns"] = ns.back();
}

void BmNext(benchmark::State& state, const Schedule& schedule) {
  Instant at = kChainStart;
  int64_t restarts = 0;
  for (auto _ : state) {
    const auto next = schedule.Next(at);
    if (next) {
      at = *next;
    } else {
      at = kChainStart;
      ++restarts;
    }
    benchmark::DoNotOptimize(at);
  }
  state.counters["restarts"] = static_cast<double>(restarts);
  TimeSingleCalls(state, schedule);
  // Where the chain got to: shows how much calendar the measured steps covered.
  state.counters["end_year"] = static_cast<double>(static_cast<int>(
      std::chrono::year_month_day(std::chrono::floor<std::chrono::days>(at)).year()));
}

}  // namespace

int main(int argc, char** argv) {
  const char* override_path = std::getenv("TICKD_BENCH_SET");
  const std::string path = override_path != nullptr ? override_path : TICKD_BENCH_SET;
  // Kept alive until the benchmarks have run: each BM_Next refers to its Schedule.
  static std::vector<SetLine> set = ReadSet(path);
  static std::vector<Schedule> schedules;
  schedules.reserve(set.size());
  for (const auto& line : set) {
    auto schedule = Schedule::Parse(line.expression, line.options);
    if (!schedule) {
      std::fprintf(stderr, "cron_bench: %s: %s\n", line.label.c_str(),
                   schedule.error().message.c_str());
      return 2;
    }
    schedules.push_back(std::move(*schedule));
  }
  for (size_t i = 0; i < set.size(); ++i) {
    const Schedule& schedule = schedules[i];
    benchmark::RegisterBenchmark(("BM_Next/" + set[i].label).c_str(),
                                 [&schedule](benchmark::State& s) { BmNext(s, schedule); });
  }
  for (const auto& line : set) {
    benchmark::RegisterBenchmark(("BM_Parse/" + line.label).c_str(),
                                 [&line](benchmark::State& s) { BmParse(s, line); });
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
