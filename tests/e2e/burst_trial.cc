// The busy-instant trial (issue #25): N jobs all due at the same instants, R `tickd run`
// replicas on one lock store, an in-process plugin (tests/e2e/burst_stamp_plugin.c)
// that notes when each run started. Reports, for the job-ticks due in the window: how
// many ran exactly once, twice or more, never; run start − T (p50/p99/max); when the
// winning claims were answered relative to T and how long after that the runs began;
// every replica's claim outcomes; the load average. bench/burst_trial.sh builds and
// runs it (the figures in bench/README.md, "The busy instant"); ctest runs small
// versions (tests/e2e/CMakeLists.txt) that judge exactly-once and no run before T, never
// how late.
//
// The window. Every replica is started, then the trial waits until each has logged its
// `start` line (its job file loaded, its store open). The window begins --warmup
// seconds later and lasts --seconds; the job-ticks judged are those whose instant T lies
// in it (start <= T < end), every one of the N jobs at each such instant, as
// `tickd next` lists them. The replicas keep running --settle seconds past the end (so
// a late run of the last instant still counts), then get SIGTERM. Runs of instants
// outside the window are counted apart and judged not at all.
//
// A wrong clock (--ahead-ms): the last replica runs under libfaketime that far ahead,
// less than lock.clock_tolerance, so it claims first and wins; the plugin notes the
// host's clock (by system call), and no run may start before its T by it (design.md §1
// rule 15: at T by the store's clock, which on one host is the host's). Early starts
// are judged with or without it: a replica whose clock is right never starts early.
//
// Exit status: 0 when every judged job-tick ran exactly once and no run started before
// its T (and, with --max-p99-ms, the p99 of run start − T is within it), 1 when not, 2
// for bad arguments or a trial that could not run (the store or a replica did not
// start).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/harness.h"

namespace tickd::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Options {
  std::string backend;
  int jobs = 5000;
  int replicas = 3;
  int seconds = 60;
  std::string schedule = "*/10 * * * * *";
  int warmup_s = 10;
  int settle_s = 10;
  std::string out;
  std::vector<std::string> lock_lines;  // extra `lock:` keys, e.g. "claim_lead: 1s"
  double max_p99_ms = -1;               // < 0: no time judged
  int ahead_ms = 0;                     // the last replica's clock this far ahead (libfaketime)
};

constexpr const char* kUsage =
    "usage: burst_trial --backend etcd|zookeeper|redis|postgres|sqlite|none [--jobs N]\n"
    "                   [--replicas R] [--seconds S] [--schedule EXPR] [--warmup S]\n"
    "                   [--settle S] [--out DIR] [--lock 'key: value']... [--max-p99-ms MS]\n"
    "                   [--ahead-ms MS]\n"
    "defaults: --jobs 5000 --replicas 3 --seconds 60 --schedule '*/10 * * * * *' --warmup 10\n"
    "          --settle 10; --out: a new /tmp/tickd-burst-XXXXXX, removed when the trial passes\n";

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "burst_trial: " << why << "\n" << kUsage;
  std::exit(2);
}

int PositiveInt(const std::string& flag, const std::string& text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > 1'000'000) {
    Usage(flag + ": " + text + " is not a whole number from " + std::to_string(min));
  }
  return static_cast<int>(v);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) Usage(flag + ": needs a value");
    const std::string value = argv[++i];
    if (flag == "--backend") {
      o.backend = value;
    } else if (flag == "--jobs") {
      o.jobs = PositiveInt(flag, value, 1);
    } else if (flag == "--replicas") {
      o.replicas = PositiveInt(flag, value, 1);
    } else if (flag == "--seconds") {
      o.seconds = PositiveInt(flag, value, 1);
    } else if (flag == "--schedule") {
      o.schedule = value;
    } else if (flag == "--warmup") {
      o.warmup_s = PositiveInt(flag, value, 0);
    } else if (flag == "--settle") {
      o.settle_s = PositiveInt(flag, value, 0);
    } else if (flag == "--out") {
      o.out = value;
    } else if (flag == "--lock") {
      o.lock_lines.push_back(value);
    } else if (flag == "--max-p99-ms") {
      o.max_p99_ms = PositiveInt(flag, value, 0);
    } else if (flag == "--ahead-ms") {
      o.ahead_ms = PositiveInt(flag, value, 0);
    } else {
      Usage("unknown option " + flag);
    }
  }
  if (o.backend.empty()) Usage("--backend is required");
  return o;
}

