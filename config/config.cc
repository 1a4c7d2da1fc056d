// Loading a job file: read it safely, parse the YAML, then walk the tree once,
// turning every value into its typed field and recording every problem with its
// place (yaml-cpp marks are 0-based; messages are 1-based). Nothing stops at the
// first error: an operator fixing a file wants the whole list in one run.
//
// Order of work: file safety (owner, mode) → YAML → top-level keys → lock/http/node
// → `defaults` (parsed into a draft job) → each job (a copy of that draft with the
// job's own keys applied on top) → cross-field checks per job (name, command,
// schedule, starting deadline).
#include "config/config.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "base/duration.h"
#include "base/fnv1a.h"
#include "base/utf8.h"
#include "config/expand.h"
#include "config/suggest.h"
#include "jobs/http_call.h"
#include "jobs/output_tail.h"
#include "jobs/plugin_loader.h"

namespace tickd::config {

namespace {

namespace fs = std::filesystem;
using Keys = std::span<const std::string_view>;

// `s` in lower (upper) case: enum names, status classes (2xx) and HTTP methods are
// read case-blind.
std::string Lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
std::string Uppered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

constexpr std::string_view kTopKeys[] = {"version",  "node", "lock",
                                         "defaults", "jobs", "http",
                                         "max_concurrent_runs", "shutdown_grace"};
constexpr std::string_view kNodeKeys[] = {"id", "clock_skew_warning"};
constexpr std::string_view kLockKeys[] = {"backend",       "url",          "lease",
                                          "username",      "password_file", "password_env",
                                          "tls",           "op_timeout",    "retention",
                                          "claim_lead",    "history",       "clock_tolerance",
                                          "stop_grace",    "claim_lead_max"};
constexpr std::string_view kHistoryKeys[] = {"output", "runs"};
constexpr std::string_view kTlsKeys[] = {"ca_file", "cert_file", "key_file"};
// The backends that talk to a server, and so may authenticate; of these, the ones
// whose client library speaks TLS (Debian's hiredis and ZooKeeper C client do not).
constexpr std::string_view kNetworkBackends[] = {"redis", "etcd", "postgres", "zookeeper"};
constexpr std::string_view kTlsBackends[] = {"etcd", "postgres"};
constexpr std::string_view kHttpKeys[] = {"listen"};
constexpr std::string_view kJobKeys[] = {
    "name",     "schedule",    "shell",      "run",         "plugin",  "dialect",
    "timezone", "timeout",     "kill_grace", "env",         "workdir", "concurrency",
    "misfire",  "starting_deadline", "recover", "on_lease_lost", "retries", "dst_gap",
    "dst_overlap", "enabled", "jitter", "retry_backoff", "http", "on_failure", "on_success",
    "on_miss"};
constexpr std::string_view kRetriesKeys[] = {"attempts", "backoff"};
constexpr std::string_view kPluginKeys[] = {"path", "config", "isolation"};
constexpr std::string_view kHttpJobKeys[] = {"method", "url",     "headers",
                                             "body",   "timeout", "expect_status"};
constexpr std::string_view kHttpMethods[] = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"};
constexpr std::string_view kNotifierKeys[] = {"shell", "http", "timeout", "attempts"};
constexpr std::string_view kNotifierHttpKeys[] = {"url", "headers", "timeout"};
constexpr std::string_view kBackends[] = {"sqlite",    "redis", "etcd",  "postgres",
                                          "zookeeper", "none",  "memory"};

constexpr std::size_t kMaxNameLength = 64;
constexpr milliseconds kDefaultStartingDeadline{60'000};
// Consecutive firings looked at to find a schedule's period (the smallest gap):
// enough for any pattern within a minute or a week to show its shortest gap.
constexpr int kPeriodSamples = 16;

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};

constexpr EnumName<Concurrency> kConcurrencyNames[] = {{"forbid", Concurrency::kForbid},
                                                        {"allow", Concurrency::kAllow}};
constexpr EnumName<Misfire> kMisfireNames[] = {{"skip", Misfire::kSkip},
                                               {"run-once", Misfire::kRunOnce}};
constexpr EnumName<OnLeaseLost> kOnLeaseLostNames[] = {{"terminate", OnLeaseLost::kTerminate},
                                                       {"continue", OnLeaseLost::kContinue}};
constexpr EnumName<Isolation> kIsolationNames[] = {{"process", Isolation::kProcess},
                                                   {"none", Isolation::kNone}};
constexpr EnumName<cron::Dialect> kDialectNames[] = {{"cron", cron::Dialect::kCron},
                                                     {"quartz", cron::Dialect::kQuartz},
                                                     {"spring", cron::Dialect::kSpring}};
constexpr EnumName<cron::DstGap> kDstGapNames[] = {{"run", cron::DstGap::kRun},
                                                   {"skip", cron::DstGap::kSkip}};
constexpr EnumName<cron::DstOverlap> kDstOverlapNames[] = {
    {"auto", cron::DstOverlap::kAuto},
    {"first", cron::DstOverlap::kFirst},
    {"both", cron::DstOverlap::kBoth}};
constexpr EnumName<bool> kBoolNames[] = {{"true", true}, {"false", false}, {"yes", true},
                                         {"no", false},  {"on", true},     {"off", false}};

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string JoinNames(std::span<const std::string_view> names, std::string_view last_sep) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += (i + 1 == names.size()) ? std::string(last_sep) : std::string(", ");
    out += names[i];
  }
  return out;
}

bool IsValidEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

bool IsValidJobName(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

// One key: value pair of a mapping, with the dotted path used in messages.
struct Entry {
  std::string key;
  std::string path;   // e.g. "jobs[2].timeout"
  YAML::Mark mark;    // of the value, or of the key when the value is empty
  YAML::Node value;
};

// A job under construction: the struct plus what the checks after parsing need to
// know about where its parts came from.
struct Draft {
  Job job;
  std::vector<std::string> command_keys;  // which of shell/run/plugin/http this mapping set
  bool has_command = false;               // set here or inherited
  bool has_name = false;
  bool has_schedule = false;
  bool zone_ok = true;                    // false: timezone already reported bad
  bool deadline_on_job = false;           // starting_deadline set on the job itself
  bool jitter_on_job = false;             // jitter set on the job itself
  bool retry_backoff_set = false;         // retry_backoff here or inherited
  YAML::Mark name_mark, schedule_mark, deadline_mark, jitter_mark;
};

class Loader {
 public:
  Loader(std::string display_path, fs::path dir, const LoadOptions& options)
      : file_(std::move(display_path)), dir_(std::move(dir)), options_(options) {
    now_ = options.now ? *options.now
                       : std::chrono::time_point_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now());
  }

  void Load(const YAML::Node& root, Config& config);

  void Fail(const YAML::Mark& mark, std::string message) {
    errors_.push_back(MakeProblem(mark, std::move(message)));
  }
  void Warn(const YAML::Mark& mark, std::string message) {
    warnings_.push_back(MakeProblem(mark, std::move(message)));
  }
  std::vector<ConfigError>& errors() { return errors_; }
  std::vector<ConfigError>& warnings() { return warnings_; }

 private:
  ConfigError MakeProblem(const YAML::Mark& mark, std::string message) const {
    ConfigError e;
    e.file = file_;
    if (mark.line >= 0) {
      e.line = mark.line + 1;
      e.column = mark.column + 1;
    }
    e.message = std::move(message);
    return e;
  }

  // The pairs of a mapping, after reporting keys that are unknown (with a "did you
  // mean"), duplicated or not plain names. `hint` may add advice for an unknown key.
  std::vector<Entry> Entries(const YAML::Node& map, const std::string& prefix, Keys allowed,
                             const std::function<std::string(std::string_view)>& hint = {});
  bool RequireMap(const YAML::Node& node, const YAML::Mark& mark, const std::string& path);

  // Typed readers: each reports its own error and returns nullopt on one.
  std::optional<std::string> Text(const Entry& e, bool allow_empty = false);
  std::optional<milliseconds> Duration(const Entry& e, bool allow_zero);
  std::optional<long long> Integer(const Entry& e, long long min, long long max);
  template <typename E, std::size_t N>
  std::optional<E> Enum(const Entry& e, const EnumName<E> (&names)[N]);
  std::optional<bool> Bool(const Entry& e) { return Enum(e, kBoolNames); }

  std::optional<std::string> ExpandScalar(const YAML::Node& node, const YAML::Mark& mark,
                                          const std::string& path);
  std::optional<nlohmann::json> ToJson(const YAML::Node& node, const std::string& path);

  std::string Resolve(const std::string& raw) const {
    fs::path p(raw);
    if (p.is_relative()) p = dir_ / p;
    return p.lexically_normal().string();
  }

  void LoadLock(const std::vector<Entry>& entries, const YAML::Mark& lock_mark,
                LockSettings& lock);
  // lock.stop_grace against lock.lease and lock.op_timeout (docs/design.md §1 rule 2).
  void CheckStopGrace(const LockSettings& lock, const YAML::Mark& lock_mark,
                      const Entry* lease_entry, const Entry* stop_grace_entry,
                      const Entry* op_timeout_entry);
  void LoadTls(const Entry& e, lock::TlsFiles& tls);
  void LoadHistory(const Entry& e, HistorySettings& history);
  void CheckLockSecurity(const std::vector<Entry>& entries, const LockSettings& lock);
  // A file the daemon will read (a secret, a certificate): resolved against the job
  // file's folder, and an error naming the key unless it is a readable regular file.
  std::optional<std::string> ReadableFile(const Entry& e);
  void LoadHttp(const Entry& e, HttpSettings& http);
  void ApplyJobKeys(const YAML::Node& map, const std::string& path, bool in_defaults,
                    Draft& draft);
  void ApplyRetries(const Entry& e, Retries& retries);
  // After one mapping's keys (`defaults` or a job): the two retries forms mixed in it
  // are an error; a bare `retries: N` without any retry_backoff gets a warning that its
  // meaning changed (N retries, no longer N tries in all).
  void CheckRetryForms(const std::optional<Entry>& number, const std::optional<Entry>& older,
                       const std::optional<Entry>& backoff, const Draft& draft);
  void ApplyPlugin(const Entry& e, Job& job);
  void ApplyEnv(const Entry& e, Job& job);
  void ApplyHttpJob(const Entry& e, Job& job);
  // The keys of an `http:` mapping (of a job or a notifier) that `allowed` lets in, into
  // `spec`; a key not set leaves its field as it was. Each bad value is reported and
  // clears `ok`; a missing url is reported only while `ok` still holds.
  void HttpMapping(const Entry& e, Keys allowed, HttpJobSpec& spec, bool& ok);
  // `headers:` of an http job or notifier: a mapping of header names to values.
  std::optional<std::vector<std::pair<std::string, std::string>>> Headers(const Entry& e);
  std::optional<std::vector<StatusRange>> ExpectStatus(const Entry& e);
  std::optional<std::string> HttpUrl(const Entry& e);
  // `on_failure` & co.: an empty value switches off what `defaults` set.
  void ApplyNotifier(const Entry& e, std::optional<Notifier>& notifier);
  void FinishJob(Draft& draft, const std::string& path, const YAML::Mark& job_mark,
                 std::map<std::string, int>& names_seen);
  void CheckRetention(const LockSettings& lock);

  // Each job's shortest gap between ticks (FinishJob), for CheckRetention.
  struct JobPeriod {
    std::string path;
    YAML::Mark mark;
    milliseconds period;
  };
  std::vector<JobPeriod> periods_;

  std::string file_;
  fs::path dir_;
  LoadOptions options_;
  // Each library's check once per load: many jobs may share one, and tickd's check
  // starts a process (jobs::CheckPluginInHost).
  std::map<std::string, Result<void>> plugin_checked_;
  cron::Instant now_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
};

