// nemesis_check --spec SPEC.json --journal JOURNAL.jsonl [--faults FAULTS.jsonl]
//               [--store-leases LEASES.jsonl]
//               --log REPLICA.log [--log …] [--json OUT.json]
// Runs the checks of checker.h over one cell's files; prints the counts and every
// violation with its evidence; --json also writes them as JSON. Exit status: 0 the cell
// passes, 1 it does not, 2 bad arguments or an input it cannot read (FILE:LINE: why).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/nemesis/checker/checker.h"

namespace {

constexpr const char* kUsage =
    "usage: nemesis_check --spec FILE --journal FILE [--faults FILE] [--store-leases FILE] --log "
    "FILE [--log FILE …] "
    "[--json OUT]\n"
    "(tests/nemesis/README.md, section \"Fenced resource and checker\")\n";

int Usage(const std::string& why) {
  std::fprintf(stderr, "nemesis_check: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_file, journal_file, faults_file, leases_file, json_file;
  std::vector<std::string> logs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return Usage("argument " + std::to_string(i) + " (" + arg + "): no value");
    const std::string value = argv[++i];
    if (arg == "--spec") {
      spec_file = value;
    } else if (arg == "--journal") {
      journal_file = value;
    } else if (arg == "--faults") {
      faults_file = value;
    } else if (arg == "--store-leases") {
      leases_file = value;
    } else if (arg == "--log") {
      logs.push_back(value);
    } else if (arg == "--json") {
      json_file = value;
    } else {
      return Usage("argument " + std::to_string(i - 1) + " (" + arg + "): unknown");
    }
  }
  if (spec_file.empty() || journal_file.empty()) return Usage("--spec and --journal are required");

  using namespace tickd::nemesis;
  CheckSpec spec;
  std::vector<Attempt> journal;
  std::vector<LogEvent> events;
  std::vector<FaultWindow> faults;
  std::vector<LeaseExpiry> expiries;
  std::string error;
  bool ok = LoadSpec(spec_file, &spec, &error) && LoadJournal(journal_file, &journal, &error) &&
            (faults_file.empty() || LoadFaults(faults_file, &faults, &error)) &&
            (leases_file.empty() || LoadLeaseExpiries(leases_file, &expiries, &error));
  for (const std::string& log : logs) ok = ok && LoadLog(log, &events, &error);
  if (!ok) {
    std::fprintf(stderr, "nemesis_check: %s\n", error.c_str());
    return 2;
  }
  const Report report = Check(spec, journal, events, faults, expiries);
  std::fputs(report.ToText().c_str(), stdout);
  if (!json_file.empty()) {
    std::ofstream out(json_file);
    out << report.ToJson() << '\n';
    if (!out) {
      std::fprintf(stderr, "nemesis_check: %s: cannot be written\n", json_file.c_str());
      return 2;
    }
  }
  return report.Passed() ? 0 : 1;
}
