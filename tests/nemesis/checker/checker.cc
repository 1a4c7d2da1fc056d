#include "tests/nemesis/checker/checker.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

namespace tickd::nemesis {

namespace {

using Json = nlohmann::json;

template <typename T>
std::optional<T> Number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "key=value key="quoted value" …" after the third word.
std::map<std::string, std::string> Fields(std::string_view line, std::size_t i) {
  std::map<std::string, std::string> out;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const std::size_t key_start = i;
    while (i < line.size() && line[i] != '=' && line[i] != ' ') ++i;
    if (i >= line.size() || line[i] != '=') continue;  // a bare word: skipped
    std::string key(line.substr(key_start, i - key_start));
    ++i;
    std::string value;
    if (i < line.size() && line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        value += line[i];
      }
      ++i;
    } else {
      while (i < line.size() && line[i] != ' ') value += line[i++];
    }
    out[std::move(key)] = std::move(value);
  }
  return out;
}

std::string Where(const std::filesystem::path& file, int line) {
  return file.filename().string() + ":" + std::to_string(line);
}

bool Fail(std::string* error, const std::filesystem::path& file, int line, const std::string& why) {
  *error = file.string() + ":" + std::to_string(line) + ": " + why;
  return false;
}

std::string Utc(std::int64_t tick) {
  const std::chrono::sys_seconds t{std::chrono::seconds(tick)};
  const auto days = std::chrono::floor<std::chrono::days>(t);
  const std::chrono::year_month_day ymd{days};
  const std::chrono::hh_mm_ss hms{t - days};
  char buf[64];
  std::snprintf(
      buf, sizeof(buf), "%04d-%02u-%02uT%02lld:%02lld:%02lldZ", int(ymd.year()),
      unsigned(ymd.month()), unsigned(ymd.day()), static_cast<long long>(hms.hours().count()),
      static_cast<long long>(hms.minutes().count()), static_cast<long long>(hms.seconds().count()));
  return buf;
}

std::string Describe(const Attempt& a) {
  std::ostringstream s;
  s << a.where << " replica=" << a.replica << " fence=" << a.fence
    << " accepted=" << (a.accepted ? "true" : "false") << " start_ms=" << a.start_ms
    << " end_ms=" << a.end_ms << " ended=" << a.ended;
  return s.str();
}

const JobSpec& SpecOf(const CheckSpec& spec, const std::string& job) {
  static const JobSpec kDefault;
  for (const JobSpec& j : spec.jobs) {
    if (j.name == job) return j;
  }
  return kDefault;
}

// claim_lead is below 1 s (DESIGN §1 "Early claims"): a claim of T made earlier than
// this before T came from a clock ahead.
constexpr std::int64_t kClaimLeadBelowMs = 1000;

bool StoreScoped(const FaultWindow& f) {
  return f.effect == "store-down" || f.effect == "store-slow" || f.target.empty() ||
         f.target == "*" || f.target == "all" || f.target == "store";
}

// The decision order of attempts: seq, then start time, then journal order.
bool DecidedBefore(const Attempt* a, const Attempt* b) {
  if (a->seq != 0 && b->seq != 0 && a->seq != b->seq) return a->seq < b->seq;
  return a->start_ms < b->start_ms;
}

class Checker {
 public:
  Checker(const CheckSpec& spec, const std::vector<Attempt>& journal,
          const std::vector<LogEvent>& logs, const std::vector<FaultWindow>& faults,
          const std::vector<LeaseExpiry>& expiries)
      : spec_(spec), journal_(journal), logs_(logs), faults_(faults), expiries_(expiries) {
    for (const LogEvent& e : logs_) {
      if (e.event == "tick") ticks_[{e.job, e.tick}].push_back(&e);
      if (e.event == "run") runs_[{e.job, e.tick}].push_back(&e);
      if (e.event == "lease") leases_[{e.job, e.tick}].push_back(&e);
      if (spec_.replicas.empty() && !e.node.empty()) nodes_.insert(e.node);
    }
    nodes_.insert(spec_.replicas.begin(), spec_.replicas.end());
    for (const Attempt& a : journal_) {
      if (a.accepted) accepted_[{a.job, a.tick}].push_back(&a);
    }
    for (auto& [key, list] : accepted_) std::stable_sort(list.begin(), list.end(), DecidedBefore);
  }

