// Runs every vector in tests/data/conformance/cron/*.jsonl through tickd's engine.
//
// Each peer dialect is first translated mechanically onto a tickd dialect (field order,
// DOW numbering, TZ= prefixes, Oracle's 0-based months); then valid rows must parse
// and give the same next/prev instants, invalid rows must be rejected. A row that
// differs for a documented semantic reason is listed in conformance_exclusions.txt
// with that reason; any other difference fails the test. The test prints, per file,
// how many rows passed and how many were excluded for which reason.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cron/schedule.h"

namespace tickd::cron {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One line of conformance_exclusions.txt:
//   FILE[:LINE] [| dialect=D] [| expr=EXPR] [| tz=ZONE] | reason
struct Rule {
  std::string file;
  int line = 0;  // 0 = any line
  std::string dialect;
  std::string expr;
  std::string tz;
  std::string reason;
};

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Rule> LoadRules(const fs::path& path) {
  std::vector<Rule> rules;
  std::ifstream in(path);
  REQUIRE(in);
  std::string line;
  while (std::getline(in, line)) {
    if (Trim(line).empty() || Trim(line)[0] == '#') continue;
    std::vector<std::string> parts;
    std::size_t pos = 0;
    for (;;) {
      const auto bar = line.find(" | ", pos);
      parts.push_back(Trim(line.substr(pos, bar == std::string::npos ? bar : bar - pos)));
      if (bar == std::string::npos) break;
      pos = bar + 3;
    }
    INFO("exclusion line: " << line);
    REQUIRE(parts.size() >= 2);
    Rule r;
    r.file = parts[0];
    if (const auto colon = r.file.find(':'); colon != std::string::npos) {
      r.line = std::stoi(r.file.substr(colon + 1));
      r.file.resize(colon);
    }
    for (std::size_t i = 1; i + 1 < parts.size(); ++i) {
      if (parts[i].rfind("dialect=", 0) == 0) r.dialect = parts[i].substr(8);
      else if (parts[i].rfind("expr=", 0) == 0) r.expr = parts[i].substr(5);
      else if (parts[i].rfind("tz=", 0) == 0) r.tz = parts[i].substr(3);
      else FAIL("unknown filter in exclusion line: " << line);
    }
    r.reason = parts.back();
    rules.push_back(r);
  }
  return rules;
}

// Adds `delta` to every value number of a field (not to steps or #n), for peers whose
// numbering is shifted: Oracle months 0-11, Quartz-like DOW 1-7.
std::string Shift(const std::string& field, int delta) {
  std::string out;
  for (std::size_t i = 0; i < field.size();) {
    if (std::isdigit(static_cast<unsigned char>(field[i]))) {
      std::size_t j = i;
      while (j < field.size() && std::isdigit(static_cast<unsigned char>(field[j]))) ++j;
      const bool is_value = i == 0 || (field[i - 1] != '/' && field[i - 1] != '#');
      const int v = std::stoi(field.substr(i, j - i));
      out += std::to_string(is_value ? v + delta : v);
      i = j;
    } else {
      out += field[i++];
    }
  }
  return out;
}

std::vector<std::string> Split(const std::string& expr) {
  std::istringstream in(expr);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

std::string Join(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : " ") + f;
  return out;
}

struct Translated {
  ScheduleOptions options;
  std::string expr;
  bool supported = true;
};

// Maps a peer's (dialect, expr, tz) onto tickd's. Documented in the README beside the
// vectors; each step is a spelling difference, not a semantic one.
Translated Translate(const json& row, const std::string& expr_in) {
  Translated t;
  const std::string dialect = row.value("dialect", "");
  std::string expr = expr_in;
  if (row.contains("tz") && row["tz"].is_string()) t.options.timezone = row["tz"];
  if (dialect == "supertinycron") {
    // Its C test spells tabs as the escape "\t".
    for (std::size_t p = 0; (p = expr.find("\\t", p)) != std::string::npos;) {
      expr.replace(p, 2, "\t");
    }
  }
  if (dialect == "quartz" || dialect == "croncpp-quartz") {
    t.options.dialect = Dialect::kQuartz;
  } else if (dialect == "spring" || dialect == "ccronexpr") {
    t.options.dialect = Dialect::kSpring;
  } else if (dialect == "croniter") {
    if (row.contains("expr_secfirst") && expr_in == row["expr"].get<std::string>()) {
      expr = row["expr_secfirst"];
    }
    // croniter writes "last Friday" as L5, tickd as 5L.
    auto fields = Split(expr);
    if (fields.size() >= 5) {
      std::string& dow = fields[fields.size() == 5 ? 4 : 5];
      std::string out;
      for (std::size_t i = 0; i < dow.size(); ++i) {
        if ((dow[i] == 'L' || dow[i] == 'l') && i + 1 < dow.size() &&
            std::isdigit(static_cast<unsigned char>(dow[i + 1])) && (i == 0 || dow[i - 1] == ',')) {
          out += dow[i + 1];
          out += 'L';
          ++i;
        } else {
          out += dow[i];
        }
      }
      dow = out;
      expr = Join(fields);
    }
  } else if (dialect.rfind("robfig", 0) == 0) {
    // "TZ=Zone rest" / "CRON_TZ=Zone rest": the zone is an option in tickd.
    for (const char* prefix : {"TZ=", "CRON_TZ="}) {
      if (expr.rfind(prefix, 0) == 0) {
        const auto space = expr.find(' ');
        t.options.timezone = expr.substr(std::string(prefix).size(),
                                         space - std::string(prefix).size());
        expr = space == std::string::npos ? "" : expr.substr(space + 1);
      }
    }
    auto fields = Split(expr);
    // secondParser: DOW optional after seconds-first minute..month.
    if (dialect == "robfig-seconds" && fields.size() == 5 && expr[0] != '@') {
      fields.push_back("*");
      expr = Join(fields);
    }
    if (dialect == "robfig-custom") t.supported = false;
  } else if (dialect == "gorhill") {
    // gorhill accepts full names ("friday"); tickd the three-letter ones.
    std::string lower;
    for (char c : expr) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* day : {"sunday", "monday", "tuesday", "wednesday", "thursday", "friday",
                            "saturday"}) {
      if (const auto p = lower.find(day); p != std::string::npos) {
        expr.replace(p, std::string(day).size(), std::string(day, 3));
        lower.replace(p, std::string(day).size(), std::string(day, 3));
      }
    }
    auto fields = Split(expr);
    if (fields.size() == 6) expr = "0 " + expr;  // min..dow YEAR → sec-first 7 fields
  } else if (dialect == "croncpp-oracle") {
    auto fields = Split(expr);
    if (fields.size() >= 6) {
      fields[4] = Shift(fields[4], +1);  // months 0-11 → 1-12
      fields[5] = Shift(fields[5], -1);  // DOW 1-7 (1 = SUN) → 0-6
      expr = Join(fields);
    }
  }
  t.expr = expr;
  return t;
}

