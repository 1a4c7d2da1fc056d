#include "app/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "base/utf8.h"

namespace tickd::app {

namespace {

using std::chrono::milliseconds;

// Sends each formatted message to a file descriptor with one write(2) so lines from
// several threads and processes stay whole.
class FdSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FdSink(int fd) : fd_(fd) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const char* p = msg.payload.data();
    std::size_t left = msg.payload.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // nowhere left to report a failing log stream
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  void flush_() override {}

 private:
  int fd_;
};

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (std::size_t i = 0; i < v.size();) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) return true;
    const std::size_t n = Utf8Length(v.substr(i));  // 1 for ASCII
    if (n == 0) return true;  // not UTF-8: written escaped (AppendEscaped)
    i += n;
  }
  return false;
}

// The escapes logfmt and JSON share: \" \\ \n \r \t and \u00XX for other controls;
// a byte that starts no well-formed UTF-8 character becomes U+FFFD (what a job printed
// may be any bytes, and JSON, journald and log shippers take text only as UTF-8).
void AppendEscaped(std::string& out, std::string_view v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c >= 0x80) {
      const std::size_t n = Utf8Length(v.substr(i));
      if (n == 0) {
        out += "\xEF\xBF\xBD";
      } else {
        out.append(v.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string FormatUtc(std::int64_t unix_seconds, int millis) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];  // room for any int the compiler can imagine
  if (millis < 0) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  }
  return buf;
}

}  // namespace

std::optional<LogLevel> LogLevelFromName(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

std::optional<LogFormat> LogFormatFromName(std::string_view name) {
  if (name == "logfmt") return LogFormat::kLogfmt;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string LogfmtValue(std::string_view value) {
  if (!NeedsQuotes(value)) return std::string(value);
  std::string out = "\"";
  AppendEscaped(out, value);
  out += '"';
  return out;
}

std::string JsonString(std::string_view value) {
  std::string out = "\"";
  AppendEscaped(out, value);
  out += '"';
  return out;
}

std::string FormatTimestamp(WallTime t) {
  std::int64_t ms = t.time_since_epoch().count();
  std::int64_t s = ms / 1000;
  int rest = static_cast<int>(ms % 1000);
  if (rest < 0) {  // before 1970: floor, not truncate
    rest += 1000;
    --s;
  }
  return FormatUtc(s, rest);
}

std::string FormatTick(std::int64_t tick_unix) { return FormatUtc(tick_unix, -1); }

std::string FormatSeconds(milliseconds d) {
  std::int64_t ms = d.count();
  const char* sign = ms < 0 ? "-" : "";
  if (ms < 0) ms = -ms;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s%lld.%03llds", sign, static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return buf;
}

std::string FormatOffset(milliseconds d) {
  return (d.count() >= 0 ? "+" : "") + FormatSeconds(d);
}

bool IsSecretEnvKey(std::string_view key) {
  return EndsWith(key, "_PASSWORD") || EndsWith(key, "_SECRET") || EndsWith(key, "_TOKEN");
}

std::string MaskEnvValue(std::string_view key, std::string_view value) {
  return IsSecretEnvKey(key) ? std::string("***") : std::string(value);
}

std::string FormatLine(LogFormat format, WallTime ts, LogLevel level, std::string_view event,
                       std::span<const Field> fields) {
  std::string out;
  out.reserve(128);
  if (format == LogFormat::kJson) {
    out += "{\"ts\":";
    out += JsonString(FormatTimestamp(ts));
    out += ",\"level\":";
    out += JsonString(LogLevelName(level));
    out += ",\"event\":";
    out += JsonString(event);
    for (const Field& f : fields) {
      out += ',';
      out += JsonString(f.key);
      out += ':';
      out += f.number ? f.value : JsonString(f.value);
    }
    out += "}\n";
    return out;
  }
  out += FormatTimestamp(ts);
  out += ' ';
  out += LogLevelName(level);
  out += ' ';
  out += event;
  for (const Field& f : fields) {
    out += ' ';
    out += f.key;
    out += '=';
    out += LogfmtValue(f.value);
  }
  out += '\n';
  return out;
}

Logger::Logger(Clock& clock, LogFormat format, LogLevel level, Writer writer)
    : clock_(clock), format_(format), level_(level), writer_(std::move(writer)) {}

Logger::~Logger() = default;

Logger::Writer Logger::FdWriter(int fd) {
  auto logger = std::make_shared<spdlog::logger>("tickd", std::make_shared<FdSink>(fd));
  logger->set_level(spdlog::level::trace);
  // The line arrives formatted (newline included); spdlog only carries it to the fd.
  return [logger](std::string_view line) { logger->log(spdlog::level::info, "{}", line); };
}

void Logger::Log(LogLevel level, std::string_view event, std::span<const Field> fields) {
  if (!Enabled(level)) return;
  std::string line = FormatLine(format_, clock_.Wall(), level, event, fields);
  std::lock_guard lock(mu_);
  if (writer_) writer_(line);
}

}  // namespace tickd::app
