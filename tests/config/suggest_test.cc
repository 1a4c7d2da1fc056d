#include "config/suggest.h"

#include <catch2/catch.hpp>

namespace tickd::config {
namespace {

constexpr std::string_view kKeys[] = {"timeout", "timezone", "kill_grace", "shell", "run", "env"};

TEST_CASE("EditDistance counts edits, folding case and '-' vs '_'", "[config][suggest]") {
  CHECK(EditDistance("timeout", "timeout") == 0);
  CHECK(EditDistance("timout", "timeout") == 1);
  CHECK(EditDistance("kill-grace", "kill_grace") == 0);
  CHECK(EditDistance("Shell", "shell") == 0);
  CHECK(EditDistance("abc", "") == 3);
  CHECK(EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("ClosestMatch suggests a key within two edits", "[config][suggest]") {
  CHECK(ClosestMatch("timout", kKeys) == std::optional<std::string>("timeout"));
  CHECK(ClosestMatch("timezon", kKeys) == std::optional<std::string>("timezone"));
  CHECK(ClosestMatch("shel", kKeys) == std::optional<std::string>("shell"));
  CHECK(ClosestMatch("kill-grace", kKeys) == std::optional<std::string>("kill_grace"));
}

TEST_CASE("ClosestMatch suggests nothing for far or tiny words", "[config][suggest]") {
  CHECK_FALSE(ClosestMatch("schedule", kKeys).has_value());
  CHECK_FALSE(ClosestMatch("x", kKeys).has_value());
  CHECK_FALSE(ClosestMatch("ab", kKeys).has_value());
}

}  // namespace
}  // namespace tickd::config