// Peers stop searching after a few years; a `next: []` row whose answer tickd finds
// beyond that horizon agrees with the peer up to its horizon.
int PeerHorizonYears(const std::string& dialect) {
  if (dialect.rfind("croncpp", 0) == 0) return 4;
  if (dialect.rfind("robfig", 0) == 0) return 5;
  if (dialect == "ccronexpr" || dialect == "supertinycron") return 4;
  if (dialect == "croniter") return 50;
  return 0;
}

struct Outcome {
  bool pass = false;
  std::string detail;
};

Outcome CheckRow(const json& row) {
  const std::string expr = row.value("expr", "");
  const Translated t = Translate(row, expr);
  const std::string shown = "[" + std::string(DialectName(t.options.dialect)) + " " +
                            t.options.timezone + "] '" + t.expr + "'";
  if (!t.supported) return {false, "peer parser configuration has no tickd equivalent"};
  auto s = Schedule::Parse(t.expr, t.options);
  if (!row.value("valid", true)) {
    if (s) return {false, shown + " parsed but the peer rejects it"};
    return {true, ""};
  }
  if (!s) return {false, shown + " rejected: " + s.error().message};

  if (row.contains("same_as")) {
    const Translated other = Translate(row, row["same_as"].get<std::string>());
    auto s2 = Schedule::Parse(other.expr, t.options);
    if (!s2) return {false, "same_as '" + other.expr + "' rejected: " + s2.error().message};
    for (const char* from : {"2012-07-01T09:53:50Z", "2024-02-28T23:59:59Z"}) {
      Instant a = *ParseRfc3339(from), b = a;
      for (int i = 0; i < 50; ++i) {
        auto na = s->Next(a), nb = s2->Next(b);
        if (na != nb) return {false, shown + " and '" + other.expr + "' differ"};
        if (!na) break;
        a = b = *na;
      }
    }
    return {true, ""};
  }

  const bool forward = row.contains("next");
  if (!forward && !row.contains("prev")) return {true, ""};  // a parse-only row
  const std::string start_text = row["start"];
  auto start = ParseRfc3339(start_text);
  if (!start) return {false, "bad start " + start_text};
  Instant at = *start;
  // A fractional start lies after its whole second: "before" includes that second.
  if (!forward && start_text.find('.') != std::string::npos) at += std::chrono::seconds(1);
  const json& want = forward ? row["next"] : row["prev"];
  for (const auto& w : want) {
    const auto expected = ParseRfc3339(w.get<std::string>());
    const auto got = forward ? s->Next(at) : s->Prev(at);
    if (!got || *got != *expected) {
      return {false, shown + (forward ? " next" : " prev") + " after " +
                         FormatRfc3339(at, s->zone()) + ": want " + w.get<std::string>() +
                         ", got " + (got ? FormatRfc3339(*got, s->zone()) : "none")};
    }
    at = *expected;
  }
  if (want.empty()) {
    const auto got = forward ? s->Next(at) : s->Prev(at);
    if (got) {
      const int horizon = PeerHorizonYears(row.value("dialect", ""));
      const auto reach = std::chrono::hours(24 * 366) * horizon;
      const bool beyond = horizon > 0 && (forward ? *got > at + reach : *got < at - reach);
      if (!beyond) {
        return {false, shown + ": want none, got " + FormatRfc3339(*got, s->zone())};
      }
    }
  }
  return {true, ""};
}