  Report Run() {
    for (const FaultWindow& f : faults_) {
      const bool in_scope = f.end_ms >= spec_.scope_start_ms && f.start_ms < spec_.scope_end_ms;
      r_.counts.injected += f.took_effect && in_scope ? 1 : 0;
    }
    CountJournalAndRuns();
    CheckDuplicates();
    CheckFenceOrderAndLease();
    CheckOverlaps();
    CheckLateWrites();
    CheckEarlyStarts();
    CheckExpectedTicks();
    return std::move(r_);
  }

 private:
  using Key = std::pair<std::string, std::int64_t>;

  bool InScope(std::int64_t ms) const {
    return ms >= spec_.scope_start_ms && ms < spec_.scope_end_ms;
  }

  void Add(std::string check, const std::string& job, std::int64_t tick, std::string evidence) {
    r_.violations.push_back(Violation{std::move(check), job, tick, std::move(evidence)});
  }

  void CountJournalAndRuns() {
    for (const Attempt& a : journal_) {
      if (InScope(a.start_ms)) ++(a.accepted ? r_.counts.accepted : r_.counts.rejected_stale);
    }
    std::set<std::tuple<std::string, std::int64_t, std::uint64_t>> runs;
    for (const LogEvent& e : logs_) {
      if (e.event == "run" && InScope(e.ts_ms)) runs.insert({e.job, e.tick, e.fence.value_or(0)});
    }
    r_.counts.runs = static_cast<std::int64_t>(runs.size());
  }

  void CheckDuplicates() {
    for (const auto& [key, list] : accepted_) {
      if (list.size() < 2 || std::none_of(list.begin(), list.end(),
                                          [&](const Attempt* a) { return InScope(a->start_ms); })) {
        continue;
      }
      r_.counts.duplicates += static_cast<std::int64_t>(list.size()) - 1;
      std::string evidence = std::to_string(list.size()) + " accepted writes for " + key.first +
                             " tick " + Utc(key.second) + ":";
      for (const Attempt* a : list) evidence += " [" + Describe(*a) + "]";
      Add("duplicate", key.first, key.second, evidence);
    }
  }

  // The lease end of attempt `a` by the rule in checker.h; nullopt when unverifiable.
  std::optional<std::int64_t> LeaseEnd(const Attempt& a, std::string* evidence) const {
    const JobSpec& job = SpecOf(spec_, a.job);
    for (const FaultWindow& f : faults_) {
      if (f.took_effect && f.effect == "replica-clock" && f.target == a.replica &&
          f.start_ms <= a.start_ms && f.end_ms >= a.start_ms - job.lease_ms) {
        return std::nullopt;
      }
    }
    const Key key{a.job, a.tick};
    std::optional<std::int64_t> end;
    auto mine = [&](const LogEvent* e) { return e->node == a.replica && e->fence == a.fence; };
    if (auto it = ticks_.find(key); it != ticks_.end()) {
      for (const LogEvent* e : it->second) {
        if (mine(e) && e->outcome == "won") {
          end = e->ts_ms + job.lease_ms;
          *evidence = e->where + " won at " + std::to_string(e->ts_ms) + " + lease " +
                      std::to_string(job.lease_ms) + " ms";
        }
      }
    }
    if (!end) return std::nullopt;
    auto lost = [&](const std::map<Key, std::vector<const LogEvent*>>& lines, const char* word) {
      auto it = lines.find(key);
      if (it == lines.end()) return;
      for (const LogEvent* e : it->second) {
        if (mine(e) && e->outcome == word && e->ts_ms < *end) {
          end = e->ts_ms;
          *evidence = e->where + " outcome=" + word + " at " + std::to_string(e->ts_ms);
        }
      }
    };
    lost(leases_, "lost");
    lost(runs_, "lease-lost");
    return end;
  }

