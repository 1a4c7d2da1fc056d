// nemesis: runs the fault matrix (or a seeded random schedule of faults) against tickd
// replicas on one or more backends, checks every cell with the checker, prints the
// table backend × fault and writes the JSON of issue #14. docs/reliability.md.
//
//   nemesis --backend sqlite|redis|redis-sentinel|etcd|postgres|zookeeper|all[,…]
//           [--faults a,b,…]
//           [--cells backend:fault,…]
//           [--seed S --minutes M] [--json FILE] [--replicas N] [--lease-ms N]
//           [--warmup-s S] [--settle-s S] [--keep] [--fail-on-skip-if-root]
//           [--plant-duplicate] [--list] [--dry-run]
//
// Exit status: 0 every cell that ran is clean; 1 a violation (duplicates,
// stale_accepted, unexplained misses, late writes, early starts: the checker's
// verdict) or a cell that should
// have run and could not; 2 bad arguments.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/nemesis/driver/catalog.h"
#include "tests/nemesis/driver/cell.h"

#ifndef NEMESIS_RESOURCE_BINARY
#define NEMESIS_RESOURCE_BINARY ""
#endif
#ifndef NEMESIS_WRITE_BINARY
#define NEMESIS_WRITE_BINARY ""
#endif

namespace tickd::nemesis {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kBackends = {"sqlite", "redis",    "redis-sentinel",
                                            "etcd",   "postgres", "zookeeper"};

struct Args {
  std::vector<std::string> backends;
  std::vector<std::string> faults;  // empty: every kind
  std::vector<std::string> cells;   // "backend:fault" pairs (then only these)
  bool random = false;
  std::uint64_t seed = 0;
  double minutes = 0;
  std::string json;
  bool fail_on_skip_if_root = false;
  bool list = false;
  bool dry_run = false;  // print the cells, run none
  CellOptions cell;
};

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "nemesis: " << why << "\n"
            << "usage: nemesis --backend B|all[,B…] [--faults F,…] [--cells B:F,…]\n"
            << "               [--seed S --minutes M]\n"
            << "               [--json FILE] [--replicas N] [--lease-ms N] [--warmup-s S]\n"
            << "               [--settle-s S] [--keep] [--fail-on-skip-if-root]\n"
            << "               [--plant-duplicate] [--list] [--dry-run]\n";
  std::exit(2);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double Number(const std::string& flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (...) {
  }
  Usage(flag + ": not a non-negative number: '" + text + "'");
}

// The folder of this program: nemesis_resource and nemesis_write are built beside it
// unless the compile-time paths say otherwise.
std::string Beside(const char* argv0, const std::string& name) {
  std::error_code ec;
  fs::path self = fs::canonical("/proc/self/exe", ec);
  if (ec) self = argv0;
  return (self.parent_path() / name).string();
}

Args Parse(int argc, char** argv) {
  Args a;
  a.cell.bin.resource = std::string(NEMESIS_RESOURCE_BINARY).empty()
                            ? Beside(argv[0], "nemesis_resource")
                            : NEMESIS_RESOURCE_BINARY;
  a.cell.bin.write = std::string(NEMESIS_WRITE_BINARY).empty() ? Beside(argv[0], "nemesis_write")
                                                               : NEMESIS_WRITE_BINARY;
  bool minutes_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--backend") {
      for (const std::string& b : Split(value())) {
        if (b == "all") {
          a.backends.insert(a.backends.end(), kBackends.begin(), kBackends.end());
        } else if (std::find(kBackends.begin(), kBackends.end(), b) != kBackends.end()) {
          a.backends.push_back(b);
        } else {
          Usage("--backend: unknown backend '" + b + "'");
        }
      }
    } else if (flag == "--faults") {
      for (const std::string& f : Split(value())) {
        if (FindFault(f) == nullptr) Usage("--faults: unknown fault kind '" + f + "' (see --list)");
        a.faults.push_back(f);
      }
    } else if (flag == "--cells") {
      for (const std::string& c : Split(value())) {
        const std::size_t colon = c.find(':');
        const std::string b = c.substr(0, colon);
        if (colon == std::string::npos || FindFault(c.substr(colon + 1)) == nullptr ||
            std::find(kBackends.begin(), kBackends.end(), b) == kBackends.end())
          Usage("--cells: not backend:fault: '" + c + "'");
        a.cells.push_back(c);
        if (std::find(a.backends.begin(), a.backends.end(), b) == a.backends.end())
          a.backends.push_back(b);
      }
    } else if (flag == "--seed") {
      a.seed = static_cast<std::uint64_t>(Number(flag, value()));
      a.random = true;
    } else if (flag == "--minutes") {
      a.minutes = Number(flag, value());
      minutes_set = true;
    } else if (flag == "--json") {
      a.json = value();
    } else if (flag == "--replicas") {
      a.cell.replicas = static_cast<int>(Number(flag, value()));
      if (a.cell.replicas < 3 || a.cell.replicas > 5) Usage("--replicas: 3 to 5");
    } else if (flag == "--lease-ms") {
      a.cell.lease_s = Number(flag, value()) / 1000;
      if (a.cell.lease_s < 1) Usage("--lease-ms: at least 1000");
    } else if (flag == "--warmup-s") {
      a.cell.warmup_s = Number(flag, value());
    } else if (flag == "--settle-s") {
      a.cell.settle_s = Number(flag, value());
    } else if (flag == "--keep") {
      a.cell.keep = true;
    } else if (flag == "--plant-duplicate") {
      a.cell.plant_duplicate = true;
    } else if (flag == "--fail-on-skip-if-root") {
      a.fail_on_skip_if_root = true;
    } else if (flag == "--resource-binary") {
      a.cell.bin.resource = value();
    } else if (flag == "--write-binary") {
      a.cell.bin.write = value();
    } else if (flag == "--dry-run") {
      a.dry_run = true;
    } else if (flag == "--list") {
      a.list = true;
    } else {
      Usage("unknown argument '" + flag + "'");
    }
  }
  if (a.list) return a;
  if (a.backends.empty()) Usage("--backend is required");
  if (a.random && !minutes_set) Usage("--seed needs --minutes (how long the schedule runs)");
  if (minutes_set && !a.random) Usage("--minutes needs --seed (the random schedule)");
  return a;
}

