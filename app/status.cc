#include "app/status.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "app/log.h"
#include "app/scheduled_job.h"
#include "app/tzdata.h"
#include "jobs/output_tail.h"

namespace tickd::app {

using std::chrono::milliseconds;

namespace {

std::int64_t WallMs(WallTime t) { return t.time_since_epoch().count(); }

// Free text from the store (a pause's author and reason) on one line of the operator's
// terminal: as written, or logfmt-quoted when it holds a control character (a newline
// would break the table, an escape sequence would reach the terminal).
std::string OneLine(const std::string& text) {
  const bool plain = std::none_of(text.begin(), text.end(), [](unsigned char c) {
    return c < ' ' || c == 0x7f;
  });
  return plain ? text : LogfmtValue(text);
}

// A line a job printed, for the operator's terminal: control characters but tab as
// \xNN (systemctl's cescape), so that an escape sequence in a job's output (colours,
// a cursor move, a title set) reaches no terminal; `--json` keeps them as printed.
std::string Printable(const std::string& line) {
  std::string out;
  out.reserve(line.size());
  for (const unsigned char c : line) {
    if ((c < ' ' && c != '\t') || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Milliseconds as "+0.003s" / "-1.250s": a replica's try relative to T.
std::string SignedSeconds(milliseconds d) {
  return (d.count() < 0 ? "-" : "+") + FormatSeconds(milliseconds(std::abs(d.count())));
}

// The first 8 characters of the config hash part of what a claim carried.
std::string ShortHash(const std::string& carried) {
  return std::string(SplitClaimHash(carried).config.substr(0, 8));
}

// The outcome column: the run's outcome once done, else the record's state, else
// what the replicas saw (missed, error …) when nobody won.
std::string TickOutcome(const lock::TickHistory& t) {
  if (!t.run_outcome.empty()) return t.run_outcome;
  if (!t.state.empty()) return t.state;
  std::string seen;
  for (const lock::Observation& o : t.observations) {
    if (seen.find(o.outcome) == std::string::npos) seen += (seen.empty() ? "" : "/") + o.outcome;
  }
  return seen.empty() ? "-" : seen;
}

// The fields a tick has in both /api/status (`ticks`) and /api/runs (`runs`); each
// endpoint adds its own. (nlohmann::json sorts keys, so the order here is not the output's.)
nlohmann::json TickJson(const lock::TickHistory& t) {
  using nlohmann::json;
  return {{"tick", FormatTick(t.tick_unix)},
          {"tick_unix", t.tick_unix},
          {"winner", t.winner},
          {"fence", t.fence},
          {"state", t.state},
          {"outcome", TickOutcome(t)},
          {"exit_code", t.exit_code ? json(*t.exit_code) : json(nullptr)},
          {"duration_seconds", static_cast<double>(t.duration.count()) / 1000.0}};
}

const char* OutcomeColor(std::string_view outcome) {
  if (outcome == "done") return "\033[32m";
  if (outcome == "running") return "\033[33m";
  if (outcome == "released" || outcome == "missed" || outcome == "skipped") return "\033[90m";
  return "\033[31m";  // failed timeout lease-lost killed error
}

struct Table {
  std::vector<std::vector<std::string>> rows;    // plain text, for the widths
  std::vector<std::vector<std::string>> colors;  // per cell: "" or an ANSI start sequence

  std::string Render(const std::string& indent, bool color) const {
    std::vector<std::size_t> width;
    for (const auto& row : rows) {
      width.resize(std::max(width.size(), row.size()), 0);
      for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    std::string out;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::string line = indent;
      for (std::size_t i = 0; i < rows[r].size(); ++i) {
        const std::string& cell = rows[r][i];
        const std::string& start = colors[r][i];
        const bool last = i + 1 == rows[r].size();
        if (color && !start.empty()) {
          line += start + cell + "\033[0m";
        } else {
          line += cell;
        }
        if (!last) line += std::string(width[i] - cell.size() + 2, ' ');
      }
      out += line + "\n";
    }
    return out;
  }
};

// Every node that tried one of the ticks, by name, with its newest observation's tz
// database version, and the lead of its newest instant of the jobs without jitter
// (`jittered`: those with it; their claims are sent before T + the offset, not T).
std::vector<ReplicaStatus> Replicas(const std::vector<JobStatus>& jobs,
                                    const std::set<std::string>& jittered) {
  std::map<std::string, ReplicaStatus> by_node;
  std::map<std::string, std::int64_t> lead_tick;  // per node: the tick its lead is of
  for (const JobStatus& js : jobs) {
    for (const lock::TickHistory& t : js.ticks) {
      for (const lock::Observation& o : t.observations) {
        auto [it, fresh] = by_node.try_emplace(o.node);
        if (fresh || o.tick_unix >= it->second.last_tick) {
          it->second.node = o.node;
          it->second.tzdata = std::string(SplitClaimHash(o.config_hash).tzdata);
          it->second.last_tick = o.tick_unix;
        }
        if (jittered.contains(js.name)) continue;
        const milliseconds lead =
            std::max(milliseconds(0), WallTime(std::chrono::seconds(o.tick_unix)) - o.node_wall);
        auto [tick, first] = lead_tick.try_emplace(o.node, o.tick_unix);
        if (first || o.tick_unix > tick->second) {
          tick->second = o.tick_unix;
          it->second.lead = lead;
        } else if (o.tick_unix == tick->second) {
          it->second.lead = std::max(it->second.lead.value_or(lead), lead);
        }
      }
    }
  }
  std::vector<ReplicaStatus> out;
  out.reserve(by_node.size());
  for (auto& [node, r] : by_node) out.push_back(std::move(r));
  return out;
}

}  // namespace

std::optional<milliseconds> TickSkew(const lock::TickHistory& tick) {
  if (tick.observations.size() < 2) return std::nullopt;
  auto [lo, hi] = std::minmax_element(tick.observations.begin(), tick.observations.end(),
                                      [](const lock::Observation& a, const lock::Observation& b) {
                                        return a.node_wall < b.node_wall;
                                      });
  return hi->node_wall - lo->node_wall;
}

std::vector<std::string> Losers(const lock::TickHistory& tick) {
  std::vector<std::string> out;
  for (const lock::Observation& o : tick.observations) {
    if (o.node != tick.winner && (o.outcome == "lost" || o.outcome == "busy")) {
      out.push_back(o.node);
    }
  }
  return out;
}

bool ConfigMismatch(const lock::TickHistory& tick) {
  // The hash parts only (app/tzdata.h); the tz database version is TzdataMismatch's.
  const std::string_view winner = SplitClaimHash(tick.config_hash).config;
  std::string_view first;
  for (const lock::Observation& o : tick.observations) {
    const std::string_view hash = SplitClaimHash(o.config_hash).config;
    if (hash.empty()) continue;
    if (!winner.empty() && hash != winner) return true;
    if (first.empty()) first = hash;
    if (hash != first) return true;
  }
  return false;
}

std::vector<std::string> TzdataVersions(const lock::TickHistory& tick) {
  std::set<std::string, std::less<>> versions;
  for (const lock::Observation& o : tick.observations) {
    const std::string_view v = SplitClaimHash(o.config_hash).tzdata;
    if (KnownTzdata(v)) versions.emplace(v);
  }
  const std::string_view winner = SplitClaimHash(tick.config_hash).tzdata;
  if (KnownTzdata(winner)) versions.emplace(winner);
  return {versions.begin(), versions.end()};
}

bool TzdataMismatch(const lock::TickHistory& tick) { return TzdataVersions(tick).size() > 1; }

bool TzdataMismatch(const StatusReport& report) {
  std::set<std::string_view> versions;
  for (const ReplicaStatus& r : report.replicas) {
    if (KnownTzdata(r.tzdata)) versions.insert(r.tzdata);
  }
  return versions.size() > 1;
}

Result<StatusReport> CollectStatus(const std::vector<config::Job>& jobs, lock::Backend& backend,
                                   WallTime now, std::string_view only_job, int last) {
  StatusReport report;
  report.generated = now;
  report.backend = std::string(backend.name());
  const std::int64_t now_s = WallMs(now) / 1000;
  Result<std::vector<lock::Pause>> pauses = backend.ListPauses();
  if (!pauses) return tl::unexpected(pauses.error());
  for (const config::Job& job : jobs) {
    if (!only_job.empty() && job.name != only_job) continue;
    JobStatus js;
    js.name = job.name;
    js.schedule = job.schedule_text;
    js.timezone = job.schedule_options.timezone;
    js.enabled = job.enabled;
    if (job.enabled) {
      if (auto scheduled = MakeScheduledJob(job); scheduled && (*scheduled)->next) {
        js.next_tick = (*scheduled)->next(now_s);
        if (js.next_tick && job.jitter > milliseconds(0)) {
          js.next_due_ms = (*scheduled)->DueMs(*js.next_tick);
        }
      }
    }
    for (const lock::Pause& p : *pauses) {
      // A job's own pause first: it is the one `tickd resume JOB` ends.
      if (lock::PauseHolds(p, job.name, now) && (!js.paused || p.job == job.name)) js.paused = p;
    }
    Result<std::vector<lock::TickHistory>> history = backend.History(job.name, last);
    if (!history) return tl::unexpected(history.error());
    js.ticks = std::move(*history);
    report.jobs.push_back(std::move(js));
  }
  if (!only_job.empty() && report.jobs.empty()) {
    return MakeError("job", "no job named " + std::string(only_job) + " in the job file");
  }
  std::set<std::string> jittered;
  for (const config::Job& job : jobs) {
    if (job.jitter > milliseconds(0)) jittered.insert(job.name);
  }
  report.replicas = Replicas(report.jobs, jittered);
  return report;
}

Result<RunsReport> CollectRuns(const std::vector<config::Job>& jobs, lock::Backend& backend,
                               WallTime now, std::string_view job, int limit) {
  if (std::none_of(jobs.begin(), jobs.end(), [&](const config::Job& j) { return j.name == job; })) {
    return MakeError("job", "no job named " + std::string(job) + " in the job file");
  }
  RunsReport report;
  report.generated = now;
  report.backend = std::string(backend.name());
  report.job = std::string(job);
  Result<std::vector<lock::TickHistory>> history = backend.History(job, 4 * limit);
  if (!history) return tl::unexpected(history.error());
  std::vector<std::int64_t> ticks;
  for (lock::TickHistory& t : *history) {
    if (t.winner.empty()) continue;
    if (static_cast<int>(report.runs.size()) >= limit) break;
    ticks.push_back(t.tick_unix);
    report.runs.push_back(std::move(t));
  }
  Result<std::vector<std::string>> outputs = backend.Outputs(job, ticks);
  if (!outputs) return tl::unexpected(outputs.error());
  for (std::size_t i = 0; i < report.runs.size() && i < outputs->size(); ++i) {
    report.runs[i].output = std::move((*outputs)[i]);
  }
  return report;
}

std::string FormatRunsText(const RunsReport& report, bool color) {
  const auto paint = [color](const char* start, const std::string& text) {
    return color ? start + text + "\033[0m" : text;
  };
  std::string out;
  if (report.runs.empty()) return report.job + ": no runs recorded\n";
  for (const lock::TickHistory& t : report.runs) {
    const std::string outcome = TickOutcome(t);
    out += paint("\033[1m", report.job + "  " + FormatTick(t.tick_unix)) +
           "  winner=" + t.winner + "  fence=" + std::to_string(t.fence) +
           "  outcome=" + paint(OutcomeColor(outcome), outcome) +
           "  exit=" + (t.exit_code ? std::to_string(*t.exit_code) : "-") +
           "  duration=" + (t.state == "done" ? FormatSeconds(t.duration) : "-") + "\n";
    const std::vector<jobs::OutputLine> lines = jobs::ParseOutputTail(t.output);
    if (lines.empty()) {
      out += t.state == "done" ? "  (no output kept)\n" : "  (still running)\n";
    }
    for (const jobs::OutputLine& l : lines) {
      // The stream in a fixed-width column, so the lines themselves stay aligned.
      const std::string text = Printable(l.text);
      if (l.stream == "tickd") {
        out += "  " + paint("\033[90m", "...     [" + text + "]") + "\n";
      } else if (l.stream == "stderr") {
        out += "  " + paint("\033[31m", "stderr") + "  " + text + "\n";
      } else if (l.stream == "http") {
        out += "  http    " + text + "\n";
      } else {
        out += "  stdout  " + text + "\n";
      }
    }
    out += "\n";
  }
  return out;
}

std::string FormatRunsJson(const RunsReport& report) {
  using nlohmann::json;
  json runs = json::array();
  for (const lock::TickHistory& t : report.runs) {
    json output = json::array();
    for (const jobs::OutputLine& l : jobs::ParseOutputTail(t.output)) {
      output.push_back({{"stream", l.stream}, {"line", l.text}});
    }
    json run = TickJson(t);
    run["output"] = std::move(output);
    runs.push_back(std::move(run));
  }
  json root = {{"generated", FormatTimestamp(report.generated)},
               {"backend", report.backend},
               {"job", report.job},
               {"runs", std::move(runs)}};
  // Outputs are valid UTF-8 as tickd stores them; a store edited by hand may not be.
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

bool UseColor(bool terminal, const char* no_color) {
  return terminal && (no_color == nullptr || *no_color == '\0');
}

std::string FormatStatusText(const StatusReport& report, bool color) {
  const std::int64_t now_ms = WallMs(report.generated);
  std::string out;
  if (!report.replicas.empty()) {
    // Per replica the tz database it claims with; different ones compute different
    // ticks for zones whose rules changed between them.
    const bool mismatch = TzdataMismatch(report);
    out += color ? "\033[1mreplicas\033[0m" : "replicas";
    for (const ReplicaStatus& r : report.replicas) {
      out += "  " + r.node + " tzdata=" + (r.tzdata.empty() ? "-" : r.tzdata);
      if (r.lead) out += " lead=" + FormatSeconds(*r.lead);
    }
    if (mismatch) out += color ? "  \033[31mTZDATA MISMATCH\033[0m" : "  TZDATA MISMATCH";
    out += "\n\n";
  }
  for (const JobStatus& js : report.jobs) {
    std::string head = color ? "\033[1m" + js.name + "\033[0m" : js.name;
    head += "  schedule=\"" + js.schedule + "\"  zone=" + js.timezone + "  next=";
    if (!js.enabled) {
      head += "disabled";
    } else if (js.next_tick) {
      head += FormatTick(*js.next_tick) + " (in " +
              FormatSeconds(milliseconds(*js.next_tick * 1000 - now_ms)) + ")";
      if (js.next_due_ms) {
        head += "  due=" + FormatTimestamp(WallTime(milliseconds(*js.next_due_ms)));
      }
    } else {
      head += "none";
    }
    if (js.paused) {
      std::string paused = "PAUSED by " + OneLine(js.paused->by);
      if (js.paused->job == lock::kAllJobs) paused += " (every job)";
      if (js.paused->until) paused += " until " + FormatTimestamp(*js.paused->until);
      if (!js.paused->reason.empty()) paused += ": " + OneLine(js.paused->reason);
      head += "  " + (color ? "\033[33m" + paused + "\033[0m" : paused);
    }
    out += head + "\n";
    if (js.ticks.empty()) {
      out += "  no ticks recorded\n\n";
      continue;
    }
    Table table;
    table.rows.push_back({"TICK", "WINNER", "OUTCOME", "EXIT", "DURATION", "FENCE", "LOST", "SKEW",
                          "CONFIG", "TZDATA", "TRIED (node offset-from-T outcome)"});
    table.colors.emplace_back(table.rows.back().size(), color ? "\033[1m" : "");
    for (const lock::TickHistory& t : js.ticks) {
      const std::string outcome = TickOutcome(t);
      std::vector<std::string> losers = Losers(t);
      std::string lost;
      for (const std::string& l : losers) lost += (lost.empty() ? "" : ",") + l;
      const std::optional<milliseconds> skew = TickSkew(t);
      const bool mismatch = ConfigMismatch(t);
      const std::vector<std::string> tzdata = TzdataVersions(t);
      std::string tzdata_cell;
      for (const std::string& v : tzdata) tzdata_cell += (tzdata_cell.empty() ? "" : "/") + v;
      std::string tried;
      for (const lock::Observation& o : t.observations) {
        tried += (tried.empty() ? "" : " ") + o.node + " " +
                 SignedSeconds(o.node_wall - WallTime(std::chrono::seconds(t.tick_unix))) + " " +
                 o.outcome;
      }
      table.rows.push_back(
          {FormatTick(t.tick_unix), t.winner.empty() ? "-" : t.winner, outcome,
           t.exit_code ? std::to_string(*t.exit_code) : "-",
           t.state == "done" ? FormatSeconds(t.duration) : "-",
           t.fence ? std::to_string(t.fence) : "-", lost.empty() ? "-" : lost,
           skew ? FormatSeconds(*skew) : "-",
           (t.config_hash.empty() ? "-" : ShortHash(t.config_hash)) + (mismatch ? " MISMATCH" : ""),
           (tzdata_cell.empty() ? "-" : tzdata_cell) + (tzdata.size() > 1 ? " MISMATCH" : ""),
           tried.empty() ? "-" : tried});
      std::vector<std::string> colors(table.rows.back().size());
      colors[2] = OutcomeColor(outcome);
      if (skew && *skew >= milliseconds(1000)) colors[7] = "\033[31m";
      if (mismatch) colors[8] = "\033[31m";
      if (tzdata.size() > 1) colors[9] = "\033[31m";
      table.colors.push_back(std::move(colors));
    }
    out += table.Render("  ", color) + "\n";
  }
  return out;
}

std::string FormatStatusJson(const StatusReport& report) {
  using nlohmann::json;
  json jobs = json::array();
  for (const JobStatus& js : report.jobs) {
    json ticks = json::array();
    for (const lock::TickHistory& t : js.ticks) {
      json observations = json::array();
      for (const lock::Observation& o : t.observations) {
        observations.push_back(
            {{"node", o.node},
             {"outcome", o.outcome},
             {"wall", FormatTimestamp(o.node_wall)},
             {"offset_seconds",
              static_cast<double>(WallMs(o.node_wall) - t.tick_unix * 1000) / 1000.0},
             {"config_hash", SplitClaimHash(o.config_hash).config},
             {"tzdata", SplitClaimHash(o.config_hash).tzdata},
             {"fence", o.fence}});
      }
      const std::optional<milliseconds> skew = TickSkew(t);
      json tick = TickJson(t);
      tick.update({{"config_hash", SplitClaimHash(t.config_hash).config},
                   {"config_mismatch", ConfigMismatch(t)},
                   {"tzdata", SplitClaimHash(t.config_hash).tzdata},
                   {"tzdata_versions", TzdataVersions(t)},
                   {"tzdata_mismatch", TzdataMismatch(t)},
                   {"losers", Losers(t)},
                   {"skew_seconds",
                    skew ? json(static_cast<double>(skew->count()) / 1000.0) : json(nullptr)},
                   {"observations", std::move(observations)}});
      ticks.push_back(std::move(tick));
    }
    json paused = nullptr;
    if (js.paused) {
      paused = {
          {"all", js.paused->job == lock::kAllJobs},
          {"by", js.paused->by},
          {"since", FormatTimestamp(js.paused->since)},
          {"until", js.paused->until ? json(FormatTimestamp(*js.paused->until)) : json(nullptr)},
          {"reason", js.paused->reason}};
    }
    jobs.push_back({{"name", js.name},
                    {"schedule", js.schedule},
                    {"timezone", js.timezone},
                    {"enabled", js.enabled},
                    {"paused", std::move(paused)},
                    {"next_tick", js.next_tick ? json(FormatTick(*js.next_tick)) : json(nullptr)},
                    {"next_tick_unix", js.next_tick ? json(*js.next_tick) : json(nullptr)},
                    {"next_due",
                     js.next_due_ms ? json(FormatTimestamp(WallTime(milliseconds(*js.next_due_ms))))
                                    : json(nullptr)},
                    {"next_due_unix_ms", js.next_due_ms ? json(*js.next_due_ms) : json(nullptr)},
                    {"ticks", std::move(ticks)}});
  }
  json replicas = json::array();
  for (const ReplicaStatus& r : report.replicas) {
    replicas.push_back(
        {{"node", r.node},
         {"tzdata", r.tzdata},
         {"last_tick", FormatTick(r.last_tick)},
         {"lead_seconds",
          r.lead ? json(static_cast<double>(r.lead->count()) / 1000.0) : json(nullptr)}});
  }
  json root = {{"generated", FormatTimestamp(report.generated)},
               {"backend", report.backend},
               {"replicas", std::move(replicas)},
               {"tzdata_mismatch", TzdataMismatch(report)},
               {"jobs", std::move(jobs)}};
  // What the store holds may be any bytes (a pause's reason written by an older tickd).
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace tickd::app