  void CheckFenceOrderAndLease() {
    std::map<std::string, std::vector<const Attempt*>> by_job;
    for (const Attempt& a : journal_) {
      if (a.accepted) by_job[a.job].push_back(&a);
    }
    for (auto& [job, list] : by_job) {
      std::stable_sort(list.begin(), list.end(), DecidedBefore);
      const Attempt* highest = nullptr;
      for (const Attempt* a : list) {
        if (!InScope(a->start_ms)) {
          if (highest == nullptr || a->fence > highest->fence) highest = a;
          continue;
        }
        bool stale = false;
        if (highest != nullptr && a->fence <= highest->fence) {
          stale = true;
          ++r_.counts.fence_order_violations;
          Add("fence-order", job, a->tick,
              "accepted fence " + std::to_string(a->fence) + " after fence " +
                  std::to_string(highest->fence) + " was accepted: [" + Describe(*highest) +
                  "] then [" + Describe(*a) + "]");
        }
        if (highest == nullptr || a->fence > highest->fence) highest = a;
        std::string why;
        const std::optional<std::int64_t> end = LeaseEnd(*a, &why);
        if (!end) {
          ++r_.counts.lease_unchecked;
        } else if (a->start_ms > *end + spec_.lease_tolerance_ms) {
          stale = true;
          ++r_.counts.lease_violations;
          Add("lease", job, a->tick,
              "accepted at " + std::to_string(a->start_ms) + ", " +
                  std::to_string(a->start_ms - *end) + " ms after the holder's lease ended (" +
                  why + "): [" + Describe(*a) + "]");
        }
        if (stale) ++r_.counts.stale_accepted;
      }
    }
  }

  void CheckOverlaps() {
    std::map<std::string, std::vector<const Attempt*>> by_job;
    for (const Attempt& a : journal_) {
      if (a.accepted && SpecOf(spec_, a.job).forbid) by_job[a.job].push_back(&a);
    }
    for (auto& [job, list] : by_job) {
      std::stable_sort(list.begin(), list.end(), [](const Attempt* a, const Attempt* b) {
        return a->start_ms < b->start_ms;
      });
      const Attempt* longest = nullptr;  // the earlier attempt that ends last
      for (const Attempt* a : list) {
        // A frozen daemon's run counts too: its lease guard kills it at valid_until
        // (DESIGN §1 rule 2), before the next holder can claim.
        if (longest != nullptr && InScope(a->start_ms) &&
            a->start_ms < longest->end_ms - spec_.overlap_tolerance_ms) {
          ++r_.counts.overlaps;
          Add("overlap", job, a->tick,
              "forbid job started while an earlier run was open: [" + Describe(*longest) +
                  "] and [" + Describe(*a) + "]");
        }
        if (longest == nullptr || a->end_ms > longest->end_ms) longest = a;
      }
    }
  }

  // When the run of `a` was cut off (checker.h, "late write"): the earliest first write
  // of an accepted attempt with a higher fence, or another replica's won line with a
  // higher fence, of the same job where that ends a's claim; nullopt when none.
  std::optional<std::int64_t> CutOff(const Attempt& a, std::string* why) const {
    const bool forbid = SpecOf(spec_, a.job).forbid;
    std::optional<std::int64_t> cut;
    auto ends_claim = [&](std::int64_t tick, std::uint64_t fence) {
      return fence > a.fence && (tick == a.tick || (forbid && tick > a.tick));
    };
    for (const Attempt& b : journal_) {
      if (b.job == a.job && b.accepted && ends_claim(b.tick, b.fence) &&
          (!cut || b.start_ms < *cut)) {
        cut = b.start_ms;
        *why = "fence " + std::to_string(b.fence) + " began at " + std::to_string(b.start_ms) +
               " (" + b.where + ")";
      }
    }
    for (const LogEvent& e : logs_) {
      if (e.event != "tick" || e.outcome != "won" || e.job != a.job || !e.fence ||
          !ends_claim(e.tick, *e.fence) || ClockFaulted(e.node) || (cut && e.ts_ms >= *cut)) {
        continue;
      }
      cut = e.ts_ms;
      *why = "the store granted " + Utc(e.tick) + " to " + e.node + " with fence " +
             std::to_string(*e.fence) + " at " + std::to_string(e.ts_ms) + " (" + e.where + ")";
    }
    for (const LeaseExpiry& x : expiries_) {
      if (x.job == a.job && x.tick == a.tick && x.fence == a.fence &&
          (!cut || x.expired_by_ms < *cut)) {
        cut = x.expired_by_ms;
        *why = "the store had ended its lease by " + std::to_string(x.expired_by_ms) + " (" +
               x.where + ")";
      }
    }
    return cut;
  }

