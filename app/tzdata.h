// The tz database version in what replicas compare (DESIGN §1 rule 8, issue #13).
//
// Replicas whose tz databases differ can compute different instants for the same
// job, so each sends its version (cron::TzdataVersionInUse) with every claim, next to
// the job's config hash. It travels inside the same string, after the hash:
//     "3f9a0c1d2b4e5f60 tz=2025b"
// so that no backend's record or schema changes (all five store and hand back that
// string as it is), and a record written by an older tickd (a bare hash) reads as
// "version not recorded". Readers split it (SplitClaimHash): config-mismatch compares
// the hash parts only, tzdata-mismatch the version parts only. Older tickd replicas
// compare the whole string, so during a rolling upgrade they report config-mismatch
// against upgraded ones until every replica runs this version.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "app/log.h"

namespace tickd::app {

// What a claim carries: "<config_hash> tz=<tzdata>"; the hash alone when `tzdata`
// is empty.
std::string WithTzdata(std::string_view config_hash, std::string_view tzdata);

struct ClaimHash {
  std::string_view config;  // the job's config hash
  std::string_view tzdata;  // the replica's tz database version; "" when not recorded
};

// Splits what WithTzdata made. Tolerant: a string without " tz=" is all config hash
// (an older tickd); other " key=value" words after the hash are skipped (room for
// more without another format).
ClaimHash SplitClaimHash(std::string_view carried);

// True when `version` says something to compare: not empty, not "unknown".
bool KnownTzdata(std::string_view version);

// "node-b:2024a,node-c:2023c" — nodes with their versions, for log lines.
std::string FormatTzdataPeers(const std::map<std::string, std::string>& versions);

// The reload's second look at the tz database: the engine keeps using the version
// it started with (cron::TzdataVersionInUse), so an update on disk needs a restart.
// Check() logs `warn tzdata-changed node= tzdata=<in use> on_disk=<new>` the first
// time it is given a version on disk that differs from the one in use, once per
// such version. Not thread-safe (the signal loop calls it).
class TzdataUpdateCheck {
 public:
  explicit TzdataUpdateCheck(std::string in_use) : in_use_(std::move(in_use)) {}
  // True when it logged.
  bool Check(std::string_view on_disk, Logger& log, std::string_view node);

 private:
  const std::string in_use_;
  std::string last_on_disk_;  // the last version it warned about
};

}  // namespace tickd::app
