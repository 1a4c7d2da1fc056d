#include "base/duration.h"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using tickd::FormatDuration;
using tickd::ParseDuration;

TEST_CASE("durations of every unit parse") {
  CHECK(ParseDuration("500ms").value() == 500ms);
  CHECK(ParseDuration("30s").value() == 30s);
  CHECK(ParseDuration("5m").value() == 5min);
  CHECK(ParseDuration("2h").value() == 2h);
  CHECK(ParseDuration("1d").value() == 24h);
  CHECK(ParseDuration("1h30m").value() == 90min);
  CHECK(ParseDuration("0s").value() == 0ms);
}

TEST_CASE("bad durations are rejected with the reason") {
  CHECK_FALSE(ParseDuration("").has_value());
  CHECK_FALSE(ParseDuration("30").has_value());
  CHECK_FALSE(ParseDuration("-5s").has_value());
  CHECK_FALSE(ParseDuration("1.5s").has_value());
  CHECK_FALSE(ParseDuration("99999999999999999d").has_value());
  auto err = ParseDuration("30x");
  REQUIRE_FALSE(err.has_value());
  CHECK(err.error().ToString() == "30x: unknown unit 'x' (use ms, s, m, h, d)");
}

TEST_CASE("durations format to their shortest exact spelling") {
  CHECK(FormatDuration(0ms) == "0s");
  CHECK(FormatDuration(1500ms) == "1500ms");
  CHECK(FormatDuration(90s) == "1m30s");
  CHECK(FormatDuration(25h) == "1d1h");
}
