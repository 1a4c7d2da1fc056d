// The daemon's log lines (docs/design.md §6): one line per event, an event name and
// ordered key=value fields, formatted once as logfmt or JSON.
//
//   2026-11-21T14:00:00.003Z info tick job=cleanup tick=2026-11-21T14:00:00Z node=a outcome=won
//   fence=42
//   {"ts":"2026-11-21T14:00:00.003Z","level":"info","event":"tick","job":"cleanup",…,"fence":42}
//
// Events go to stdout (so `tickd run | …` works); each line is written with a single
// write(2), so lines of several replicas sharing a terminal or a pipe never interleave
// mid-line. Secrets are the caller's job at the edge: URLs pass through
// lock::RedactUrl, job environment values through MaskEnvValue.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/clock.h"

namespace tickd::app {

enum class LogLevel { kDebug, kInfo, kWarn, kError };
enum class LogFormat { kLogfmt, kJson };

std::optional<LogLevel> LogLevelFromName(std::string_view name);    // debug info warn error
std::optional<LogFormat> LogFormatFromName(std::string_view name);  // logfmt json
std::string_view LogLevelName(LogLevel level);

// One key=value of a line. Integers stay numbers in JSON; everything else is a string.
struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Field(std::string_view k, T v)
      : key(k), value(std::to_string(v)), number(true) {}

  std::string key;
  std::string value;
  bool number = false;
};

// logfmt value: bare when it has no space, quote, '=', backslash or control
// character and is not empty; otherwise quoted with \" \\ \n \r \t \u00XX escapes.
std::string LogfmtValue(std::string_view value);
// A JSON string literal, quotes included.
std::string JsonString(std::string_view value);
// "2026-11-21T14:00:00.003Z" (UTC, milliseconds).
std::string FormatTimestamp(WallTime t);
// "2026-11-21T14:00:00Z" (UTC, seconds): how ticks appear in logs and TICKD_TICK.
std::string FormatTick(std::int64_t tick_unix);
// "0.509s": durations in log lines, seconds with millisecond precision.
std::string FormatSeconds(std::chrono::milliseconds d);
// "+30.012s" / "-0.250s": a clock's offset to another, signed.
std::string FormatOffset(std::chrono::milliseconds d);
// True for environment keys whose values are secrets (…_PASSWORD, …_SECRET, …_TOKEN).
bool IsSecretEnvKey(std::string_view key);
// The value to show for an environment variable: "***" for secrets, else the value.
std::string MaskEnvValue(std::string_view key, std::string_view value);

// The whole line, newline included.
std::string FormatLine(LogFormat format, WallTime ts, LogLevel level, std::string_view event,
                       std::span<const Field> fields);

// Thread-safe. Lines below the configured level are dropped before formatting.
class Logger {
 public:
  // Receives each finished line (newline included); called once per line, under the
  // logger's lock, so a writer needs no locking of its own.
  using Writer = std::function<void(std::string_view line)>;

  Logger(Clock& clock, LogFormat format, LogLevel level, Writer writer);
  ~Logger();

  // A writer that sends each line to `fd` with one write(2) (through an spdlog sink).
  static Writer FdWriter(int fd);

  bool Enabled(LogLevel level) const { return level >= level_; }
  void Log(LogLevel level, std::string_view event, std::span<const Field> fields);
  void Log(LogLevel level, std::string_view event, std::initializer_list<Field> fields) {
    Log(level, event, std::span<const Field>(fields.begin(), fields.size()));
  }

 private:
  Clock& clock_;
  LogFormat format_;
  LogLevel level_;
  Writer writer_;
  std::mutex mu_;
};

}  // namespace tickd::app