std::unique_ptr<BackendFixture> MakeFixture(const std::string& backend) {
  if (backend == "sqlite") return MakeSqliteFixture();
  // No store: every replica runs every tick (the check that the trial can fail).
  if (backend == "none") {
    class NoStore final : public BackendFixture {
     public:
      std::string name() const override { return "none"; }
      std::string LockYaml(const fs::path&) const override { return "  backend: none\n"; }
    };
    return std::make_unique<NoStore>();
  }
  if (backend == "redis") return MakeRedisFixture();
#ifdef TICKD_BURST_HAVE_ETCD
  if (backend == "etcd") return MakeEtcdFixture();
#endif
#ifdef TICKD_BURST_HAVE_ZOOKEEPER
  if (backend == "zookeeper") return MakeZookeeperFixture();
#endif
#ifdef TICKD_BURST_HAVE_POSTGRES
  if (backend == "postgres") return MakePostgresFixture();
#endif
  Usage("--backend " + backend + ": not one this build has");
}

long long NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "2026-11-28T01:50:09.803Z" or "2026-11-28T01:50:10Z" → unix ms; -1 when not one.
long long UnixMs(const std::string& text) {
  std::tm tm{};
  int ms = 0;
  char frac[8] = {};
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
    return -1;
  }
  if (text.size() > 20 && text[19] == '.' && std::sscanf(text.c_str() + 20, "%3[0-9]", frac) == 1) {
    ms = std::atoi(frac);
    for (std::size_t n = std::char_traits<char>::length(frac); n < 3; ++n) ms *= 10;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<long long>(timegm(&tm)) * 1000 + ms;
}

std::string LoadAvg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double LoadAvg1() {
  std::ifstream in("/proc/loadavg");
  double v = 0;
  in >> v;
  return v;
}

// p-th quantile by nearest rank (p in (0, 1]); NaN for none.
double Quantile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

std::string Stats(const std::vector<double>& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "p50=%.1f p99=%.1f max=%.1f (n=%zu)", Quantile(v, 0.5),
                Quantile(v, 0.99), Quantile(v, 1.0), v.size());
  return buf;
}

// The fixture's lock section with the daemon's own op_timeout (the fixtures shorten it
// to 1 s for fault tests; the trial measures the defaults) and the extra lines.
std::string LockSection(const BackendFixture& fixture, const fs::path& dir,
                        const std::vector<std::string>& extra) {
  std::istringstream in(fixture.LockYaml(dir));
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("op_timeout:") == std::string::npos) out += line + "\n";
  }
  for (const std::string& line : extra) out += "  " + line + "\n";
  return out;
}

std::string JobName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "burst-%05d", i);
  return buf;
}

struct Run {
  std::string node;
  double start_ms = 0;  // unix ms, with fractions
};

struct ReplicaCounts {
  std::map<std::string, long long> outcomes;  // tick lines of judged ticks, by outcome
  std::map<std::string, long long> warnings;  // warn/error lines by event (any tick)
  long long missed_summary = 0;               // `missed count=` totals
  std::vector<double> answered_ms;            // tick line − T, judged ticks, any outcome
  std::set<std::pair<std::string, long long>> decided;  // judged (job, tick) with a tick line
  long long window_answers = 0;  // tick lines (any tick) written inside the window
};