std::vector<Entry> Loader::Entries(const YAML::Node& map, const std::string& prefix,
                                   Keys allowed,
                                   const std::function<std::string(std::string_view)>& hint) {
  std::vector<Entry> out;
  std::map<std::string, int> seen;  // key → its line (1-based)
  for (const auto& kv : map) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      Fail(key.Mark(), (prefix.empty() ? std::string("keys") : prefix + ": keys") +
                           " must be plain names");
      continue;
    }
    Entry e;
    e.key = key.Scalar();
    e.path = prefix.empty() ? e.key : prefix + "." + e.key;
    e.value = kv.second;
    e.mark = (kv.second.IsNull() || kv.second.Mark().line < 0) ? key.Mark() : kv.second.Mark();
    if (std::find(allowed.begin(), allowed.end(), e.key) == allowed.end()) {
      std::string message = e.path + ": unknown key";
      if (e.key == "<<") {
        message += "; YAML merge keys are not supported here: put shared job keys under "
                   "'defaults'";
      } else if (auto close = ClosestMatch(e.key, allowed)) {
        message += "; did you mean " + Quoted(*close) + "?";
      } else if (std::string extra = hint ? hint(e.key) : ""; !extra.empty()) {
        message += "; " + extra;
      } else if (allowed.size() <= 8) {
        message += " (allowed: " + JoinNames(allowed, ", ") + ")";
      }
      Fail(key.Mark(), std::move(message));
      continue;
    }
    auto [it, inserted] = seen.emplace(e.key, key.Mark().line + 1);
    if (!inserted) {
      Fail(key.Mark(),
           e.path + ": duplicate key (first at line " + std::to_string(it->second) + ")");
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

bool Loader::RequireMap(const YAML::Node& node, const YAML::Mark& mark, const std::string& path) {
  if (node.IsMap()) return true;
  Fail(mark, path + ": must be a mapping (key: value lines)");
  return false;
}

std::optional<std::string> Loader::ExpandScalar(const YAML::Node& node, const YAML::Mark& mark,
                                                const std::string& path) {
  auto expanded = ExpandEnv(node.Scalar());
  if (!expanded) {
    Fail(mark, path + ": " + expanded.error().detail);
    return std::nullopt;
  }
  return *expanded;
}

std::optional<std::string> Loader::Text(const Entry& e, bool allow_empty) {
  if (e.value.IsNull()) {
    if (allow_empty) return std::string();
    Fail(e.mark, e.path + ": needs a value");
    return std::nullopt;
  }
  if (!e.value.IsScalar()) {
    Fail(e.mark, e.path + ": must be a single value, not a " +
                     (e.value.IsSequence() ? "list" : "mapping"));
    return std::nullopt;
  }
  auto text = ExpandScalar(e.value, e.mark, e.path);
  if (text && text->empty() && !allow_empty) {
    Fail(e.mark, e.path + ": must not be empty");
    return std::nullopt;
  }
  return text;
}

std::optional<milliseconds> Loader::Duration(const Entry& e, bool allow_zero) {
  auto text = Text(e);
  if (!text) return std::nullopt;
  auto d = ParseDuration(*text);
  if (!d) {
    Fail(e.mark, e.path + ": " + d.error().ToString());
    return std::nullopt;
  }
  if (!allow_zero && d->count() == 0) {
    Fail(e.mark, e.path + ": must be longer than 0s");
    return std::nullopt;
  }
  return *d;
}

std::optional<long long> Loader::Integer(const Entry& e, long long min, long long max) {
  auto text = Text(e);
  if (!text) return std::nullopt;
  long long value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size()) {
    Fail(e.mark, e.path + ": " + Quoted(*text) + " is not a whole number");
    return std::nullopt;
  }
  if (value < min || value > max) {
    Fail(e.mark, e.path + ": " + std::to_string(value) + " is out of range " +
                     std::to_string(min) + "-" + std::to_string(max));
    return std::nullopt;
  }
  return value;
}

template <typename E, std::size_t N>
std::optional<E> Loader::Enum(const Entry& e, const EnumName<E> (&names)[N]) {
  auto text = Text(e);
  if (!text) return std::nullopt;
  const std::string lower = Lowered(*text);
  for (const auto& n : names) {
    if (n.name == lower) return n.value;
  }
  std::vector<std::string_view> allowed;
  for (const auto& n : names) allowed.push_back(n.name);
  std::string message = e.path + ": " + Quoted(*text) + " is not one of " +
                        JoinNames(allowed, " or ");
  if (auto close = ClosestMatch(*text, allowed)) {
    message += "; did you mean " + Quoted(*close) + "?";
  }
  Fail(e.mark, std::move(message));
  return std::nullopt;
}

// Plain scalars keep YAML's types (numbers, booleans, null); quoted ones are strings.
std::optional<nlohmann::json> Loader::ToJson(const YAML::Node& node, const std::string& path) {
  const YAML::Mark mark = node.Mark();
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nlohmann::json(nullptr);
    case YAML::NodeType::Sequence: {
      nlohmann::json array = nlohmann::json::array();
      bool ok = true;
      for (std::size_t i = 0; i < node.size(); ++i) {
        auto item = ToJson(node[i], path + "[" + std::to_string(i) + "]");
        if (item) array.push_back(std::move(*item));
        ok = ok && item.has_value();
      }
      return ok ? std::optional<nlohmann::json>(std::move(array)) : std::nullopt;
    }
    case YAML::NodeType::Map: {
      nlohmann::json object = nlohmann::json::object();
      bool ok = true;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          Fail(kv.first.Mark(), path + ": keys must be plain names");
          ok = false;
          continue;
        }
        auto item = ToJson(kv.second, path + "." + kv.first.Scalar());
        if (item) object[kv.first.Scalar()] = std::move(*item);
        ok = ok && item.has_value();
      }
      return ok ? std::optional<nlohmann::json>(std::move(object)) : std::nullopt;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  auto text = ExpandScalar(node, mark, path);
  if (!text) return std::nullopt;
  if (node.Tag() == "!") return nlohmann::json(*text);  // quoted: always a string
  if (*text == "null" || *text == "~" || text->empty()) return nlohmann::json(nullptr);
  if (*text == "true" || *text == "false") return nlohmann::json(*text == "true");
  long long integer = 0;
  auto [int_end, int_ec] = std::from_chars(text->data(), text->data() + text->size(), integer);
  if (int_ec == std::errc() && int_end == text->data() + text->size()) {
    return nlohmann::json(integer);
  }
  double real = 0;
  auto [real_end, real_ec] = std::from_chars(text->data(), text->data() + text->size(), real);
  if (real_ec == std::errc() && real_end == text->data() + text->size()) {
    return nlohmann::json(real);
  }
  return nlohmann::json(*text);
}