  bool ClockFaulted(const std::string& node) const {
    return std::any_of(faults_.begin(), faults_.end(), [&](const FaultWindow& f) {
      return f.took_effect && f.effect == "replica-clock" && f.target == node;
    });
  }

  void CheckLateWrites() {
    for (const Attempt& a : journal_) {
      if (!InScope(a.start_ms)) continue;
      std::string why;
      const std::optional<std::int64_t> cut = CutOff(a, &why);
      if (!cut) continue;
      std::vector<std::int64_t> late;
      if (a.start_ms > *cut) late.push_back(a.start_ms);
      for (const std::int64_t w : a.writes) {
        if (w > *cut) late.push_back(w);
      }
      if (late.empty()) continue;
      r_.counts.late_writes += static_cast<std::int64_t>(late.size());
      Add("late-write", a.job, a.tick,
          std::to_string(late.size()) + " write(s) from " + std::to_string(late.front() - *cut) +
              " to " + std::to_string(late.back() - *cut) + " ms after the run was cut off (" +
              why + "): [" + Describe(a) + " writes=" + std::to_string(a.writes.size()) +
              " refused=" + std::to_string(a.writes_refused) + "]");
    }
  }

  void CheckEarlyStarts() {
    for (const Attempt& a : journal_) {
      if (!InScope(a.start_ms) || a.start_ms >= a.tick * 1000) continue;
      if (a.start_ms >= a.tick * 1000 - spec_.clock_tolerance_ms && ClockFaulted(a.replica)) {
        continue;  // a clock ahead by less than the tolerance is not refused (rule 15)
      }
      ++r_.counts.early_starts;
      Add("early-start", a.job, a.tick,
          "began " + std::to_string(a.tick * 1000 - a.start_ms) +
              " ms before its tick (real "
              "clock): [" +
              Describe(a) + "]");
    }
  }

  // Whether a fault window covers `node` for tick T of `job` (checker.h, "covers"). A
  // replica-clock window only at its two steps: the reach of a crash there.
  const FaultWindow* Covering(const std::string& node, const JobSpec& job, std::int64_t t) const {
    const std::int64_t from = t * 1000 - job.lease_ms - spec_.before_ms;
    const std::int64_t to = t * 1000 + spec_.after_ms;
    auto in = [&](std::int64_t ms) { return from <= ms && ms <= to; };
    for (const FaultWindow& f : faults_) {
      if (!f.took_effect || f.effect == "none") continue;
      if (!StoreScoped(f) && f.target != node) continue;
      if (f.effect == "replica-clock" ? in(f.start_ms) || in(f.end_ms)
                                      : f.start_ms <= to && f.end_ms >= from) {
        return &f;
      }
    }
    return nullptr;
  }

  // Whether the run of (job, holder_tick) was still going at T·1000.
  bool StillRunning(const std::string& job, std::int64_t holder_tick, const std::string& holder,
                    std::int64_t t) const {
    if (auto it = accepted_.find({job, holder_tick}); it != accepted_.end()) {
      for (const Attempt* a : it->second) {
        if (a->end_ms >= t * 1000) return true;
      }
    }
    if (auto it = runs_.find({job, holder_tick}); it != runs_.end()) {
      for (const LogEvent* e : it->second) {
        if (e->node == holder && e->ts_ms >= t * 1000) return true;
      }
    }
    return false;
  }

