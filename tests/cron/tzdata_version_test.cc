// TzdataVersion: the tz database's release from tzdata.zi or +VERSION, under $TZDIR.
#include "cron/tzdata_version.h"

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace tickd::cron {
namespace {

// A fresh folder (mkdtemp), removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "tickd-tzdata-XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name, std::ios::binary) << text;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets TZDIR (nullopt: unsets it) for one scope, and puts back what was there.
class ScopedTzdir {
 public:
  explicit ScopedTzdir(const std::optional<std::string>& value) {
    if (const char* old = std::getenv("TZDIR")) old_ = old;
    if (value) {
      ::setenv("TZDIR", value->c_str(), 1);
    } else {
      ::unsetenv("TZDIR");
    }
  }
  ~ScopedTzdir() {
    if (old_) {
      ::setenv("TZDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TZDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

TEST_CASE("the version is the first line of tzdata.zi") {
  TempDir dir;
  dir.Write("tzdata.zi",
            "# version 2025b\n# This zic input file is in the public domain.\nR d 1916 o - Jun 14 "
            "23s 1 S\n");
  CHECK(TzdataVersionIn(dir.path()) == "2025b");
  dir.Write("tzdata.zi", "# version 2024a");  // no newline at the end
  CHECK(TzdataVersionIn(dir.path()) == "2024a");
  dir.Write("tzdata.zi", "# version 2023c\r\n");
  CHECK(TzdataVersionIn(dir.path()) == "2023c");
}

TEST_CASE("without tzdata.zi, +VERSION's first word") {
  TempDir dir;
  dir.Write("+VERSION", "2022g\n");
  CHECK(TzdataVersionIn(dir.path()) == "2022g");
  // tzdata.zi wins when both say something.
  dir.Write("tzdata.zi", "# version 2025b\n");
  CHECK(TzdataVersionIn(dir.path()) == "2025b");
  // A tzdata.zi without the version line falls back to +VERSION.
  dir.Write("tzdata.zi", "R d 1916 o - Jun 14 23s 1 S\n");
  CHECK(TzdataVersionIn(dir.path()) == "2022g");
}

TEST_CASE("no readable version is \"unknown\"") {
  TempDir dir;
  CHECK(TzdataVersionIn(dir.path()) == "unknown");  // neither file
  CHECK(TzdataVersionIn(dir.path() + "/missing") == "unknown");
  dir.Write("tzdata.zi", "");
  dir.Write("+VERSION", "\n");
  CHECK(TzdataVersionIn(dir.path()) == "unknown");
  // What cannot travel in a claim record or a log line is not let through.
  dir.Write("tzdata.zi", "# version 2025b tz=evil\n");
  CHECK(TzdataVersionIn(dir.path()) == "unknown");
  dir.Write("tzdata.zi", "# version " + std::string(40, '9') + "\n");
  CHECK(TzdataVersionIn(dir.path()) == "unknown");
  dir.Write("+VERSION", "2025b\x1f\n");
  CHECK(TzdataVersionIn(dir.path()) == "unknown");
}

TEST_CASE("TZDIR chooses the folder; unset or empty, /usr/share/zoneinfo") {
  TempDir dir;
  dir.Write("tzdata.zi", "# version 1999z\n");
  {
    ScopedTzdir tzdir(dir.path());
    CHECK(TzdataDir() == dir.path());
    CHECK(TzdataVersion() == "1999z");
  }
  {
    ScopedTzdir tzdir(std::nullopt);
    CHECK(TzdataDir() == "/usr/share/zoneinfo");
    CHECK(TzdataVersion() == TzdataVersionIn("/usr/share/zoneinfo"));
  }
  {
    ScopedTzdir tzdir{std::string()};
    CHECK(TzdataDir() == "/usr/share/zoneinfo");
  }
  {
    ScopedTzdir tzdir(dir.path() + "/missing");
    CHECK(TzdataVersion() == "unknown");
  }
}

TEST_CASE("the system's database has a version (Debian's tzdata ships tzdata.zi)") {
  // install-deps.sh installs tzdata; a machine without it would say "unknown".
  const std::string v = TzdataVersionIn("/usr/share/zoneinfo");
  INFO(v);
  CHECK(v != "unknown");
  CHECK(v.size() >= 5);  // "2025b"
}

}  // namespace
}  // namespace tickd::cron
