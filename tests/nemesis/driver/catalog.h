// The fault kinds of the nemesis (issue #14): what each does, which backends it applies
// to, and how a cell of it is planned (the fixed matrix, or a seeded random draw).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tickd::nemesis {

struct FaultKind {
  std::string name;            // "partition-both", … (the cell's "fault" in the JSON)
  std::string effect;          // the fault window's "effect" for the checker
  bool needs_server;           // a store process of its own (not SQLite)
  bool sqlite_only;            // a fault of SQLite's file
  bool needs_root;             // netns, mounts
  std::string what;            // one line for --list and the README
  bool sentinel_only = false;  // a fault of Redis Sentinel (backend redis-sentinel)
};

// The fault a "long-run-*" kind injects (while the long job runs, on its holder):
// "long-run-partition" → "partition-both", …; any other kind → itself.
const std::string& BaseFault(const std::string& kind);

const std::vector<FaultKind>& Catalog();
// nullptr when `name` is no fault kind.
const FaultKind* FindFault(const std::string& name);
// "" when `kind` applies to `backend`; else why not (printed as n/a).
std::string NotApplicable(const FaultKind& kind, const std::string& backend);

// One cell: a fault kind and how it is injected.
struct CellPlan {
  std::string fault;
  int target = 1;        // the replica (0-based) that replica-side faults hit
  double hold_s = 8;     // how long the fault lasts before it is healed
  double magnitude = 0;  // delay ms, clock step s, drift rate (kind-dependent)
  // The replica faults hit the holder of the long job's run going when the fault
  // begins (long-run-* kinds), not `target`.
  bool on_long_run = false;
  std::string point;  // replica faults: "after-won" | "after-run"
  std::string Describe() const;
};

// The fixed matrix's plan of `kind` (lease in seconds: pauses are halves and twices).
CellPlan FixedPlan(const FaultKind& kind, double lease_s);
// A random plan of a fault kind applicable to `backend`, drawn from `rng`.
CellPlan RandomPlan(const std::vector<const FaultKind*>& applicable, int replicas, double lease_s,
                    std::mt19937_64& rng);

}  // namespace tickd::nemesis