  // The holder's tick line for (job, holder_tick) when it says error — or lost to the
  // holder itself: its claim sent again after an error found the first one standing —
  // and T falls within that claim's lease: a claim whose answer was an error may still
  // stand in the store, unrun and running until its lease ends (the `?wait` refusal on
  // Redis, a claim that timed out after it was written). Its tick is lost to a replica
  // that did not run it, and forbid holds the job back until the lease ends.
  const LogEvent* LeftOpen(const JobSpec& job, std::int64_t holder_tick, const std::string& holder,
                           std::int64_t t) const {
    auto it = ticks_.find({job.name, holder_tick});
    if (it == ticks_.end()) return nullptr;
    for (const LogEvent* e : it->second) {
      const bool unanswered =
          e->outcome == "error" || (e->outcome == "lost" && e->winner == holder);
      if (e->node == holder && unanswered && t * 1000 < e->ts_ms + job.lease_ms) {
        return e;
      }
    }
    return nullptr;
  }

  // Why `node` could not run (job, T); empty when it could have.
  std::string CouldNotRun(const std::string& node, const JobSpec& job, std::int64_t t) const {
    if (const FaultWindow* f = Covering(node, job, t)) return "fault " + f->fault;
    auto it = ticks_.find({job.name, t});
    if (it == ticks_.end()) return "";
    for (const LogEvent* e : it->second) {
      if (e->node != node) continue;
      if (e->outcome == "superseded" && e->later_tick && !ClockFaulted(node) &&
          e->ts_ms < *e->later_tick * 1000 - kClaimLeadBelowMs) {
        continue;  // superseded by a claim made before its tick was due: a clock ahead
      }
      if (e->outcome != "won" && e->outcome != "lost" && e->outcome != "busy") {
        return "outcome=" + e->outcome;
      }
      if (e->outcome == "busy" && e->holder_tick) {
        if (const FaultWindow* f = Covering(e->holder, job, t)) {
          return "busy, holder " + e->holder + " under fault " + f->fault;
        }
        if (StillRunning(job.name, *e->holder_tick, e->holder, t)) {
          return "busy, " + Utc(*e->holder_tick) + " still running";
        }
        if (const LogEvent* err = LeftOpen(job, *e->holder_tick, e->holder, t)) {
          return "busy, " + e->holder + "'s claim of " + Utc(*e->holder_tick) +
                 " ended in error and keeps its lease (" + err->where + ")";
        }
      }
      if (e->outcome == "lost") {
        if (const FaultWindow* f = Covering(e->winner, job, t)) {
          return "lost to " + e->winner + " under fault " + f->fault;
        }
        if (const LogEvent* err = LeftOpen(job, t, e->winner, t)) {
          return "lost to " + e->winner + ", whose answer was an error (" + err->where + ")";
        }
      }
    }
    return "";
  }

  void CheckExpectedTicks() {
    std::vector<std::int64_t> lateness;
    for (const JobSpec& job : spec_.jobs) {
      std::set<std::int64_t> expected(job.ticks.begin(), job.ticks.end());
      if (job.every_s > 0) {
        std::int64_t t = (spec_.window_start_ms + 999) / 1000;
        t += (job.every_s - t % job.every_s) % job.every_s;
        for (; t * 1000 < spec_.window_end_ms; t += job.every_s) expected.insert(t);
      }
      for (const std::int64_t t : expected) {
        ++r_.counts.ticks;
        if (auto it = accepted_.find({job.name, t}); it != accepted_.end()) {
          lateness.push_back(it->second.front()->start_ms - t * 1000);
          continue;
        }
        ++r_.counts.missed;
        std::string unable;
        std::string able;
        for (const std::string& node : nodes_) {
          const std::string why = CouldNotRun(node, job, t);
          (why.empty() ? able : unable) += " " + node + (why.empty() ? "" : " (" + why + ")");
        }
        if (!able.empty() || nodes_.empty()) {
          ++r_.counts.unexplained_missed;
          Add("unexplained-missed", job.name, t,
              "no accepted write; could have run it:" + (able.empty() ? " (no replicas)" : able) +
                  (unable.empty() ? "" : "; could not:" + unable) + TickLines(job.name, t));
        }
      }
    }
    if (!lateness.empty()) {
      std::sort(lateness.begin(), lateness.end());
      const std::size_t rank = (lateness.size() * 99 + 99) / 100;  // nearest rank, ceil
      r_.counts.lateness_p99_ms = lateness[std::max<std::size_t>(rank, 1) - 1];
      r_.counts.lateness_max_ms = lateness.back();
    }
  }

