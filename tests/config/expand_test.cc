#include "config/expand.h"

#include <catch2/catch.hpp>

namespace tickd::config {
namespace {

std::optional<std::string> FakeEnv(const std::string& name) {
  if (name == "HOST") return std::string("db1");
  if (name == "EMPTY") return std::string();
  return std::nullopt;
}

std::string Expand(std::string_view text) {
  auto r = ExpandEnv(text, FakeEnv);
  REQUIRE(r.has_value());
  return *r;
}

TEST_CASE("${VAR} takes the variable's value", "[config][expand]") {
  CHECK(Expand("redis://${HOST}:6379") == "redis://db1:6379");
  CHECK(Expand("${HOST}${HOST}") == "db1db1");
  CHECK(Expand("x${EMPTY}y") == "xy");
}

TEST_CASE("${VAR:-default} falls back when unset or empty, like sh", "[config][expand]") {
  CHECK(Expand("${NOPE:-fallback}") == "fallback");
  CHECK(Expand("${EMPTY:-fallback}") == "fallback");
  CHECK(Expand("${HOST:-fallback}") == "db1");
  CHECK(Expand("${NOPE:-}") == "");
}

TEST_CASE("a lone $, $$ and $NAME stay literal; $${ is a literal ${", "[config][expand]") {
  CHECK(Expand("echo $TICKD_FENCE $$ $ 5$") == "echo $TICKD_FENCE $$ $ 5$");
  CHECK(Expand("echo $${HOME}") == "echo ${HOME}");
}

TEST_CASE("an unset variable without default is an error naming it", "[config][expand]") {
  auto r = ExpandEnv("x ${NOPE} y", FakeEnv);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().detail.find("NOPE is not set") != std::string::npos);
}

TEST_CASE("unterminated ${ and invalid names are errors", "[config][expand]") {
  CHECK_FALSE(ExpandEnv("${HOST", FakeEnv).has_value());
  CHECK_FALSE(ExpandEnv("${1X}", FakeEnv).has_value());
  CHECK_FALSE(ExpandEnv("${}", FakeEnv).has_value());
  CHECK_FALSE(ExpandEnv("${A B}", FakeEnv).has_value());
}

}  // namespace
}  // namespace tickd::config