// The cells of one backend: the fixed matrix, or the seeded random schedule.
std::vector<CellPlan> Plans(const Args& a, const std::string& backend) {
  std::vector<const FaultKind*> kinds;
  for (const FaultKind& k : Catalog()) {
    if (!a.faults.empty() && std::find(a.faults.begin(), a.faults.end(), k.name) == a.faults.end())
      continue;
    if (!a.cells.empty() &&
        std::find(a.cells.begin(), a.cells.end(), backend + ":" + k.name) == a.cells.end())
      continue;
    kinds.push_back(&k);
  }
  std::vector<CellPlan> plans;
  if (!a.random) {
    for (const FaultKind* k : kinds) plans.push_back(FixedPlan(*k, a.cell.lease_s));
    return plans;
  }
  std::vector<const FaultKind*> applicable;
  for (const FaultKind* k : kinds) {
    if (NotApplicable(*k, backend).empty()) applicable.push_back(k);
  }
  if (applicable.empty()) return plans;
  // The same seed, the same schedule: one generator per backend, seeded from the seed
  // and the backend's name, drawing cells until their planned time fills the minutes.
  std::seed_seq seq{a.seed, static_cast<std::uint64_t>(std::hash<std::string>{}(backend))};
  std::mt19937_64 rng(seq);
  double planned_s = 0;
  for (int i = 0; i < 1000 && planned_s < a.minutes * 60; ++i) {
    CellPlan p = RandomPlan(applicable, a.cell.replicas, a.cell.lease_s, rng);
    planned_s += a.cell.warmup_s + p.hold_s + a.cell.settle_s + 4;
    plans.push_back(p);
  }
  return plans;
}

void PrintHeader() {
  std::printf("%-14s %-27s %8s %6s %5s %8s %9s %6s %6s %5s %6s %5s %5s %5s %10s  %s\n", "backend",
              "fault", "injected", "ticks", "runs", "accepted", "rej.stale", "missed", "unexpl",
              "dups", "stale", "overl", "lateW", "early", "late.p99ms", "note");
}

void PrintRow(const CellResult& r) {
  if (r.status != "ran") {
    std::printf("%-14s %-27s %s: %s\n", r.backend.c_str(), r.plan.fault.c_str(), r.status.c_str(),
                r.why.c_str());
    std::fflush(stdout);
    return;
  }
  const CellCounts& c = r.check.counts;
  std::printf("%-14s %-27s %8d %6ld %5ld %8ld %9ld %6ld %6ld %5ld %6ld %5ld %5ld %5ld %10.0f  %s\n",
              r.backend.c_str(), r.plan.fault.c_str(), r.injected, c.ticks, c.runs, c.accepted,
              c.rejected_stale, c.missed, c.unexplained_missed, c.duplicates, c.stale_accepted,
              c.overlaps, c.late_writes, c.early_starts, c.lateness_p99_ms,
              r.check.ok ? "ok" : "VIOLATION");
  std::fflush(stdout);
}

nlohmann::json CellJson(const CellResult& r) {
  const CellCounts& c = r.check.counts;
  nlohmann::json j = {{"fault", r.plan.fault},
                      {"injected", r.injected},
                      {"ticks", c.ticks},
                      {"accepted", c.accepted},
                      {"rejected_stale", c.rejected_stale},
                      {"missed", c.missed},
                      {"duplicates", c.duplicates},
                      {"stale_accepted", c.stale_accepted},
                      {"late_writes", c.late_writes},
                      {"early_starts", c.early_starts}};
  // Beyond issue #14's fields: what the reader of a failure needs.
  j["status"] = r.status;
  if (!r.why.empty()) j["why"] = r.why;
  j["plan"] = r.plan.Describe();
  j["runs"] = c.runs;
  j["unexplained_missed"] = c.unexplained_missed;
  j["overlaps"] = c.overlaps;
  j["fence_order_violations"] = c.fence_order_violations;
  j["lease_violations"] = c.lease_violations;
  j["recovered"] = c.recovered;
  j["lateness_p99_ms"] = c.lateness_p99_ms;
  j["verdict_ok"] = r.check.ok;
  j["violations"] = r.check.violations;
  j["evidence"] = r.evidence;
  j["seconds"] = r.seconds;
  return j;
}