  std::string TickLines(const std::string& job, std::int64_t t) const {
    std::string out;
    auto it = ticks_.find({job, t});
    if (it == ticks_.end()) return "; no tick lines";
    for (const LogEvent* e : it->second) out += "; " + e->where + " " + e->node + " " + e->outcome;
    return out;
  }

  const CheckSpec& spec_;
  const std::vector<Attempt>& journal_;
  const std::vector<LogEvent>& logs_;
  const std::vector<FaultWindow>& faults_;
  const std::vector<LeaseExpiry>& expiries_;
  std::map<Key, std::vector<const LogEvent*>> ticks_;
  std::map<Key, std::vector<const LogEvent*>> runs_;
  std::map<Key, std::vector<const LogEvent*>> leases_;
  std::map<Key, std::vector<const Attempt*>> accepted_;  // decision order
  std::set<std::string> nodes_;
  Report r_;
};

Json CountsJson(const Counts& c) {
  return Json{{"injected", c.injected},
              {"ticks", c.ticks},
              {"runs", c.runs},
              {"accepted", c.accepted},
              {"rejected_stale", c.rejected_stale},
              {"missed", c.missed},
              {"unexplained_missed", c.unexplained_missed},
              {"duplicates", c.duplicates},
              {"stale_accepted", c.stale_accepted},
              {"fence_order_violations", c.fence_order_violations},
              {"lease_violations", c.lease_violations},
              {"lease_unchecked", c.lease_unchecked},
              {"overlaps", c.overlaps},
              {"late_writes", c.late_writes},
              {"early_starts", c.early_starts},
              {"lateness_p99_ms", c.lateness_p99_ms},
              {"lateness_max_ms", c.lateness_max_ms}};
}

// Reads `file` line by line; `each(line, number)` returns false (with *error set) to stop.
template <typename F>
bool ForEachLine(const std::filesystem::path& file, std::string* error, F each) {
  std::ifstream in(file);
  if (!in) {
    *error = file.string() + ": cannot be read";
    return false;
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (!each(line, number, in.peek() == EOF)) return false;
  }
  return true;
}

}  // namespace

bool Report::Passed() const {
  return counts.duplicates == 0 && counts.stale_accepted == 0 && counts.overlaps == 0 &&
         counts.unexplained_missed == 0 && counts.late_writes == 0 && counts.early_starts == 0;
}

std::string Report::ToJson() const {
  Json v = Json::array();
  for (const Violation& x : violations) {
    v.push_back(
        Json{{"check", x.check}, {"job", x.job}, {"tick", x.tick}, {"evidence", x.evidence}});
  }
  return Json{{"passed", Passed()}, {"counts", CountsJson(counts)}, {"violations", v}}.dump();
}

std::string Report::ToText() const {
  std::ostringstream s;
  const Json all = CountsJson(counts);
  for (const auto& [key, value] : all.items()) s << key << '=' << value << ' ';
  s << (Passed() ? "PASS" : "FAIL") << '\n';
  for (const Violation& x : violations) {
    s << x.check << " job=" << x.job << " tick=" << Utc(x.tick) << ": " << x.evidence << '\n';
  }
  return s.str();
}

Report Check(const CheckSpec& spec, const std::vector<Attempt>& journal,
             const std::vector<LogEvent>& logs, const std::vector<FaultWindow>& faults,
             const std::vector<LeaseExpiry>& expiries) {
  return Checker(spec, journal, logs, faults, expiries).Run();
}