bool Matches(const Rule& r, const std::string& file, int line, const json& row) {
  if (r.file != file) return false;
  if (r.line != 0 && r.line != line) return false;
  if (!r.dialect.empty() && r.dialect != row.value("dialect", "")) return false;
  if (!r.expr.empty() && r.expr != row.value("expr", "")) return false;
  if (!r.tz.empty() && !(row.contains("tz") && row["tz"].is_string() && row["tz"] == r.tz)) {
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("conformance vectors of eight peer libraries", "[cron][conformance]") {
  const fs::path dir = fs::path(TICKD_TEST_DATA_DIR) / "conformance" / "cron";
  const auto rules =
      LoadRules(fs::path(TICKD_SOURCE_DIR) / "tests" / "cron" / "conformance_exclusions.txt");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 12);

  std::vector<bool> rule_used(rules.size(), false);
  int total_failed = 0, total_rows = 0;
  for (const auto& path : files) {
    const std::string file = path.filename().string();
    std::ifstream in(path);
    std::string text;
    int line = 0, passed = 0, failed = 0;
    std::map<std::string, int> excluded;
    while (std::getline(in, text)) {
      ++line;
      if (Trim(text).empty()) continue;
      ++total_rows;
      const json row = json::parse(text);
      const Outcome o = CheckRow(row);
      if (o.pass) {
        ++passed;
        continue;
      }
      const Rule* rule = nullptr;
      for (std::size_t i = 0; i < rules.size() && rule == nullptr; ++i) {
        if (Matches(rules[i], file, line, row)) {
          rule = &rules[i];
          rule_used[i] = true;
        }
      }
      if (rule != nullptr) {
        ++excluded[rule->reason];
        continue;
      }
      ++failed;
      std::cout << "FAIL " << file << ":" << line << " (" << row.value("source", "")
                << "): " << o.detail << "\n";
    }
    int n_excluded = 0;
    for (const auto& [reason, n] : excluded) n_excluded += n;
    std::cout << file << ": " << passed << " passed, " << n_excluded << " excluded, " << failed
              << " failed\n";
    for (const auto& [reason, n] : excluded) std::cout << "    " << n << " x " << reason << "\n";
    total_failed += failed;
  }
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (!rule_used[i]) {
      std::cout << "note: exclusion matches no failing row: " << rules[i].file << ":"
                << rules[i].line << " " << rules[i].expr << "\n";
    }
  }
  CHECK(total_rows > 2000);
  CHECK(total_failed == 0);
}

}  // namespace tickd::cron