// Whether a cell makes the run fail, and why (for the closing lines).
std::string Failure(const CellResult& r, bool fail_on_skip) {
  if (r.status == "error") return "could not run: " + r.why;
  if (r.status == "skipped") return fail_on_skip ? "skipped as root: " + r.why : "";
  if (r.status != "ran") return "";
  const CellCounts& c = r.check.counts;
  if (c.duplicates > 0 || c.stale_accepted > 0 || c.unexplained_missed > 0 || c.late_writes > 0 ||
      c.early_starts > 0 || !r.check.ok) {
    std::string v = "violation";
    for (const std::string& s : r.check.violations) {
      v += "\n    " + s;
      if (v.size() > 2000) break;
    }
    return v;
  }
  return "";
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  if (a.list) {
    for (const FaultKind& k : Catalog()) std::printf("%-27s %s\n", k.name.c_str(), k.what.c_str());
    return 0;
  }
  for (const std::string& bin : {a.cell.bin.resource, a.cell.bin.write}) {
    if (::access(bin.c_str(), X_OK) != 0) Usage("not an executable: " + bin + " (build it first)");
  }
  const bool fail_on_skip = a.fail_on_skip_if_root && ::geteuid() == 0;
  // Every folder of the run (cells, servers) under one of its own: nothing another
  // run's cleanup of /tmp/tickd-* can remove, and one place to remove at the end.
  std::string base = (fs::temp_directory_path() / "tickd-nemesis-XXXXXX").string();
  if (::mkdtemp(base.data()) == nullptr)
    Usage("cannot create a folder under " + fs::temp_directory_path().string());
  // Servers that run as another user (PostgreSQL as `postgres`) must reach their
  // folders below it: mkdtemp made it 0700.
  fs::permissions(base, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  ::setenv("TMPDIR", base.c_str(), 1);
  struct RemoveBase {
    std::string dir;
    bool keep;
    ~RemoveBase() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } remove_base{base, a.cell.keep};
  if (a.cell.keep) std::printf("# cells under %s\n", base.c_str());
  nlohmann::json all = nlohmann::json::array();
  std::vector<std::string> failures;
  if (!a.dry_run) PrintHeader();
  for (const std::string& backend : a.backends) {
    const std::vector<CellPlan> plans = Plans(a, backend);
    if (a.random) {
      std::printf("# %s schedule for seed %llu, %.1f min:\n", backend.c_str(),
                  static_cast<unsigned long long>(a.seed), a.minutes);
      for (std::size_t i = 0; i < plans.size(); ++i)
        std::printf("#   %2zu %s\n", i + 1, plans[i].Describe().c_str());
    }
    if (a.dry_run) {
      for (const CellPlan& p : a.random ? std::vector<CellPlan>{} : plans) {
        const FaultKind& k = *FindFault(p.fault);
        const std::string na = NotApplicable(k, backend);
        std::printf("%-10s %s%s\n", backend.c_str(), p.Describe().c_str(),
                    na.empty() ? "" : ("  n/a: " + na).c_str());
      }
      continue;
    }
    nlohmann::json doc = {
        {"backend", backend}, {"seed", a.seed}, {"cells", nlohmann::json::array()}};
    for (const CellPlan& plan : plans) {
      const CellResult r = RunCell(backend, plan, a.cell);
      PrintRow(r);
      if (r.status == "ran" && !r.check.ok && !r.dir.empty() && a.cell.keep)
        std::printf("  kept: %s\n", r.dir.c_str());
      if (r.status != "n/a") doc["cells"].push_back(CellJson(r));
      if (std::string why = Failure(r, fail_on_skip); !why.empty())
        failures.push_back(backend + " " + plan.Describe() + ": " + why);
    }
    all.push_back(doc);
  }
  if (!a.json.empty() && !a.dry_run) {
    std::ofstream out(a.json);
    out << std::setw(2) << (all.size() == 1 ? all[0] : all) << "\n";
    if (!out) {
      std::cerr << "nemesis: cannot write " << a.json << "\n";
      return 1;
    }
  }
  if (a.dry_run) return 0;
  for (const std::string& f : failures) std::printf("FAIL %s\n", f.c_str());
  std::printf("%s\n",
              failures.empty() ? "nemesis: every cell that ran is clean" : "nemesis: FAILED");
  return failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace tickd::nemesis

int main(int argc, char** argv) { return tickd::nemesis::Main(argc, argv); }