std::optional<std::int64_t> ParseUtcMs(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fff…]Z
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return std::nullopt;
  }
  const auto y = Number<int>(text.substr(0, 4));
  const auto mo = Number<unsigned>(text.substr(5, 2));
  const auto d = Number<unsigned>(text.substr(8, 2));
  const auto h = Number<int>(text.substr(11, 2));
  const auto mi = Number<int>(text.substr(14, 2));
  const auto s = Number<int>(text.substr(17, 2));
  if (!y || !mo || !d || !h || !mi || !s) return std::nullopt;
  std::int64_t ms = 0;
  std::string_view frac = text.substr(19, text.size() - 20);
  if (!frac.empty()) {
    if (frac[0] != '.' || frac.size() < 2) return std::nullopt;
    frac.remove_prefix(1);
    const std::string_view digits = frac.substr(0, 3);
    const auto f = Number<int>(digits);
    if (!f) return std::nullopt;
    ms = *f * (digits.size() == 1 ? 100 : digits.size() == 2 ? 10 : 1);
  }
  const std::chrono::year_month_day ymd{std::chrono::year(*y), std::chrono::month(*mo),
                                        std::chrono::day(*d)};
  if (!ymd.ok()) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days(ymd).time_since_epoch().count();
  return ((days * 24 + *h) * 60 + *mi) * 60000 + *s * 1000 + ms;
}

std::optional<LogEvent> ParseLogEvent(std::string_view line) {
  std::size_t i = 0;
  auto word = [&] {
    while (i < line.size() && line[i] == ' ') ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    return line.substr(start, i - start);
  };
  const std::string_view ts = word();
  word();  // level
  const std::string_view event = word();
  if (event != "tick" && event != "run" && event != "lease" && event != "complete") {
    return std::nullopt;
  }
  const std::optional<std::int64_t> ts_ms = ParseUtcMs(ts);
  if (!ts_ms) return std::nullopt;
  std::map<std::string, std::string> f = Fields(line, i);
  const std::optional<std::int64_t> tick_ms = ParseUtcMs(f["tick"]);
  if (!tick_ms || f["job"].empty()) return std::nullopt;
  LogEvent e;
  e.event = std::string(event);
  e.ts_ms = *ts_ms;
  e.node = f["node"];
  e.job = f["job"];
  e.tick = *tick_ms / 1000;
  e.outcome = f["outcome"];
  e.fence = Number<std::uint64_t>(f["fence"]);
  e.winner = f["winner"];
  e.holder = f["holder"];
  if (const auto ht = ParseUtcMs(f["holder_tick"])) e.holder_tick = *ht / 1000;
  if (const auto lt = ParseUtcMs(f["later_tick"])) e.later_tick = *lt / 1000;
  return e;
}

bool LoadJournal(const std::filesystem::path& file, std::vector<Attempt>* out, std::string* error) {
  return ForEachLine(file, error, [&](const std::string& line, int number, bool last) {
    const Json j = Json::parse(line, nullptr, false);
    try {
      if (j.is_discarded() || !j.is_object()) throw std::runtime_error("not a JSON object");
      Attempt a;
      a.job = j.at("job").get<std::string>();
      a.tick = j.at("tick").get<std::int64_t>();
      a.fence = j.at("fence").get<std::uint64_t>();
      a.replica = j.at("replica").get<std::string>();
      a.accepted = j.at("accepted").get<bool>();
      if (j.contains("last_fence") && !j["last_fence"].is_null()) {
        a.last_fence = j["last_fence"].get<std::uint64_t>();
      }
      a.start_ms = j.at("start_ms").get<std::int64_t>();
      a.end_ms = j.at("end_ms").get<std::int64_t>();
      a.ended = j.value("ended", "");
      a.seq = j.value("seq", std::uint64_t{0});
      a.writes = j.value("writes", std::vector<std::int64_t>{});
      a.writes_refused = j.value("writes_refused", std::size_t{0});
      a.where = Where(file, number);
      out->push_back(std::move(a));
      return true;
    } catch (const std::exception& e) {
      if (last) return true;  // a torn last line
      return Fail(error, file, number, std::string("not a journal attempt: ") + e.what());
    }
  });
}

bool LoadLog(const std::filesystem::path& file, std::vector<LogEvent>* out, std::string* error) {
  return ForEachLine(file, error, [&](const std::string& line, int number, bool) {
    if (std::optional<LogEvent> e = ParseLogEvent(line)) {
      e->where = Where(file, number);
      out->push_back(std::move(*e));
    }
    return true;
  });
}