void Loader::Load(const YAML::Node& root, Config& config) {
  if (!root.IsMap()) {
    Fail(root.Mark(), "the job file must be a mapping with at least 'version' and 'jobs'");
    return;
  }
  auto top_hint = [](std::string_view key) -> std::string {
    if (std::find(std::begin(kJobKeys), std::end(kJobKeys), key) != std::end(kJobKeys)) {
      return "job keys go inside a job under 'jobs', or under 'defaults'";
    }
    if (std::find(std::begin(kLockKeys), std::end(kLockKeys), key) != std::end(kLockKeys)) {
      return "did you mean 'lock." + std::string(key) + "'?";
    }
    if (std::find(std::begin(kNodeKeys), std::end(kNodeKeys), key) != std::end(kNodeKeys)) {
      return "did you mean 'node." + std::string(key) + "'?";
    }
    return "";
  };
  std::map<std::string, Entry> top;
  for (Entry& e : Entries(root, "", kTopKeys, top_hint)) top.emplace(e.key, std::move(e));
  auto find = [&top](const char* key) -> const Entry* {
    auto it = top.find(key);
    return it == top.end() ? nullptr : &it->second;
  };

  if (const Entry* e = find("version")) {
    if (auto v = Integer(*e, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())) {
      if (*v != 1) {
        Fail(e->mark, "version: " + std::to_string(*v) +
                          " is not supported (this tickd reads version 1)");
      }
      config.version = static_cast<int>(*v);
    }
  }
  if (const Entry* e = find("node"); e && RequireMap(e->value, e->mark, "node")) {
    for (const Entry& n : Entries(e->value, "node", kNodeKeys)) {
      if (n.key == "clock_skew_warning") {
        if (auto d = Duration(n, /*allow_zero=*/true)) config.clock_skew_warning = *d;
        continue;
      }
      auto id = Text(n, /*allow_empty=*/true);
      if (!id) continue;
      if (const std::string problem = NodeIdProblem(*id); !problem.empty()) {
        Fail(n.mark, "node.id: " + Quoted(*id) + " " + problem);
      } else {
        config.node_id = *id;
      }
    }
  }
  {
    const Entry* e = find("lock");
    std::vector<Entry> lock_entries;
    YAML::Mark lock_mark = YAML::Mark::null_mark();
    if (e && RequireMap(e->value, e->mark, "lock")) {
      lock_entries = Entries(e->value, "lock", kLockKeys);
      lock_mark = e->mark;
    }
    LoadLock(lock_entries, lock_mark, config.lock);
    CheckLockSecurity(lock_entries, config.lock);
  }
  if (const Entry* e = find("http"); e && RequireMap(e->value, e->mark, "http")) {
    for (const Entry& h : Entries(e->value, "http", kHttpKeys)) LoadHttp(h, config.http);
  }
  if (const Entry* e = find("max_concurrent_runs")) {
    if (auto v = Integer(*e, 1, 100'000)) config.max_concurrent_runs = static_cast<int>(*v);
  }
  if (const Entry* e = find("shutdown_grace")) {
    if (auto d = Duration(*e, /*allow_zero=*/true)) config.shutdown_grace = *d;
  }

  Draft defaults;
  defaults.job.config_dir = dir_.string();
  defaults.job.workdir = dir_.string();
  if (const Entry* e = find("defaults"); e && !e->value.IsNull()) {
    if (RequireMap(e->value, e->mark, "defaults")) {
      ApplyJobKeys(e->value, "defaults", /*in_defaults=*/true, defaults);
      if (defaults.command_keys.size() > 1) {
        Fail(e->mark, "defaults: set at most one of shell, run, plugin, http (found " +
                          JoinNames(std::vector<std::string_view>(defaults.command_keys.begin(),
                                                                  defaults.command_keys.end()),
                                    " and ") +
                          ")");
      }
    }
  }
  defaults.command_keys.clear();
  defaults.deadline_on_job = false;

  const Entry* jobs = find("jobs");
  if (jobs == nullptr) {
    Fail(root.Mark(), "jobs: missing (a list of jobs; `jobs: []` for none)");
    return;
  }
  if (jobs->value.IsNull()) return;  // `jobs:` with nothing under it: zero jobs
  if (!jobs->value.IsSequence()) {
    Fail(jobs->mark, "jobs: must be a list (each job starts with '- name: ...')");
    return;
  }
  if (jobs->value.size() == 0) Warn(jobs->mark, "jobs: the list is empty; nothing will run");
  std::map<std::string, int> names_seen;
  for (std::size_t i = 0; i < jobs->value.size(); ++i) {
    const YAML::Node node = jobs->value[i];
    const std::string path = "jobs[" + std::to_string(i) + "]";
    const YAML::Mark mark = node.Mark().line >= 0 ? node.Mark() : jobs->mark;
    if (!RequireMap(node, mark, path)) continue;
    Draft draft = defaults;
    draft.job.line = mark.line + 1;
    ApplyJobKeys(node, path, /*in_defaults=*/false, draft);
    FinishJob(draft, path, mark, names_seen);
    config.jobs.push_back(std::move(draft.job));
  }
  CheckRetention(config.lock);
}

// The ticks lock.retention keeps, against what a store holds (docs/stores.md): on etcd
// ~800 bytes of its db a job-tick with 3 replicas, even compacted, so 2 million are
// ~1.6 GB of its default 2 GiB quota; ZooKeeper keeps every znode in its heap, ~1.6 KB
// a job-tick, so a million is ~1.6 GB. Estimated from each job's shortest gap, so
// never below what is kept; one warning, naming the job that keeps the most.
void Loader::CheckRetention(const LockSettings& lock) {
  long limit = 0;
  std::string store;
  if (lock.backend == "etcd") {
    limit = 2'000'000;
    store =
        "~800 bytes of etcd's db each, near or past its default 2 GiB quota; lower "
        "lock.retention or raise --quota-backend-bytes (docs/stores.md, etcd, Size the "
        "store)";
  } else if (lock.backend == "zookeeper") {
    limit = 1'000'000;
    store =
        "and ZooKeeper keeps every znode in its heap, ~1.6 KB a job-tick with 3 "
        "replicas; give the servers the heap (-Xmx) or lower lock.retention "
        "(docs/stores.md, ZooKeeper, Sizing)";
  } else {
    return;
  }
  long total = 0;
  const JobPeriod* most = nullptr;
  long most_kept = 0;
  for (const JobPeriod& p : periods_) {
    if (p.period <= milliseconds(0)) continue;
    const long kept = static_cast<long>(lock.retention / p.period);
    total += kept;
    if (kept > most_kept) {
      most = &p;
      most_kept = kept;
    }
  }
  if (most == nullptr || total <= limit) return;
  char millions[32];
  std::snprintf(millions, sizeof(millions), "%.1f", static_cast<double>(total) / 1e6);
  Warn(most->mark, "jobs: lock.retention (" + FormatDuration(lock.retention) + ") keeps ~" +
                       millions + " million job-ticks of these schedules (the most, " + most->path +
                       ": ~" + std::to_string(most_kept) + "), " + store);
}

// A run is told to stop stop_grace before its lease's validity ends unless a renewal
// was confirmed; renewals go every lease/3. Past lease/3 the first renewal would have
// less time to be answered than the run has to stop, and a larger stop_grace comes
// before the first renewal is even sent: refused. A renewal answered only after
// op_timeout (the longest a store may take) comes after that stop: a warning, since
// only a store that slow ends runs early (the file worked before stop_grace existed).
void Loader::CheckStopGrace(const LockSettings& lock, const YAML::Mark& lock_mark,
                            const Entry* lease_entry, const Entry* stop_grace_entry,
                            const Entry* op_timeout_entry) {
  const milliseconds stop_grace = lock.stop_grace.value_or(DefaultStopGrace(lock.lease));
  if (stop_grace > lock.lease / 3) {
    Fail(stop_grace_entry != nullptr ? stop_grace_entry->mark : lock_mark,
         "lock.stop_grace: " + FormatDuration(stop_grace) + " is longer than lease/3 (" +
             FormatDuration(lock.lease / 3) +
             "): a run would be told to stop before its renewals had time to be answered");
    return;
  }
  const milliseconds stop_at = LeaseValidity(lock.lease) - stop_grace;
  if (lock.lease / 3 + lock.op_timeout > stop_at) {
    const Entry* place = op_timeout_entry != nullptr ? op_timeout_entry : lease_entry;
    Warn(place != nullptr ? place->mark : lock_mark,
         "lock.op_timeout: a renewal sent lease/3 (" + FormatDuration(lock.lease / 3) +
             ") into the lease and answered within op_timeout (" + FormatDuration(lock.op_timeout) +
             ") can come after the run is told to stop (" + FormatDuration(stop_at) +
             ": lease − 1% − 2ms − stop_grace), so a store that slow ends runs as "
             "lease-lost; lengthen lock.lease or shorten lock.op_timeout");
  }
}

void Loader::LoadLock(const std::vector<Entry>& entries, const YAML::Mark& lock_mark,
                      LockSettings& lock) {
  const Entry* url_entry = nullptr;
  const Entry* claim_lead_entry = nullptr;
  const Entry* claim_lead_max_entry = nullptr;
  const Entry* lease_entry = nullptr;
  const Entry* stop_grace_entry = nullptr;
  const Entry* op_timeout_entry = nullptr;
  bool backend_set = false;
  bool backend_ok = true;
  for (const Entry& e : entries) {
    if (e.key == "backend") {
      auto name = Text(e);
      backend_ok = false;
      if (!name) continue;
      if (std::find(std::begin(kBackends), std::end(kBackends), *name) == std::end(kBackends)) {
        std::string message = "lock.backend: " + Quoted(*name) + " is not one of " +
                              JoinNames(kBackends, " or ");
        if (auto close = ClosestMatch(*name, kBackends)) {
          message += "; did you mean " + Quoted(*close) + "?";
        }
        Fail(e.mark, std::move(message));
        continue;
      }
      lock.backend = *name;
      backend_set = true;
      backend_ok = true;
    } else if (e.key == "url") {
      if (auto url = Text(e)) {
        lock.url = *url;
        url_entry = &e;
      }
    } else if (e.key == "lease") {
      if (auto d = Duration(e, false)) {
        lock.lease = *d;
        lease_entry = &e;
      }
    } else if (e.key == "stop_grace") {
      if (auto d = Duration(e, true)) {
        lock.stop_grace = *d;
        stop_grace_entry = &e;
      }
    } else if (e.key == "op_timeout") {
      if (auto d = Duration(e, false)) {
        lock.op_timeout = *d;
        op_timeout_entry = &e;
      }
    } else if (e.key == "claim_lead") {
      if (auto d = Duration(e, true)) {
        lock.claim_lead = *d;
        claim_lead_entry = &e;
      }
    } else if (e.key == "claim_lead_max") {
      if (auto d = Duration(e, true)) {
        lock.claim_lead_max = *d;
        claim_lead_max_entry = &e;
      }
    } else if (e.key == "clock_tolerance") {
      if (auto d = Duration(e, true)) {
        lock.clock_tolerance = *d;
        if (*d > milliseconds(10'000)) Fail(e.mark, "lock.clock_tolerance: must be at most 10s");
      }
    } else if (e.key == "retention") {
      if (auto d = Duration(e, false)) lock.retention = *d;
    } else if (e.key == "username") {
      if (auto name = Text(e)) lock.username = *name;
    } else if (e.key == "password_file") {
      auto file = ReadableFile(e);
      if (!file) continue;
      lock.password_file = *file;
      // The file's content is checked here too, so that `validate` catches an empty
      // one; the content itself is not kept.
      auto password = ReadLockPassword(lock);
      if (!password) {
        Fail(e.mark, password.error());
      } else if (password->empty()) {
        Fail(e.mark, "lock.password_file: " + *file + " is empty");
      }
      struct stat st {};
      if (::stat(file->c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        Warn(e.mark, "lock.password_file: " + *file +
                         " can be read by group or others; fix: chmod 600 " + *file);
      }
    } else if (e.key == "tls") {
      LoadTls(e, lock.tls);
    } else if (e.key == "history") {
      LoadHistory(e, lock.history);
    } else if (e.key == "password_env") {
      auto name = Text(e);
      if (!name) continue;
      if (!IsValidEnvName(*name)) {
        Fail(e.mark, "lock.password_env: " + Quoted(*name) +
                         " is not an environment variable name (letters, digits, _)");
      } else {
        lock.password_env = *name;
        if (!GetEnvVar(*name)) {
          Warn(e.mark, "lock.password_env: " + *name + " is not set in this environment");
        }
      }
    }
  }
  // Below 1 s: the ticks of a job are at least a second apart, so the early claim of
  // one tick never comes before the previous tick's instant.
  if (claim_lead_entry != nullptr && lock.claim_lead >= milliseconds(1'000)) {
    Fail(claim_lead_entry->mark, "lock.claim_lead: must be shorter than 1s");
  }
  // The lease of a claim made `lead` early is lead + lease; a minute bounds both that
  // and how long a replica that dies after its claim holds the tick unrun.
  if (claim_lead_max_entry != nullptr) {
    if (lock.claim_lead_max > milliseconds(60'000)) {
      Fail(claim_lead_max_entry->mark, "lock.claim_lead_max: must be at most 60s");
    } else if (lock.claim_lead_max < lock.claim_lead) {
      Fail(claim_lead_max_entry->mark, "lock.claim_lead_max: must be at least lock.claim_lead (" +
                                           FormatDuration(lock.claim_lead) + ")");
    }
  }
  CheckStopGrace(lock, lock_mark, lease_entry, stop_grace_entry, op_timeout_entry);
  if (!backend_ok) return;

  // The scheme of the URL names the backend when `backend` is not written.
  std::string scheme;
  const std::size_t sep = lock.url.find("://");
  if (sep != std::string::npos) scheme = lock.url.substr(0, sep);
  if (scheme == "postgresql") scheme = "postgres";
  if (scheme == "rediss" || scheme == "redis-sentinel") scheme = "redis";
  const YAML::Mark url_mark = url_entry ? url_entry->mark : lock_mark;
  if (!backend_set && url_entry != nullptr && !scheme.empty() &&
      std::find(std::begin(kBackends), std::end(kBackends), scheme) != std::end(kBackends)) {
    lock.backend = scheme;
  }

  if (lock.backend == "none" || lock.backend == "memory") {
    lock.url.clear();
    if (lock.backend == "none") {
      Warn(lock_mark, "lock.backend: none runs every job on every replica (no claims)");
    }
    return;
  }
  if (lock.backend == "sqlite") {
    if (url_entry == nullptr) {
      lock.url = "sqlite://" + (dir_ / "tickd.db").string();
      return;
    }
    if (scheme != "sqlite") {
      Fail(url_mark, "lock.url: must start with sqlite:// for backend sqlite "
                     "(e.g. sqlite://./tickd.db)");
      return;
    }
    std::string rest = lock.url.substr(sep + 3);
    std::string query;
    if (const std::size_t q = rest.find('?'); q != std::string::npos) {
      query = rest.substr(q);
      rest.resize(q);
    }
    if (rest.empty()) {
      Fail(url_mark, "lock.url: names no database file (e.g. sqlite://./tickd.db)");
      return;
    }
    if (rest != ":memory:") rest = Resolve(rest);
    lock.url = "sqlite://" + rest + query;
    return;
  }
  if (url_entry == nullptr) {
    Fail(lock_mark, "lock.url: required for backend " + lock.backend + " (e.g. " + lock.backend +
                        "://host:port)");
    return;
  }
  if (scheme != lock.backend) {
    Fail(url_mark, "lock.url: must start with " + lock.backend + ":// for backend " +
                       lock.backend);
  }
}

std::optional<std::string> Loader::ReadableFile(const Entry& e) {
  auto raw = Text(e);
  if (!raw) return std::nullopt;
  const std::string file = Resolve(*raw);
  // O_NONBLOCK: opening a FIFO must not wait for a writer (a load never hangs).
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  std::string problem;
  if (fd < 0) {
    problem = std::strerror(errno);
  } else if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  }
  if (fd >= 0) ::close(fd);
  if (!problem.empty()) {
    Fail(e.mark, e.path + ": " + file + ": " + problem);
    return std::nullopt;
  }
  return file;
}

void Loader::LoadTls(const Entry& e, lock::TlsFiles& tls) {
  tls.enabled = true;
  if (e.value.IsNull()) return;  // `tls:` or `tls: {}`: the system's CAs, no client certificate
  if (!RequireMap(e.value, e.mark, e.path)) return;
  const Entry* cert = nullptr;
  const Entry* key = nullptr;
  const std::vector<Entry> entries = Entries(e.value, e.path, kTlsKeys);
  for (const Entry& t : entries) {
    auto file = ReadableFile(t);
    if (t.key == "ca_file") {
      if (file) tls.ca_file = *file;
    } else if (t.key == "cert_file") {
      cert = &t;
      if (file) tls.cert_file = *file;
    } else {
      key = &t;
      if (!file) continue;
      tls.key_file = *file;
      struct stat st {};
      if (::stat(file->c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        Warn(t.mark, t.path + ": " + *file + " can be read by group or others (libpq refuses "
                     "such a key); fix: chmod 600 " + *file);
      }
    }
  }
  if ((cert == nullptr) != (key == nullptr)) {
    Fail(cert ? cert->mark : key->mark,
         e.path + ": cert_file and key_file go together (the client certificate and its key)");
  }
}

namespace {

// "16KB", "16KiB", "16K", "512B", "512": bytes (K = 1024, as du and ls count).
std::optional<std::size_t> ParseByteSize(std::string_view text) {
  std::size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  const std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
  if (unit.empty() || unit == "B") return value;
  if (unit == "K" || unit == "KB" || unit == "KiB") {
    if (value > (SIZE_MAX >> 10)) return std::nullopt;
    return value << 10;
  }
  return std::nullopt;
}

}  // namespace

// Sized so that one run's output, and a batch of completes split by size, stay within
// every store's request limit (etcd 1.5 MiB, ZooKeeper's jute.maxbuffer 1 MB).
void Loader::LoadHistory(const Entry& e, HistorySettings& history) {
  if (!RequireMap(e.value, e.mark, e.path)) return;
  for (const Entry& h : Entries(e.value, e.path, kHistoryKeys)) {
    if (h.key == "runs") {
      if (auto n = Integer(h, 1, 10'000)) history.runs = static_cast<int>(*n);
      continue;
    }
    auto text = Text(h);
    if (!text) continue;
    const std::optional<std::size_t> bytes = ParseByteSize(*text);
    if (!bytes) {
      Fail(h.mark, h.path + ": " + Quoted(*text) + " is not a size (e.g. 16KB, 512B, 0)");
    } else if (*bytes != 0 && (*bytes < 1024 || *bytes > jobs::kMaxOutputTailBytes)) {
      Fail(h.mark, h.path + ": " + Quoted(*text) +
                       " is out of range: 0 (keep nothing) or 1KB-64KB");
    } else {
      history.output_bytes = *bytes;
    }
  }
}

namespace {

// The user and the password written in a URL's userinfo (scheme://user:password@host),
// or in a `password=` parameter (libpq).
struct UrlCredentials {
  std::string user;
  std::optional<std::string> password;
};

UrlCredentials CredentialsInUrl(std::string_view url) {
  UrlCredentials out;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return out;
  const std::string_view rest = url.substr(scheme_end + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    const auto colon = userinfo.find(':');
    out.user = std::string(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) out.password = std::string(userinfo.substr(colon + 1));
  }
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (param.rfind("password=", 0) == 0) out.password = std::string(param.substr(9));
    }
  }
  return out;
}

}  // namespace

// After LoadLock: the checks that need the backend and several keys at once. A
// password never appears in a message.
void Loader::CheckLockSecurity(const std::vector<Entry>& entries, const LockSettings& lock) {
  auto entry = [&entries](std::string_view key) -> const Entry* {
    for (const Entry& e : entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  };
  const bool network = std::find(std::begin(kNetworkBackends), std::end(kNetworkBackends),
                                 lock.backend) != std::end(kNetworkBackends);
  if (!network) {
    for (std::string_view key : {"username", "password_file", "tls"}) {
      if (const Entry* e = entry(key)) {
        Warn(e->mark, e->path + ": ignored: backend " + lock.backend + " has no server");
      }
    }
    return;
  }
  if (const Entry* e = entry("tls");
      e && std::find(std::begin(kTlsBackends), std::end(kTlsBackends), lock.backend) ==
               std::end(kTlsBackends)) {
    Fail(e->mark, lock.backend == "redis"
                      ? "lock.tls: Debian's hiredis is built without TLS; run stunnel on this "
                        "host in front of the server's TLS port and point lock.url at it "
                        "(docs/stores.md: Securing the store)"
                      : "lock.tls: not available for " + lock.backend +
                            " (Debian's ZooKeeper C client has no TLS); restrict the "
                            "ensemble's network and use digest authentication");
  }
  const Entry* file = entry("password_file");
  const Entry* env = entry("password_env");
  if (const Entry* user = entry("username");
      user && lock.backend == "etcd" && !lock.tls.enabled) {
    Warn(user->mark, "lock.username: without lock.tls the etcd password and token cross the "
                     "network in clear");
  }
  if (file && env) {
    Fail(file->mark, "lock.password_file: set one of password_file and password_env, not both");
  }
  const UrlCredentials in_url = CredentialsInUrl(lock.url);
  const Entry* url = entry("url");
  if (const Entry* user = entry("username");
      user && !in_url.user.empty() && in_url.user != lock.username) {
    Fail(user->mark, "lock.username: '" + lock.username + "' differs from the URL's user '" +
                         in_url.user + "'; keep one");
  }
  if (in_url.password && url != nullptr) {
    if (file || env) {
      Warn(url->mark, "lock.url: its password wins over lock." +
                          std::string(file ? "password_file" : "password_env"));
    }
    // Written in the file itself rather than expanded from ${VAR}: anyone who can read
    // the job file can read the password.
    if (CredentialsInUrl(url->value.Scalar()).password.value_or("").find("${") ==
        std::string::npos) {
      Warn(url->mark, "lock.url: holds a password in clear; prefer lock.password_file or "
                      "lock.password_env (tickd prints it as ***)");
    }
  }
}

void Loader::LoadHttp(const Entry& e, HttpSettings& http) {
  auto listen = Text(e, /*allow_empty=*/true);
  if (!listen || listen->empty()) return;
  std::string host;
  std::string port = *listen;
  if (const std::size_t colon = listen->rfind(':'); colon != std::string::npos) {
    host = listen->substr(0, colon);
    port = listen->substr(colon + 1);
  }
  int port_number = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), port_number);
  if (ec != std::errc() || end != port.data() + port.size() || port_number < 1 ||
      port_number > 65535) {
    Fail(e.mark, "http.listen: " + Quoted(*listen) +
                     " needs a port 1-65535 (e.g. 127.0.0.1:9464 or :9464)");
    return;
  }
  if (host.empty()) host = "127.0.0.1";  // loopback unless an address is given
  http.listen = host + ":" + port;
}

void Loader::ApplyJobKeys(const YAML::Node& map, const std::string& path, bool in_defaults,
                          Draft& draft) {
  Job& job = draft.job;
  std::optional<Entry> retries_number, retries_older, retry_backoff;  // CheckRetryForms
  for (const Entry& e : Entries(map, path, kJobKeys)) {
    const std::string& k = e.key;
    if (k == "shell" || k == "run" || k == "plugin" || k == "http") {
      // The job's own command replaces whatever `defaults` gave it.
      if (draft.command_keys.empty()) {
        job.shell.reset();
        job.argv.clear();
        job.plugin.reset();
        job.http.reset();
      }
      draft.command_keys.push_back(k);
      draft.has_command = true;
    }
    if (k == "name") {
      if (in_defaults) {
        Fail(e.mark, e.path + ": a job name cannot have a default");
        continue;
      }
      if (auto v = Text(e)) {
        job.name = *v;
        draft.has_name = true;
        draft.name_mark = e.mark;
      }
    } else if (k == "schedule") {
      if (auto v = Text(e)) {
        job.schedule_text = *v;
        draft.has_schedule = true;
        draft.schedule_mark = e.mark;
      }
    } else if (k == "shell") {
      if (auto v = Text(e)) job.shell = *v;
    } else if (k == "run") {
      if (e.value.IsScalar()) {
        Fail(e.mark, e.path + ": takes a list (argv, no shell), e.g. [/usr/bin/report, --day, "
                              "yesterday]; use shell: for a command line");
        continue;
      }
      if (!e.value.IsSequence() || e.value.size() == 0) {
        Fail(e.mark, e.path + ": must be a non-empty list (argv)");
        continue;
      }
      for (std::size_t i = 0; i < e.value.size(); ++i) {
        Entry arg{e.key, e.path + "[" + std::to_string(i) + "]",
                  e.value[i].Mark().line >= 0 ? e.value[i].Mark() : e.mark, e.value[i]};
        if (auto v = Text(arg, /*allow_empty=*/i > 0)) job.argv.push_back(*v);
      }
    } else if (k == "plugin") {
      ApplyPlugin(e, job);
    } else if (k == "http") {
      ApplyHttpJob(e, job);
    } else if (k == "on_failure") {
      ApplyNotifier(e, job.on_failure);
    } else if (k == "on_success") {
      ApplyNotifier(e, job.on_success);
    } else if (k == "on_miss") {
      ApplyNotifier(e, job.on_miss);
    } else if (k == "dialect") {
      if (auto v = Enum(e, kDialectNames)) job.schedule_options.dialect = *v;
    } else if (k == "timezone") {
      if (auto v = Text(e)) {
        draft.zone_ok = cron::FindZone(*v) != nullptr;
        if (draft.zone_ok) {
          job.schedule_options.timezone = *v;
        } else {
          Fail(e.mark, e.path + ": unknown time zone " + Quoted(*v) +
                           " (an IANA name such as UTC or Europe/Berlin)");
        }
      } else {
        draft.zone_ok = false;
      }
    } else if (k == "timeout") {
      if (auto v = Duration(e, false)) job.timeout = *v;
    } else if (k == "kill_grace") {
      if (auto v = Duration(e, true)) job.kill_grace = *v;
    } else if (k == "env") {
      ApplyEnv(e, job);
    } else if (k == "workdir") {
      if (auto v = Text(e)) {
        job.workdir = Resolve(*v);
        std::error_code ec;
        if (!fs::is_directory(job.workdir, ec)) {
          Warn(e.mark, e.path + ": " + job.workdir + " is not a directory (yet)");
        }
      }
    } else if (k == "concurrency") {
      if (auto v = Enum(e, kConcurrencyNames)) job.concurrency = *v;
    } else if (k == "misfire") {
      if (auto v = Enum(e, kMisfireNames)) job.misfire = *v;
    } else if (k == "starting_deadline") {
      if (auto v = Duration(e, false)) {
        job.starting_deadline = *v;
        draft.deadline_on_job = !in_defaults;
        draft.deadline_mark = e.mark;
      }
    } else if (k == "recover") {
      if (auto v = Bool(e)) job.recover = *v;
    } else if (k == "on_lease_lost") {
      if (auto v = Enum(e, kOnLeaseLostNames)) job.on_lease_lost = *v;
    } else if (k == "retries") {
      (e.value.IsMap() ? retries_older : retries_number) = e;
      ApplyRetries(e, job.retries);
    } else if (k == "retry_backoff") {
      retry_backoff = e;
      if (auto v = Duration(e, true)) {
        job.retries.backoff = *v;
        job.retries.doubling = true;
        draft.retry_backoff_set = true;
      }
    } else if (k == "dst_gap") {
      if (auto v = Enum(e, kDstGapNames)) job.schedule_options.dst_gap = *v;
    } else if (k == "dst_overlap") {
      if (auto v = Enum(e, kDstOverlapNames)) job.schedule_options.dst_overlap = *v;
    } else if (k == "enabled") {
      if (auto v = Bool(e)) job.enabled = *v;
    } else if (k == "jitter") {
      if (auto v = Duration(e, true)) {
        job.jitter = *v;
        draft.jitter_on_job = !in_defaults;
        draft.jitter_mark = e.mark;
      }
    }
  }
  CheckRetryForms(retries_number, retries_older, retry_backoff, draft);
}

void Loader::ApplyRetries(const Entry& e, Retries& retries) {
  constexpr long long kMaxAttempts = 1'000;
  if (e.value.IsScalar()) {  // `retries: 3` = 3 retries after the first try, 4 in all
    if (auto v = Integer(e, 0, kMaxAttempts - 1)) {
      retries.attempts = static_cast<int>(*v) + 1;
      retries.doubling = true;
    }
    return;
  }
  if (!e.value.IsMap()) {
    Fail(e.mark, e.path + ": must be a number of retries (retries: 3, with retry_backoff: 10s) "
                          "or {attempts: N, backoff: 10s}");
    return;
  }
  // The older form: `attempts` tries in all, `backoff` before each retry (no doubling).
  retries.doubling = false;
  for (const Entry& r : Entries(e.value, e.path, kRetriesKeys)) {
    if (r.key == "attempts") {
      if (auto v = Integer(r, 1, kMaxAttempts)) retries.attempts = static_cast<int>(*v);
    } else if (auto d = Duration(r, true)) {
      retries.backoff = *d;
    }
  }
}

void Loader::CheckRetryForms(const std::optional<Entry>& number, const std::optional<Entry>& older,
                             const std::optional<Entry>& backoff, const Draft& draft) {
  if (older && backoff) {
    Fail(backoff->mark, backoff->path + ": cannot be combined with the older form " +
                            older->path + ": {attempts, backoff}; write " + older->path +
                            ": N (N retries after the first try) and " + backoff->path +
                            ": D instead");
    return;
  }
  if (number && !draft.retry_backoff_set && draft.job.retries.attempts > 1) {
    const int n = draft.job.retries.attempts - 1;
    Warn(number->mark, number->path + ": " + std::to_string(n) + " means " + std::to_string(n) +
                           " retries after the first try (" + std::to_string(n + 1) +
                           " tries in all; tickd before retry_backoff existed read it as " +
                           std::to_string(n) + " tries in all): add retry_backoff (e.g. " +
                           "retry_backoff: 1s) to confirm, or write {attempts: " +
                           std::to_string(n) + "} for the old meaning");
  }
}

void Loader::ApplyPlugin(const Entry& e, Job& job) {
  PluginSpec spec;
  std::optional<std::string> raw_path;
  YAML::Mark path_mark = e.mark;
  if (e.value.IsScalar()) {  // `plugin: ./libx.so` is short for {path: ./libx.so}
    raw_path = Text(e);
    if (!raw_path) return;
  } else if (!e.value.IsMap()) {
    Fail(e.mark, e.path + ": must be {path: ..., config: ..., isolation: process|none}");
    return;
  } else {
    bool ok = true;
    for (const Entry& p : Entries(e.value, e.path, kPluginKeys)) {
      if (p.key == "path") {
        raw_path = Text(p);
        path_mark = p.mark;
        ok = ok && raw_path.has_value();
      } else if (p.key == "config") {
        auto json = ToJson(p.value, p.path);
        if (json && !json->is_null()) spec.config_json = json->dump();
        ok = ok && json.has_value();
      } else if (auto v = Enum(p, kIsolationNames)) {
        spec.isolation = *v;
      } else {
        ok = false;
      }
    }
    if (!ok) return;
    if (!raw_path) {
      Fail(e.mark, e.path + ": missing 'path' (the plugin's shared library)");
      return;
    }
  }
  spec.path = Resolve(*raw_path);
  if (options_.check_plugins) {
    struct stat st {};
    if (::stat(spec.path.c_str(), &st) != 0) {
      Fail(path_mark, e.path + ": " + spec.path + ": " + std::strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
      Fail(path_mark, e.path + ": " + spec.path + " is not a regular file");
    } else {
      // dlopen + symbol + ABI, where options_.plugin_check makes them.
      auto [checked, first] = plugin_checked_.try_emplace(spec.path);
      if (first) {
        checked->second =
            jobs::CheckPluginFile(spec.path, options_.check_permissions, options_.plugin_check);
      }
      if (!checked->second) Fail(path_mark, e.path + ": " + checked->second.error().ToString());
    }
  }
  job.plugin = std::move(spec);
}

void Loader::ApplyEnv(const Entry& e, Job& job) {
  if (e.value.IsNull()) return;
  if (!RequireMap(e.value, e.mark, e.path)) return;
  for (const auto& kv : e.value) {
    const YAML::Node& key = kv.first;
    const std::string name = key.IsScalar() ? key.Scalar() : "";
    const std::string path = e.path + "." + name;
    if (!IsValidEnvName(name)) {
      Fail(key.Mark(), path + ": not an environment variable name (letters, digits, _)");
      continue;
    }
    if (name.rfind("TICKD_", 0) == 0) {
      Fail(key.Mark(), path + ": TICKD_* variables are set by tickd itself");
      continue;
    }
    Entry value{name, path, kv.second.IsNull() ? key.Mark() : kv.second.Mark(), kv.second};
    if (auto v = Text(value, /*allow_empty=*/true)) job.env[name] = *v;  // overrides defaults
  }
}

std::optional<std::string> Loader::HttpUrl(const Entry& e) {
  auto url = Text(e);
  if (!url) return std::nullopt;
  if (!jobs::IsHttpUrl(*url)) {
    Fail(e.mark, e.path + ": " + Quoted(*url) + " is not an http:// or https:// URL");
    return std::nullopt;
  }
  return url;
}

std::optional<std::vector<std::pair<std::string, std::string>>> Loader::Headers(const Entry& e) {
  std::vector<std::pair<std::string, std::string>> out;
  if (e.value.IsNull()) return out;
  if (!RequireMap(e.value, e.mark, e.path)) return std::nullopt;
  bool ok = true;
  for (const auto& kv : e.value) {
    const YAML::Node& key = kv.first;
    const std::string name = key.IsScalar() ? key.Scalar() : "";
    const std::string path = e.path + "." + name;
    // RFC 9110 token characters; no ':' or spaces, so a name cannot smuggle a header.
    const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) ||
             std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
    if (!token) {
      Fail(key.Mark(), path + ": not an HTTP header name (letters, digits, '-' and the like)");
      ok = false;
      continue;
    }
    Entry value{name, path, kv.second.IsNull() ? key.Mark() : kv.second.Mark(), kv.second};
    auto v = Text(value, /*allow_empty=*/true);
    if (!v) {
      ok = false;
      continue;
    }
    // Never echo the value: it may be a secret expanded from the environment.
    if (v->find_first_of("\r\n") != std::string::npos) {
      Fail(value.mark, path + ": a header value cannot hold a line break");
      ok = false;
      continue;
    }
    out.emplace_back(name, *v);
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::vector<StatusRange>> Loader::ExpectStatus(const Entry& e) {
  std::vector<Entry> items;
  if (e.value.IsSequence()) {
    if (e.value.size() == 0) {
      Fail(e.mark, e.path + ": must list at least one status");
      return std::nullopt;
    }
    for (std::size_t i = 0; i < e.value.size(); ++i) {
      items.push_back(Entry{e.key, e.path + "[" + std::to_string(i) + "]",
                            e.value[i].Mark().line >= 0 ? e.value[i].Mark() : e.mark, e.value[i]});
    }
  } else {
    items.push_back(e);
  }
  std::vector<StatusRange> out;
  bool ok = true;
  for (const Entry& item : items) {
    auto text = Text(item);
    if (!text) {
      ok = false;
      continue;
    }
    const std::string t = Lowered(*text);
    int first = 0;
    int last = 0;
    if (t.size() == 3 && t[0] >= '1' && t[0] <= '5' && t[1] == 'x' && t[2] == 'x') {
      first = (t[0] - '0') * 100;
      last = first + 99;
    } else {
      int code = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), code);
      if (ec == std::errc() && end == t.data() + t.size() && code >= 100 && code <= 599) {
        first = last = code;
      }
    }
    if (first == 0) {
      Fail(item.mark, item.path + ": " + Quoted(*text) +
                          " is not an HTTP status (100-599) or a class such as 2xx");
      ok = false;
      continue;
    }
    out.emplace_back(first, last);
  }
  if (!ok) return std::nullopt;
  return out;
}

void Loader::ApplyHttpJob(const Entry& e, Job& job) {
  if (!e.value.IsMap()) {
    Fail(e.mark, e.path + ": must be {url: ..., method: GET, headers: {...}, body: ..., "
                          "timeout: 30s, expect_status: 2xx}");
    return;
  }
  HttpJobSpec spec;
  bool ok = true;
  HttpMapping(e, kHttpJobKeys, spec, ok);
  if (ok && spec.method == "HEAD" && !spec.body.empty()) {
    Fail(e.mark, e.path + ".body: a HEAD request has no body");
    ok = false;
  }
  if (ok) job.http = std::move(spec);
}

void Loader::HttpMapping(const Entry& e, Keys allowed, HttpJobSpec& spec, bool& ok) {
  bool has_url = false;
  for (const Entry& h : Entries(e.value, e.path, allowed)) {
    if (h.key == "url") {
      auto url = HttpUrl(h);
      if (url) spec.url = *url;
      has_url = url.has_value();
      ok = ok && has_url;
    } else if (h.key == "method") {
      auto m = Text(h);
      if (!m) {
        ok = false;
        continue;
      }
      const std::string upper = Uppered(*m);
      if (std::find(std::begin(kHttpMethods), std::end(kHttpMethods), upper) ==
          std::end(kHttpMethods)) {
        Fail(h.mark,
             h.path + ": " + Quoted(*m) + " is not one of " + JoinNames(kHttpMethods, " or "));
        ok = false;
        continue;
      }
      spec.method = upper;
    } else if (h.key == "headers") {
      auto headers = Headers(h);
      if (headers) spec.headers = std::move(*headers);
      ok = ok && headers.has_value();
    } else if (h.key == "body") {
      auto body = Text(h, /*allow_empty=*/true);
      if (body) spec.body = *body;
      ok = ok && body.has_value();
    } else if (h.key == "timeout") {
      auto d = Duration(h, false);
      if (d) spec.timeout = *d;
      ok = ok && d.has_value();
    } else if (h.key == "expect_status") {
      auto expect = ExpectStatus(h);
      if (expect) spec.expect_status = std::move(*expect);
      ok = ok && expect.has_value();
    }
  }
  if (!has_url && ok) {
    Fail(e.mark, e.path + ": missing 'url'");
    ok = false;
  }
}

void Loader::ApplyNotifier(const Entry& e, std::optional<Notifier>& notifier) {
  if (e.value.IsNull() || (e.value.IsScalar() && e.value.Scalar().empty())) {
    notifier.reset();  // `on_failure:` with nothing: none, whatever defaults say
    return;
  }
  Notifier n;
  if (e.value.IsScalar()) {  // `on_failure: cmd` is short for {shell: cmd}
    auto cmd = Text(e);
    if (!cmd) return;
    n.shell = *cmd;
    notifier = std::move(n);
    return;
  }
  if (!e.value.IsMap()) {
    Fail(e.mark, e.path + ": must be a shell command, {shell: ...} or {http: {url: ...}}");
    return;
  }
  bool ok = true;
  int targets = 0;
  for (const Entry& f : Entries(e.value, e.path, kNotifierKeys)) {
    if (f.key == "shell") {
      ++targets;
      auto cmd = Text(f);
      if (cmd) n.shell = *cmd;
      ok = ok && cmd.has_value();
    } else if (f.key == "http") {
      ++targets;
      if (f.value.IsScalar()) {  // `http: URL` is short for {url: URL}
        auto url = HttpUrl(f);
        if (url) n.url = *url;
        ok = ok && url.has_value();
        continue;
      }
      if (!f.value.IsMap()) {
        Fail(f.mark, f.path + ": must be a URL or {url: ..., headers: {...}, timeout: 5s}");
        ok = false;
        continue;
      }
      // The request part of a notifier: url, headers and timeout. The timeout starts as
      // the notifier's, so a mapping without one keeps it (not HttpJobSpec's 30 s).
      HttpJobSpec request;
      request.timeout = n.timeout;
      HttpMapping(f, kNotifierHttpKeys, request, ok);
      n.url = std::move(request.url);
      n.headers = std::move(request.headers);
      n.timeout = request.timeout;
    } else if (f.key == "timeout") {
      auto d = Duration(f, false);
      if (d) n.timeout = *d;
      ok = ok && d.has_value();
    } else if (f.key == "attempts") {
      auto v = Integer(f, 1, 10);
      if (v) n.attempts = static_cast<int>(*v);
      ok = ok && v.has_value();
    }
  }
  if (ok && targets != 1) {
    Fail(e.mark, e.path + (targets == 0 ? ": missing the target: set shell or http"
                                        : ": set exactly one of shell, http"));
    ok = false;
  }
  if (ok) notifier = std::move(n);
}

void Loader::FinishJob(Draft& draft, const std::string& path, const YAML::Mark& job_mark,
                       std::map<std::string, int>& names_seen) {
  Job& job = draft.job;
  if (!draft.has_name) {
    Fail(job_mark, path + ": missing 'name'");
  } else if (job.name.size() > kMaxNameLength || !IsValidJobName(job.name)) {
    Fail(draft.name_mark, path + ".name: " + Quoted(job.name) +
                              " must be 1-64 characters of a-z, 0-9, '.', '_', '-'");
  } else if (job.name.starts_with("lock.")) {
    // libtickd's try_lock(key) claims ticks of the job "lock.<key>" (design §1 "Locks"):
    // a job of that name would share them.
    Fail(draft.name_mark, path + ".name: " + Quoted(job.name) +
                              " is reserved: names starting with 'lock.' are libtickd's locks");
  } else if (auto [it, inserted] = names_seen.emplace(job.name, draft.name_mark.line + 1);
             !inserted) {
    Fail(draft.name_mark, path + ".name: duplicate job name " + Quoted(job.name) +
                              " (first at line " + std::to_string(it->second) + ")");
  }

  if (draft.command_keys.size() > 1) {
    std::vector<std::string_view> found(draft.command_keys.begin(), draft.command_keys.end());
    Fail(job_mark, path + ": set exactly one of shell, run, plugin, http (found " +
                       JoinNames(found, " and ") + ")");
  } else if (!draft.has_command) {
    Fail(job_mark, path + ": missing the command: set one of shell, run, plugin, http");
  }

  std::optional<milliseconds> period;
  if (!draft.has_schedule) {
    Fail(job_mark, path + ": missing 'schedule'");
  } else if (draft.zone_ok) {
    job.schedule_options.job_name = job.name;  // what `H` hashes
    auto schedule = cron::Schedule::Parse(job.schedule_text, job.schedule_options);
    if (!schedule) {
      Fail(draft.schedule_mark, path + ".schedule: " + schedule.error().message);
    } else {
      for (const std::string& w : schedule->WarningsAt(now_)) {
        Warn(draft.schedule_mark, path + ".schedule: " + w);
      }
      if (auto every = schedule->every()) {
        period = *every;
      } else {
        std::optional<cron::Instant> previous = schedule->Next(now_);
        for (int i = 0; previous && i < kPeriodSamples; ++i) {
          std::optional<cron::Instant> next = schedule->Next(*previous);
          if (!next) break;
          const milliseconds gap = *next - *previous;
          if (!period || gap < *period) period = gap;
          previous = next;
        }
      }
    }
  }

  if (period && job.enabled) periods_.push_back(JobPeriod{path, draft.schedule_mark, *period});

  // DESIGN §1 rule 7: the deadline is never more than the period, or a late tick
  // could start after the next one is already due. Written on the job itself, a
  // longer value is a mistake worth an error; inherited from `defaults` (which
  // serve jobs of every period) it is clamped.
  if (!job.starting_deadline) {
    job.starting_deadline = period ? std::min(kDefaultStartingDeadline, *period)
                                   : kDefaultStartingDeadline;
  } else if (period && *job.starting_deadline > *period) {
    if (draft.deadline_on_job) {
      Fail(draft.deadline_mark,
           path + ".starting_deadline: " + FormatDuration(*job.starting_deadline) +
               " is longer than the schedule's period (" + FormatDuration(*period) +
               "); use at most " + FormatDuration(*period));
    } else {
      job.starting_deadline = *period;
    }
  }

  // A tick due at T + jitter must still be startable: the claim's deadline counts
  // from T (the claim key), so jitter has to stay below it. Not clamped even when
  // inherited: a quietly shortened jitter would bunch the load it was set to spread.
  if (job.jitter > milliseconds(0) && job.jitter >= *job.starting_deadline) {
    Fail(draft.jitter_mark,
         path + ".jitter: " + FormatDuration(job.jitter) +
             (draft.jitter_on_job ? "" : " (from defaults)") +
             " must be shorter than the job's starting_deadline (" +
             FormatDuration(*job.starting_deadline) + ")");
  }
}

// FNV-1a, 64 bit: tiny, stable across platforms and builds, good enough to tell
// two job definitions apart (this is a change detector, not a security boundary).
class Fnv1a {
 public:
  // Length-prefixed, so ("ab","c") and ("a","bc") hash differently.
  void Field(std::string_view tag, std::string_view value) {
    Bytes(tag);
    Bytes(std::to_string(value.size()));
    Bytes(":");
    Bytes(value);
    Bytes(";");
  }
  void Field(std::string_view tag, long long value) { Field(tag, std::to_string(value)); }
  std::string Hex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 0; i < 16; ++i) out[15 - i] = kDigits[(hash_ >> (4 * i)) & 0xf];
    return out;
  }

 private:
  void Bytes(std::string_view s) { hash_ = Fnv1a64(s, hash_); }
  std::uint64_t hash_ = kFnv1aOffsetBasis;
};

}  // namespace

std::string Job::ConfigHash() const {
  // Paths below the job file's folder are hashed relative to it.
  auto relative = [this](const std::string& p) {
    if (!config_dir.empty() && p.rfind(config_dir + "/", 0) == 0) {
      return "./" + p.substr(config_dir.size() + 1);
    }
    return p == config_dir ? std::string(".") : p;
  };
  Fnv1a h;
  h.Field("v", 1);  // the serialization's version: bump when fields are added
  h.Field("name", name);
  h.Field("schedule", schedule_text);
  h.Field("dialect", static_cast<long long>(schedule_options.dialect));
  h.Field("timezone", schedule_options.timezone);
  h.Field("dst_gap", static_cast<long long>(schedule_options.dst_gap));
  h.Field("dst_overlap", static_cast<long long>(schedule_options.dst_overlap));
  if (shell) h.Field("shell", *shell);
  h.Field("argc", static_cast<long long>(argv.size()));
  for (const std::string& a : argv) h.Field("arg", a);
  if (plugin) {
    h.Field("plugin.path", relative(plugin->path));
    h.Field("plugin.config", plugin->config_json);
    h.Field("plugin.isolation", static_cast<long long>(plugin->isolation));
  }
  if (http) {
    // Header names only: a value may be a secret, and a rotated token must not make
    // the replicas report config-mismatch.
    h.Field("http.method", http->method);
    h.Field("http.url", http->url);
    for (const auto& header : http->headers) h.Field("http.header", header.first);
    h.Field("http.body", http->body);
    h.Field("http.timeout", http->timeout.count());
    for (const auto& [lo, hi] : http->expect_status) {
      h.Field("http.expect", static_cast<long long>(lo) * 1000 + hi);
    }
  }
  h.Field("timeout", timeout.count());
  h.Field("kill_grace", kill_grace.count());
  for (const auto& [k, v] : env) h.Field("env." + k, v);  // std::map: sorted
  h.Field("workdir", relative(workdir));
  h.Field("concurrency", static_cast<long long>(concurrency));
  h.Field("misfire", static_cast<long long>(misfire));
  h.Field("starting_deadline", starting_deadline ? starting_deadline->count() : -1);
  h.Field("recover", recover ? 1 : 0);
  h.Field("on_lease_lost", static_cast<long long>(on_lease_lost));
  h.Field("retries.attempts", retries.attempts);
  h.Field("retries.backoff", retries.backoff.count());
  // Only when set, so that a job in the older form keeps the hash it had before.
  if (retries.doubling) h.Field("retries.doubling", 1);
  h.Field("enabled", enabled ? 1 : 0);
  // Only when set, so that a job without jitter keeps the hash it had before jitter
  // existed (replicas of two versions do not report config-mismatch for it).
  if (jitter > milliseconds(0)) h.Field("jitter", jitter.count());
  return h.Hex();
}

std::string NodeIdProblem(std::string_view id) {
  const bool printable = std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return c > ' ' && c != 0x7f && c != '"' && c != '=';
  });
  if (printable && id.size() <= 128 && IsValidUtf8(id)) return "";
  return "must be at most 128 characters of UTF-8 text without spaces, quotes or '='";
}

milliseconds LeaseValidity(milliseconds lease) { return lease - lease / 100 - milliseconds(2); }

milliseconds DefaultStopGrace(milliseconds lease) { return lease / 5; }

milliseconds Retries::BackoffBefore(int attempt) const {
  if (!doubling || attempt <= 2) return backoff;
  const milliseconds cap = std::max(backoff, kMaxDoubledBackoff);
  milliseconds wait = backoff;
  for (int i = 2; i < attempt && wait < cap; ++i) wait *= 2;
  return std::min(wait, cap);
}

tl::expected<std::string, std::string> ReadLockPassword(const LockSettings& lock) {
  if (!lock.password_file.empty()) {
    const int fd = ::open(lock.password_file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st {};
    if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
      ::close(fd);
      return tl::unexpected("lock.password_file: " + lock.password_file +
                            ": not a regular file");
    }
    if (fd < 0) {
      return tl::unexpected("lock.password_file: " + lock.password_file + ": " +
                            std::strerror(errno));
    }
    std::string password;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0 && password.size() < 65536) {
      password.append(buffer, n);
    }
    const int read_errno = errno;
    ::close(fd);
    if (n < 0) {
      return tl::unexpected("lock.password_file: " + lock.password_file + ": " +
                            std::strerror(read_errno));
    }
    // `echo secret > file` writes a newline that is not part of the password.
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
      password.pop_back();
    }
    return password;
  }
  if (!lock.password_env.empty()) return GetEnvVar(lock.password_env).value_or("");
  return std::string();
}