int Main(int argc, char** argv) {
  const Options opt = ParseArgs(argc, argv);
  fs::path dir = opt.out;
  const bool temp_dir = dir.empty();
  if (temp_dir) {
    std::string tmpl = (fs::temp_directory_path() / "tickd-burst-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
  }
  fs::create_directories(dir);
  const fs::path runs_file = dir / "runs.txt";
  fs::remove(runs_file);
  for (int r = 0; r < opt.replicas; ++r)
    fs::remove(dir / ("node-" + std::to_string(r + 1) + ".log"));

  std::ostringstream report;
  auto say = [&report](const std::string& line) {
    std::cout << line << std::endl;
    report << line << "\n";
  };
  say("burst: backend=" + opt.backend + " jobs=" + std::to_string(opt.jobs) +
      " replicas=" + std::to_string(opt.replicas) + " seconds=" + std::to_string(opt.seconds) +
      " schedule=\"" + opt.schedule + "\" folder=" + dir.string() +
      (opt.ahead_ms > 0 ? " ahead_ms=" + std::to_string(opt.ahead_ms) + " (node-" +
                              std::to_string(opt.replicas) + ")"
                        : std::string()));
  say("load at start: " + LoadAvg() + " (" + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) +
      " cores)");

  std::unique_ptr<BackendFixture> fixture = MakeFixture(opt.backend);
  // Room for every tick of an instant on one replica (design §1 "Room for runs").
  const int room = std::min(100'000, std::max(64, 2 * opt.jobs));
  const fs::path job_file = dir / "jobs.yaml";
  {
    std::ofstream f(job_file);
    f << "version: 1\nlock:\n"
      << LockSection(*fixture, dir, opt.lock_lines) << "max_concurrent_runs: " << room
      << "\njobs:\n";
    for (int i = 1; i <= opt.jobs; ++i) {
      f << "  - {name: " << JobName(i) << ", schedule: \"" << opt.schedule
        << "\", plugin: {path: " << BURST_STAMP_PLUGIN
        << ", isolation: none, config: {out: " << runs_file.string() << "}}}\n";
    }
  }

  std::vector<std::unique_ptr<Replica>> replicas;
  for (int r = 0; r < opt.replicas; ++r) {
    const std::string node = "node-" + std::to_string(r + 1);
    std::vector<std::string> env = fixture->Env();
    if (opt.ahead_ms > 0 && r == opt.replicas - 1) {
      for (std::string& e : FakeTimeEnv(opt.ahead_ms / 1000.0)) env.push_back(std::move(e));
    }
    replicas.push_back(std::make_unique<Replica>(node, job_file, dir / (node + ".log"), env));
    replicas.back()->Start();
  }
  // Every replica has logged `start` (its file loaded, its store open), or one failed.
  const bool started = Cluster::WaitUntil(
      [&] {
        for (auto& replica : replicas) {
          if (replica->LogText().find(" info start ") == std::string::npos) return false;
        }
        return true;
      },
      milliseconds(180'000));
  for (auto& replica : replicas) {
    if (!started || !replica->running() || replica->Wait(milliseconds(0))) {
      std::cerr << "burst_trial: " << replica->node() << " did not start; its log:\n"
                << replica->LogText();
      return 2;
    }
  }
  const long long ready_ms = NowMs();
  const long long window_start_ms = ready_ms + opt.warmup_s * 1000LL;
  const long long window_end_ms = window_start_ms + opt.seconds * 1000LL;
  double load_max = LoadAvg1();
  while (NowMs() < window_end_ms + opt.settle_s * 1000LL) {
    std::this_thread::sleep_for(milliseconds(500));
    load_max = std::max(load_max, LoadAvg1());
  }
  const std::string load_end = LoadAvg();
  const long long stop_ms = NowMs();
  for (auto& replica : replicas) replica->Signal(SIGTERM);
  for (auto& replica : replicas) {
    if (auto status = replica->Wait(milliseconds(120'000)); !status) {
      say("replica " + replica->node() + ": still running 120 s after SIGTERM: SIGKILL");
    } else if (*status != 0) {
      say("replica " + replica->node() + ": exit status " + std::to_string(*status));
    }
  }
  const double stop_took_s = static_cast<double>(NowMs() - stop_ms) / 1000;

  // The instants in the window, as the daemon computes them.
  std::vector<long long> instants;  // unix s
  {
    const long long from_s = (window_start_ms + 999) / 1000 - 1;  // next is strictly after
    auto [status, text] =
        RunCommand({TICKD_BINARY, "next", "-c", job_file.string(), "--job", JobName(1), "--from",
                    TickText(from_s), "-n", std::to_string(opt.seconds + 2)});
    if (status != 0) {
      std::cerr << "burst_trial: tickd next failed:\n" << text;
      return 2;
    }
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      const std::size_t sep = line.find(" tick=");
      const long long ms = UnixMs(sep == std::string::npos ? line : line.substr(sep + 6));
      if (ms >= window_start_ms && ms < window_end_ms) instants.push_back(ms / 1000);
    }
  }
  const std::set<long long> judged(instants.begin(), instants.end());
  say("window: " + TickText(window_start_ms / 1000) + " .. " + TickText(window_end_ms / 1000) +
      " (every replica started + " + std::to_string(opt.warmup_s) + " s; " +
      std::to_string(opt.seconds) + " s): " + std::to_string(instants.size()) +
      " instants, job-ticks due " + std::to_string(instants.size() * opt.jobs));

  // The runs, by (job, tick).
  std::map<std::pair<std::string, long long>, std::vector<Run>> runs;
  long long runs_outside = 0;
  for (const std::string& line : ReadLines(runs_file)) {
    std::istringstream in(line);
    std::string job, node;
    long long tick = 0, start_us = 0;
    if (!(in >> job >> node >> tick >> start_us)) continue;
    if (!judged.count(tick)) {
      ++runs_outside;
      continue;
    }
    runs[{job, tick}].push_back({node, static_cast<double>(start_us) / 1000});
  }

  // The replicas' logs: claim outcomes of judged ticks, and when the winners heard.
  std::map<std::pair<std::string, long long>, std::map<std::string, double>> won_at;
  std::map<std::string, ReplicaCounts> counts;
  for (auto& replica : replicas) {
    ReplicaCounts& c = counts[replica->node()];
    for (const LogLine& l : replica->Lines()) {
      if (l.level == "warn" || l.level == "error") ++c.warnings[l.event];
      if (l.event == "missed") c.missed_summary += std::atoll(l.Get("count").c_str());
      if (l.event != "tick") continue;
      const long long at_ms = UnixMs(l.ts);
      c.window_answers += at_ms >= window_start_ms && at_ms < window_end_ms ? 1 : 0;
      const long long tick = UnixMs(l.Get("tick")) / 1000;
      if (!judged.count(tick)) continue;
      std::string outcome = l.Get("outcome");
      if (outcome == "skipped") outcome += "(" + l.Get("reason") + ")";
      ++c.outcomes[outcome];
      c.answered_ms.push_back(static_cast<double>(UnixMs(l.ts) - tick * 1000));
      c.decided.insert({l.Get("job"), tick});
      if (outcome == "won") {
        won_at[{l.Get("job"), tick}][replica->node()] = static_cast<double>(UnixMs(l.ts));
      }
    }
  }

  long long once = 0, twice = 0, never = 0, early = 0;
  std::vector<double> late_ms, claim_ms, after_claim_ms;
  struct PerInstant {
    long long once = 0, more = 0, never = 0;
    std::vector<double> late_ms, claim_ms;
  };
  std::map<long long, PerInstant> per_instant;
  std::vector<std::string> examples;
  for (long long t : instants) {
    PerInstant& pi = per_instant[t];
    for (int i = 1; i <= opt.jobs; ++i) {
      const std::string job = JobName(i);
      const auto w = won_at.find({job, t});
      if (w != won_at.end()) {
        for (const auto& [node, at] : w->second) {
          claim_ms.push_back(at - static_cast<double>(t) * 1000);
          pi.claim_ms.push_back(claim_ms.back());
        }
      }
      const auto it = runs.find({job, t});
      if (it == runs.end()) {
        ++never;
        ++pi.never;
        if (examples.size() < 5) examples.push_back("never: " + job + " " + TickText(t));
        continue;
      }
      const std::vector<Run>& rs = it->second;
      if (rs.size() == 1) {
        ++once;
        ++pi.once;
      } else {
        ++twice;
        ++pi.more;
        if (examples.size() < 5) {
          std::string nodes;
          for (const Run& r : rs) nodes += " " + r.node;
          examples.push_back("twice: " + job + " " + TickText(t) + " on" + nodes);
        }
      }
      for (const Run& r : rs) {
        // 2 ms: the replica compares its clock with the store's in whole ms, twice
        // (design.md §1 rule 15), which can make a start up to 2 ms early.
        if (r.start_ms < static_cast<double>(t) * 1000 - 2) {
          ++early;
          if (examples.size() < 5) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "early: %s %s on %s, %.1f ms before T", job.c_str(),
                          TickText(t).c_str(), r.node.c_str(),
                          static_cast<double>(t) * 1000 - r.start_ms);
            examples.push_back(buf);
          }
        }
      }
      const Run& first = *std::min_element(
          rs.begin(), rs.end(), [](const Run& a, const Run& b) { return a.start_ms < b.start_ms; });
      late_ms.push_back(first.start_ms - static_cast<double>(t) * 1000);
      pi.late_ms.push_back(late_ms.back());
      if (w != won_at.end()) {
        if (auto at = w->second.find(first.node); at != w->second.end()) {
          after_claim_ms.push_back(first.start_ms -
                                   std::max(at->second, static_cast<double>(t) * 1000));
        }
      }
    }
  }

  say("ran exactly once: " + std::to_string(once) + "  twice or more: " + std::to_string(twice) +
      "  never: " + std::to_string(never) + "  started before T: " + std::to_string(early) +
      "  (runs of instants outside the window: " + std::to_string(runs_outside) + ")");
  for (const std::string& e : examples) say("  e.g. " + e);
  say("run start - T (ms): " + Stats(late_ms));
  say("won claim answered - T (ms): " + Stats(claim_ms));
  say("run start - max(T, claim answered) (ms): " + Stats(after_claim_ms));
  say("per instant (T: once/twice+/never; start - T p50/p99/max ms; claim answered - T p99 ms):");
  for (const auto& [t, pi] : per_instant) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "  %s: %lld/%lld/%lld; %.1f/%.1f/%.1f; %.1f", TickText(t).c_str(),
                  pi.once, pi.more, pi.never, Quantile(pi.late_ms, 0.5), Quantile(pi.late_ms, 0.99),
                  Quantile(pi.late_ms, 1.0), Quantile(pi.claim_ms, 0.99));
    say(buf);
  }
  if (instants.size() > 1) {
    const long long span_s = instants.back() - instants.front();
    say("claims each replica must answer a second to keep up: " +
        std::to_string(opt.jobs * static_cast<long long>(instants.size() - 1) / span_s) +
        " (every replica claims every job-tick)");
  }
  for (const auto& [node, c] : counts) {
    std::string line = "replica " + node + ": claims of judged ticks:";
    for (const auto& [outcome, n] : c.outcomes) line += " " + outcome + "=" + std::to_string(n);
    const long long due = static_cast<long long>(instants.size()) * opt.jobs;
    line += " undecided=" + std::to_string(due - static_cast<long long>(c.decided.size())) +
            "; answered - T (ms): " + Stats(c.answered_ms) +
            "; claims answered a second in the window: " +
            std::to_string(c.window_answers / opt.seconds);
    line +=
        "; `missed` summaries count=" + std::to_string(c.missed_summary) + "; warn/error lines:";
    if (c.warnings.empty()) line += " none";
    for (const auto& [event, n] : c.warnings) line += " " + event + "=" + std::to_string(n);
    say(line);
  }
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "load at end: %s (highest 1-min figure seen: %.2f); stop took %.1f s",
                load_end.c_str(), load_max, stop_took_s);
  say(buf);

  const bool exactly_once = !instants.empty() && twice == 0 && never == 0;
  const bool none_early = early == 0;
  const double p99 = Quantile(late_ms, 0.99);
  const bool in_time = opt.max_p99_ms < 0 || (!late_ms.empty() && p99 <= opt.max_p99_ms);
  say(std::string("verdict: exactly once ") + (exactly_once ? "yes" : "NO") +
      "; none before T " + (none_early ? "yes" : "NO") +
      (opt.max_p99_ms < 0
           ? std::string()
           : std::string("; p99 <= ") + std::to_string(static_cast<int>(opt.max_p99_ms)) + " ms " +
                 (in_time ? "yes" : "NO")));
  std::ofstream(dir / "report.txt") << report.str();
  const bool pass = exactly_once && none_early && in_time;
  if (pass && temp_dir) {
    replicas.clear();
    fs::remove_all(dir);
  }
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace tickd::e2e

int main(int argc, char** argv) {
  try {
    return tickd::e2e::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "burst_trial: " << e.what() << "\n";
    return 2;
  }
}
