// One cell of the nemesis: a fresh store of one backend, the fenced resource, N
// `tickd run` replicas, a warm-up, one fault injected, held, healed, a settle period;
// then the fault window written and the checker run over the cell's ticks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/nemesis/driver/catalog.h"
#include "tests/nemesis/driver/check.h"

namespace tickd::nemesis {

struct Binaries {
  std::string resource;  // nemesis_resource
  std::string write;     // nemesis_write
};

struct CellOptions {
  int replicas = 3;
  double lease_s = 3;
  double warmup_s = 6;
  double settle_s = 8;
  bool keep = false;             // keep the cell's folder
  bool plant_duplicate = false;  // append a second accepted write (the checker must fail)
  Binaries bin;
};

struct CellResult {
  std::string backend;
  CellPlan plan;
  // "ran" | "n/a" (the fault does not apply) | "skipped" (cannot run here) | "error"
  std::string status;
  std::string why;  // for n/a, skipped, error
  int injected = 0;
  std::string evidence;
  CheckOutput check;
  std::string dir;
  double seconds = 0;
};

// The jobs every cell runs.
const std::vector<JobPlan>& NemesisJobs();

CellResult RunCell(const std::string& backend, const CellPlan& plan, const CellOptions& options);

}  // namespace tickd::nemesis