std::string ConfigError::ToString() const {
  if (line <= 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

namespace {

using Loaded = tl::expected<Config, std::vector<ConfigError>>;

// One error about the whole file (no place).
tl::unexpected<std::vector<ConfigError>> FileError(const std::string& path, std::string message) {
  return tl::unexpected(std::vector<ConfigError>{ConfigError{path, 0, 0, std::move(message)}});
}

// The job file's absolute, normalized path (config.path; its folder is what relative
// paths in the file resolve against).
tl::expected<fs::path, std::vector<ConfigError>> AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  if (ec) return FileError(path, "cannot resolve the path: " + ec.message());
  return absolute;
}

// Keeps the place of the first node of a document (an event handler of yaml-cpp's
// parser: the events say where each node starts; nothing is built).
class FirstNode : public YAML::EventHandler {
 public:
  const std::optional<YAML::Mark>& mark() const { return mark_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Saw(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Saw(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Saw(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Saw(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Saw(mark);
  }
  void OnMapEnd() override {}

 private:
  void Saw(const YAML::Mark& mark) {
    if (!mark_) mark_ = mark;
  }
  std::optional<YAML::Mark> mark_;
};

// Where the stream's second document starts, if it has one. Not YAML::LoadAll: the
// yaml-cpp of Debian bookworm (0.7) reports documents forever after some syntax errors
// (a stray ',': jbeder/yaml-cpp#1040, fixed upstream by #1319), so LoadAll never
// returns and fills the memory; the parser is asked for two documents at most.
// Throws YAML::ParserException for a syntax error in either.
std::optional<YAML::Mark> SecondDocument(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstNode first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  FirstNode second;
  if (!parser.HandleNextDocument(second)) return std::nullopt;
  return second.mark() ? second.mark() : YAML::Mark::null_mark();
}

// The first character of `text` outside comments, blanks and document markers
// ('---', '...'); nullopt when there is none (the file is empty for YAML).
std::optional<YAML::Mark> FirstContent(const std::string& text) {
  YAML::Mark mark;
  mark.line = 0;
  mark.column = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool line_start = mark.column == 0;
    if (c == '\n') {
      ++mark.line;
      mark.column = 0;
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (line_start && (text.compare(i, 3, "---") == 0 || text.compare(i, 3, "...") == 0)) {
      i += 2;
      mark.column += 3;
      continue;
    }
    if (c != ' ' && c != '\t' && c != '\r') {
      mark.pos = static_cast<int>(i);
      return mark;
    }
    ++mark.column;
  }
  return std::nullopt;
}

// Everything after reading: YAML, the tree walk, the cross-field checks. `path` is
// the file as the user named it (for messages).
Loaded LoadText(const std::string& text, const std::string& path, const fs::path& absolute,
                const LoadOptions& options) {
  Loader loader(path, absolute.parent_path(), options);
  Config config;
  config.path = absolute.string();
  try {
    const YAML::Node root = YAML::Load(text);
    if (root.IsNull()) {
      // A file of stray punctuation (a lone ',') also loads as null: say where it is.
      const std::optional<YAML::Mark> stray = FirstContent(text);
      if (!stray) {
        return FileError(path, "the file is empty (it needs at least 'version: 1' and 'jobs:')");
      }
      loader.Fail(*stray,
                  "the job file must be a mapping with 'version: 1' and 'jobs:', found only '" +
                      std::string(1, text[stray->pos]) + "'");
      return tl::unexpected(std::move(loader.errors()));
    }
    if (const auto second = SecondDocument(text)) {
      loader.Fail(*second, "only one YAML document is allowed (remove the '---')");
    }
    loader.Load(root, config);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file".
    loader.Fail(e.mark, "YAML syntax error: nested too deep (" + std::to_string(e.depth()) +
                            " levels of lists or mappings)");
  } catch (const YAML::ParserException& e) {
    loader.Fail(e.mark, "YAML syntax error: " + e.msg);
  } catch (const std::exception& e) {
    loader.Fail(YAML::Mark::null_mark(), std::string("cannot load: ") + e.what());
  }
  // In file order, whatever order the checks ran in (lines without a place first).
  auto by_place = [](const ConfigError& a, const ConfigError& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  };
  std::stable_sort(loader.errors().begin(), loader.errors().end(), by_place);
  std::stable_sort(loader.warnings().begin(), loader.warnings().end(), by_place);
  if (!loader.errors().empty()) return tl::unexpected(std::move(loader.errors()));
  config.warnings = std::move(loader.warnings());
  return config;
}

}  // namespace

Loaded LoadConfig(const std::string& path, const LoadOptions& options) {
  auto fail = [&path](std::string message) { return FileError(path, std::move(message)); };
  const auto absolute_or = AbsolutePath(path);
  if (!absolute_or) return tl::unexpected(absolute_or.error());
  const fs::path& absolute = *absolute_or;

  // Open first and check the open file (fstat), so the file checked is the file read.
  const int fd = ::open(absolute.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  std::string text;
  std::vector<ConfigError> refusals;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  // A job file runs commands as this daemon's user: like cron and sshd, refuse one
  // that someone else could have written.
  if (options.check_permissions) {
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      refusals.push_back({path, 0, 0,
                          std::string("refused: writable by group or others (mode ") + mode +
                              "), and tickd runs the commands in it; fix: chmod go-w " + path});
    }
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
      const passwd* me = ::getpwuid(::geteuid());
      const std::string user = me ? me->pw_name : std::to_string(::geteuid());
      refusals.push_back({path, 0, 0,
                          "refused: owned by uid " + std::to_string(st.st_uid) +
                              ", neither root nor the user running tickd (" + user +
                              "); fix: chown " + user + " " + path});
    }
  }
  if (refusals.empty()) {
    char buffer[65536];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, n);
    if (n < 0) {
      refusals.push_back({path, 0, 0, std::string("cannot read: ") + std::strerror(errno)});
    }
  }
  ::close(fd);
  if (!refusals.empty()) return tl::unexpected(std::move(refusals));

  return LoadText(text, path, absolute, options);
}

Loaded LoadConfigFromString(const std::string& text, const std::string& path,
                            const LoadOptions& options) {
  const auto absolute = AbsolutePath(path);
  if (!absolute) return tl::unexpected(absolute.error());
  return LoadText(text, path, *absolute, options);
}

}  // namespace tickd::config
