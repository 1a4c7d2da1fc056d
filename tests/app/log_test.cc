#include "app/log.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tickd::app {
namespace {

using std::chrono::milliseconds;

WallTime At(std::int64_t unix_ms) { return WallTime(milliseconds(unix_ms)); }

// 2026-11-21T14:00:00Z
constexpr std::int64_t kTick = 1795269600;

TEST_CASE("tick and run lines read exactly as DESIGN §6 shows them") {
  FakeClock clock(At(kTick * 1000 + 3));
  std::vector<std::string> lines;
  Logger log(clock, LogFormat::kLogfmt, LogLevel::kInfo,
             [&](std::string_view l) { lines.emplace_back(l); });
  log.Log(LogLevel::kInfo, "tick",
          {{"job", "cleanup-unpaid-orders"},
           {"tick", FormatTick(kTick)},
           {"node", "node-a"},
           {"outcome", "won"},
           {"fence", std::uint64_t{42}}});
  clock.Advance(milliseconds(509));
  log.Log(LogLevel::kInfo, "run",
          {{"job", "cleanup-unpaid-orders"},
           {"tick", FormatTick(kTick)},
           {"node", "node-a"},
           {"outcome", "done"},
           {"exit", 0},
           {"duration", FormatSeconds(milliseconds(509))},
           {"fence", 42}});
  log.Log(LogLevel::kDebug, "noise", {});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "2026-11-21T14:00:00.003Z info tick job=cleanup-unpaid-orders tick=2026-11-21T14:00:00Z "
        "node=node-a outcome=won fence=42\n");
  CHECK(lines[1] ==
        "2026-11-21T14:00:00.512Z info run job=cleanup-unpaid-orders tick=2026-11-21T14:00:00Z "
        "node=node-a outcome=done exit=0 duration=0.509s fence=42\n");
}

TEST_CASE("logfmt quotes values with spaces, quotes, '=' and controls") {
  CHECK(LogfmtValue("plain") == "plain");
  CHECK(LogfmtValue("") == "\"\"");
  CHECK(LogfmtValue("two words") == "\"two words\"");
  CHECK(LogfmtValue("a=b") == "\"a=b\"");
  CHECK(LogfmtValue("say \"hi\"") == "\"say \\\"hi\\\"\"");
  CHECK(LogfmtValue("back\\slash") == "\"back\\\\slash\"");
  CHECK(LogfmtValue("line\nbreak\ttab") == "\"line\\nbreak\\ttab\"");
  CHECK(LogfmtValue(std::string_view("\x01", 1)) == "\"\\u0001\"");
  CHECK(LogfmtValue("héllo") == "héllo");
}

// What a job prints may be any bytes; a log line is UTF-8 text (JSON requires it, and
// journald and log shippers take anything else as a binary blob).
TEST_CASE("bytes that begin no well-formed UTF-8 character are logged as U+FFFD") {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  CHECK(JsonString("bad \xff\xfe end") == "\"bad " + r + r + " end\"");
  CHECK(JsonString("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");  // é € 😀 kept
  CHECK(JsonString("over\xc0\xaflong") == "\"over" + r + r + "long\"");
  CHECK(JsonString("surrogate \xed\xa0\x80") == "\"surrogate " + r + r + r + "\"");
  CHECK(JsonString("beyond \xf4\x90\x80\x80") == "\"beyond " + r + r + r + r + "\"");
  CHECK(JsonString("cut \xe2\x82") == "\"cut " + r + r + "\"");
  CHECK(LogfmtValue("bare\xff") == "\"bare" + r + "\"");  // quoted, as any odd value
  CHECK(LogfmtValue("caf\xc3\xa9") == "caf\xc3\xa9");
  const std::string line =
      FormatLine(LogFormat::kJson, At(kTick * 1000), LogLevel::kInfo, "output",
                 std::vector<Field>{{"job", "j"}, {"line", "\x80\x81 x"}});
  CHECK(line.find("\"line\":\"" + r + r + " x\"") != std::string::npos);
}

TEST_CASE("json lines carry the same fields, numbers as numbers") {
  std::string line =
      FormatLine(LogFormat::kJson, At(kTick * 1000 + 4), LogLevel::kInfo, "tick",
                 std::vector<Field>{
                     {"job", "x"}, {"outcome", "lost"}, {"winner", "node \"a\""}, {"fence", 7}});
  CHECK(line ==
        "{\"ts\":\"2026-11-21T14:00:00.004Z\",\"level\":\"info\",\"event\":\"tick\",\"job\":\"x\","
        "\"outcome\":\"lost\",\"winner\":\"node \\\"a\\\"\",\"fence\":7}\n");
}

TEST_CASE("output lines quote the captured text") {
  std::string line =
      FormatLine(LogFormat::kLogfmt, At(kTick * 1000), LogLevel::kInfo, "output",
                 std::vector<Field>{{"job", "j"}, {"stream", "stdout"}, {"line", "hello world"}});
  CHECK(line == "2026-11-21T14:00:00.000Z info output job=j stream=stdout line=\"hello world\"\n");
}

TEST_CASE("levels filter and names round-trip") {
  FakeClock clock(At(0));
  int n = 0;
  Logger log(clock, LogFormat::kLogfmt, LogLevel::kWarn, [&](std::string_view) { ++n; });
  log.Log(LogLevel::kInfo, "x", {});
  log.Log(LogLevel::kError, "x", {});
  CHECK(n == 1);
  CHECK(LogLevelFromName("debug") == LogLevel::kDebug);
  CHECK(!LogLevelFromName("loud"));
  CHECK(LogFormatFromName("json") == LogFormat::kJson);
  CHECK(LogLevelName(LogLevel::kWarn) == "warn");
}

TEST_CASE("secrets in the environment are masked") {
  CHECK(MaskEnvValue("DB_PASSWORD", "hunter2") == "***");
  CHECK(MaskEnvValue("API_TOKEN", "t") == "***");
  CHECK(MaskEnvValue("AWS_SECRET", "s") == "***");
  CHECK(MaskEnvValue("PASSWORD_HINT", "h") == "h");
  CHECK(MaskEnvValue("HOME", "/root") == "/root");
}

TEST_CASE("timestamps and durations") {
  CHECK(FormatTimestamp(At(0)) == "1970-01-01T00:00:00.000Z");
  CHECK(FormatTick(kTick) == "2026-11-21T14:00:00Z");
  CHECK(FormatSeconds(milliseconds(0)) == "0.000s");
  CHECK(FormatSeconds(milliseconds(61'005)) == "61.005s");
}

TEST_CASE("FdWriter writes whole lines to the descriptor") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    Logger::Writer w = Logger::FdWriter(fds[1]);
    w("one line\n");
    w("two\n");
  }
  ::close(fds[1]);
  char buf[64] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) == "one line\ntwo\n");
}

}  // namespace
}  // namespace tickd::app
