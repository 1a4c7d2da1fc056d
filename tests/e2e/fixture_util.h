// Helpers the backend fixtures share (tests/e2e/*_fixture.cc). The fixtures run inside
// Catch2 tests and inside the nemesis driver (tests/nemesis/driver), which has no Catch
// context: a fixture that cannot go on throws, and a Catch test reports the exception.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "tests/e2e/harness.h"

namespace tickd::e2e {

inline void FixtureCheck(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Removes everything inside `dir` (the folder itself stays, its owner too).
inline void EmptyDir(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
  }
}

// A fixture whose store is one server process of `Server` (tests/<backend>/*_server.h:
// port(), pid(), Pause(), Resume(), Kill(), Start()). Restart() is a crash: kill -9,
// then the same port and data.
template <class Server>
class ServerFixture : public BackendFixture {
 public:
  bool CanRestart() const override { return true; }
  void Restart() override {
    Kill();
    Start();
  }
  std::string Address() const override { return "127.0.0.1:" + std::to_string(server().port()); }
  bool CanPause() const override { return true; }
  void Pause() override { server().Pause(); }
  void Resume() override { server().Resume(); }
  std::vector<pid_t> ServerPids() const override { return {server().pid()}; }
  void Kill() override { server().Kill(); }
  void Start() override { FixtureCheck(server().Start(), name() + ": the server did not restart"); }

 protected:
  virtual Server& server() const = 0;
};

}  // namespace tickd::e2e
