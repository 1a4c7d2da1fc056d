#include "tests/nemesis/driver/catalog.h"

#include <iomanip>
#include <sstream>

namespace tickd::nemesis {

const std::vector<FaultKind>& Catalog() {
  static const std::vector<FaultKind> kinds = {
      {"partition-both", "replica-isolated", true, false, true,
       "one replica's namespace cut from the store both ways (nftables drop)"},
      {"partition-to-store", "replica-isolated", true, false, true,
       "one replica's packets to the store dropped; replies would still pass"},
      {"partition-from-store", "replica-isolated", true, false, true,
       "the store's packets to one replica dropped; its requests still arrive"},
      {"proxy-delay", "store-slow", true, false, false,
       "one replica's store traffic delayed (both ways) past its op_timeout"},
      {"proxy-stall", "replica-isolated", true, false, false,
       "one replica's store connections accepted and kept, nothing forwarded"},
      {"proxy-drop-replies", "replica-isolated", true, false, false,
       "one replica's requests reach the store, the replies are discarded"},
      {"clock-step-forward", "replica-clock", false, false, false,
       "one replica's wall clock stepped forward (libfaketime), then back"},
      {"clock-step-back", "replica-clock", false, false, false,
       "one replica's wall clock stepped back, then forward again"},
      {"clock-step-forward-1h", "replica-clock", false, false, false,
       "one replica's wall clock stepped an hour forward, then back"},
      {"clock-step-back-1h", "replica-clock", false, false, false,
       "one replica's wall clock stepped an hour back, then forward again"},
      {"clock-drift", "replica-clock", false, false, false,
       "one replica's wall clock runs fast for a while"},
      {"store-pause-half-lease", "store-down", true, false, false,
       "the store SIGSTOPped for half the lease"},
      {"store-pause-twice-lease", "store-down", true, false, false,
       "the store SIGSTOPped for twice the lease"},
      {"store-kill-restart", "store-down", true, false, false,
       "the store killed (SIGKILL), down for a while, restarted on its data"},
      {"store-restart-without-data", "store-down", true, false, false,
       "the store killed and restarted with no claims and no fence counter"},
      {"replica-sigkill", "replica-down", false, false, false,
       "one replica SIGKILLed right after it won a tick (between claim and start), "
       "restarted later"},
      {"replica-sigstop", "replica-down", false, false, false,
       "one replica SIGSTOPped right after a run ended (during release), for twice "
       "the lease"},
      {"sqlite-disk-full", "store-down", false, true, true, "the database's tmpfs filled up"},
      {"sqlite-readonly", "store-down", false, true, false,
       "the database file and folder made read-only (chmod)"},
      {"sqlite-dir-removed", "store-down", false, true, false,
       "the database's folder removed, then created again empty"},
      // While the long job (w-long: 10 s runs, a write every 100 ms) runs: the fault
      // begins on the replica running it (or on the store), so its lease must end
      // the run before another replica's run of the next tick begins.
      {"long-run-partition", "replica-isolated", true, false, true,
       "while the long job runs, its holder's namespace cut from the store both ways"},
      {"long-run-proxy-stall", "replica-isolated", true, false, false,
       "while the long job runs, its holder's store connections kept, nothing forwarded"},
      {"long-run-drop-replies", "replica-isolated", true, false, false,
       "while the long job runs, its holder's requests reach the store, replies are lost"},
      {"long-run-store-pause", "store-down", true, false, false,
       "while the long job runs, the store SIGSTOPped for twice the lease"},
      {"sentinel-failover", "store-down", true, false, false,
       "the master SIGSTOPped until the sentinels promote a replica (at least the hold), "
       "then resumed: it rejoins as a replica",
       true},
  };
  return kinds;
}

const FaultKind* FindFault(const std::string& name) {
  for (const FaultKind& k : Catalog()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

const std::string& BaseFault(const std::string& kind) {
  static const std::vector<std::pair<std::string, std::string>> bases = {
      {"long-run-partition", "partition-both"},
      {"long-run-proxy-stall", "proxy-stall"},
      {"long-run-drop-replies", "proxy-drop-replies"},
      {"long-run-store-pause", "store-pause-twice-lease"},
      {"clock-step-forward-1h", "clock-step-forward"},
      {"clock-step-back-1h", "clock-step-back"},
  };
  for (const auto& [name, base] : bases) {
    if (name == kind) return base;
  }
  return kind;
}

std::string NotApplicable(const FaultKind& kind, const std::string& backend) {
  if (kind.sqlite_only && backend != "sqlite") return "a fault of SQLite's file";
  if (kind.needs_server && backend == "sqlite") return "SQLite has no server";
  if (kind.sentinel_only && backend != "redis-sentinel") return "a fault of Redis Sentinel";
  // One replica's own wrong clock (libfaketime) applies to SQLite too: its store's clock
  // is the host's kernel clock, which the faked one does not move (backends.md, SQLite).
  // Behind Sentinel the store is three servers: no one address to proxy, partition or
  // pause; the replica and clock faults are the redis backend's cells.
  if (backend == "redis-sentinel" && !kind.sentinel_only) {
    return "redis-sentinel runs its failover only (the redis backend has the others)";
  }
  return "";
}

std::string CellPlan::Describe() const {
  std::ostringstream out;
  out << fault << " target=" << (on_long_run ? "holder" : "n" + std::to_string(target + 1))
      << " hold=" << std::fixed << std::setprecision(1) << hold_s << "s";
  if (magnitude != 0) out << " magnitude=" << std::setprecision(2) << magnitude;
  if (!point.empty()) out << " point=" << point;
  return out.str();
}

namespace {

// The magnitude and the hold of a kind: fixed (rng == nullptr) or drawn.
void Shape(CellPlan& plan, double lease_s, std::mt19937_64* rng) {
  auto pick = [&](double fixed, double lo, double hi) {
    return rng ? std::uniform_real_distribution<double>(lo, hi)(*rng) : fixed;
  };
  plan.on_long_run = plan.fault.rfind("long-run-", 0) == 0;
  const std::string& f = BaseFault(plan.fault);
  const bool hour = plan.fault.size() > 3 && plan.fault.substr(plan.fault.size() - 3) == "-1h";
  plan.hold_s = pick(8, 4, 12);
  if (f == "proxy-delay") {
    plan.magnitude = pick(1500, 200, 3000);  // ms per chunk; op_timeout is 1 s
  } else if (f == "clock-step-forward") {
    plan.magnitude = hour ? 3600 : pick(30, 1, 3600);  // seconds
  } else if (f == "clock-step-back") {
    plan.magnitude = hour ? -3600 : -pick(30, 1, 3600);
  } else if (f == "clock-drift") {
    plan.magnitude = pick(1.3, 1.01, 2.0);  // rate
    plan.hold_s = pick(10, 6, 14);
  } else if (f == "store-pause-half-lease") {
    plan.hold_s = lease_s / 2;
  } else if (f == "store-pause-twice-lease") {
    plan.hold_s = 2 * lease_s;
  } else if (f == "store-kill-restart") {
    plan.hold_s = pick(4, 1, 8);
  } else if (f == "store-restart-without-data") {
    plan.hold_s = 0;
  } else if (f == "replica-sigkill") {
    plan.point =
        rng ? (std::bernoulli_distribution(0.5)(*rng) ? "after-won" : "after-run") : "after-won";
    plan.hold_s = pick(4, 1, 8);
  } else if (f == "replica-sigstop") {
    plan.point =
        rng ? (std::bernoulli_distribution(0.5)(*rng) ? "after-won" : "after-run") : "after-run";
    plan.hold_s = pick(2 * lease_s, lease_s / 2, 3 * lease_s);
  } else if (f.rfind("sqlite-", 0) == 0) {
    plan.hold_s = pick(6, 3, 10);
  }
}

}  // namespace

CellPlan FixedPlan(const FaultKind& kind, double lease_s) {
  CellPlan plan;
  plan.fault = kind.name;
  plan.target = 1;
  Shape(plan, lease_s, nullptr);
  return plan;
}

CellPlan RandomPlan(const std::vector<const FaultKind*>& applicable, int replicas, double lease_s,
                    std::mt19937_64& rng) {
  CellPlan plan;
  plan.fault =
      applicable[std::uniform_int_distribution<std::size_t>(0, applicable.size() - 1)(rng)]->name;
  plan.target = std::uniform_int_distribution<int>(0, replicas - 1)(rng);
  Shape(plan, lease_s, &rng);
  return plan;
}

}  // namespace tickd::nemesis