namespace {

// Reads `file` as JSONL, each line an object `parse(object, "FILE:LINE")` turns into a T
// (throwing on a missing or bad field); `what` names a T in the error.
template <typename T, typename Parse>
bool LoadObjects(const std::filesystem::path& file, std::vector<T>* out, std::string* error,
                 const char* what, Parse parse) {
  return ForEachLine(file, error, [&](const std::string& line, int number, bool) {
    const Json j = Json::parse(line, nullptr, false);
    try {
      if (j.is_discarded() || !j.is_object()) throw std::runtime_error("not a JSON object");
      out->push_back(parse(j, Where(file, number)));
      return true;
    } catch (const std::exception& e) {
      return Fail(error, file, number, std::string("not a ") + what + ": " + e.what());
    }
  });
}

}  // namespace

bool LoadFaults(const std::filesystem::path& file, std::vector<FaultWindow>* out,
                std::string* error) {
  return LoadObjects(file, out, error, "fault window", [](const Json& j, const std::string&) {
    FaultWindow f;
    f.fault = j.at("fault").get<std::string>();
    f.target = j.value("target", "");
    f.start_ms = j.at("start_ms").get<std::int64_t>();
    f.end_ms = j.at("end_ms").get<std::int64_t>();
    f.effect = j.at("effect").get<std::string>();
    f.took_effect = j.at("took_effect").get<bool>();
    if (f.end_ms < f.start_ms) throw std::runtime_error("end_ms before start_ms");
    return f;
  });
}

bool LoadLeaseExpiries(const std::filesystem::path& file, std::vector<LeaseExpiry>* out,
                       std::string* error) {
  return LoadObjects(file, out, error, "lease expiry", [](const Json& j, const std::string& at) {
    LeaseExpiry x;
    x.job = j.at("job").get<std::string>();
    x.tick = j.at("tick").get<std::int64_t>();
    x.fence = j.at("fence").get<std::uint64_t>();
    x.holder = j.value("holder", "");
    x.expired_by_ms = j.at("expired_by_ms").get<std::int64_t>();
    x.where = at;
    return x;
  });
}

bool LoadSpec(const std::filesystem::path& file, CheckSpec* out, std::string* error) {
  std::ifstream in(file);
  if (!in) {
    *error = file.string() + ": cannot be read";
    return false;
  }
  const Json j = Json::parse(in, nullptr, false);
  try {
    if (j.is_discarded() || !j.is_object()) throw std::runtime_error("not a JSON object");
    out->window_start_ms = j.at("window").at("start_ms").get<std::int64_t>();
    out->window_end_ms = j.at("window").at("end_ms").get<std::int64_t>();
    if (j.contains("scope")) {
      out->scope_start_ms = j["scope"].value("start_ms", out->scope_start_ms);
      out->scope_end_ms = j["scope"].value("end_ms", out->scope_end_ms);
    }
    out->replicas = j.value("replicas", std::vector<std::string>{});
    out->before_ms = j.value("before_ms", out->before_ms);
    out->after_ms = j.value("after_ms", out->after_ms);
    out->lease_tolerance_ms = j.value("lease_tolerance_ms", out->lease_tolerance_ms);
    out->overlap_tolerance_ms = j.value("overlap_tolerance_ms", out->overlap_tolerance_ms);
    out->clock_tolerance_ms = j.value("clock_tolerance_ms", out->clock_tolerance_ms);
    for (const Json& job : j.at("jobs")) {
      JobSpec s;
      s.name = job.at("name").get<std::string>();
      s.every_s = job.value("every_s", std::int64_t{0});
      s.ticks = job.value("ticks", std::vector<std::int64_t>{});
      s.lease_ms = job.value("lease_ms", s.lease_ms);
      const std::string concurrency = job.value("concurrency", "forbid");
      if (concurrency != "forbid" && concurrency != "allow") {
        throw std::runtime_error("job " + s.name + ": concurrency must be forbid or allow");
      }
      if (s.every_s < 0 || s.lease_ms <= 0) {
        throw std::runtime_error("job " + s.name + ": every_s and lease_ms must be positive");
      }
      s.forbid = concurrency == "forbid";
      out->jobs.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    *error = file.string() + ": not a checker spec: " + e.what();
    return false;
  }
  return true;
}

}  // namespace tickd::nemesis
