// FakeClock: a running child (clock_probe) sees its wall clock step forward and back
// and drift, while its monotonic clock stays real; a fresh `date +%s` sees the offset.
#include "tests/nemesis/faults/fake_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/lock/temp_dir.h"

using namespace std::chrono_literals;
using tickd::nemesis::FakeClock;

namespace {

double RealNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// clock_probe started with the clock's environment; Read() asks it for its clocks.
class Probe {
 public:
  explicit Probe(const std::vector<std::string>& env) {
    int to_child[2];
    int from_child[2];
    REQUIRE(::pipe2(to_child, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(from_child, O_CLOEXEC) == 0);
    std::vector<std::string> strings = env;
    for (char** e = environ; *e != nullptr; ++e) strings.emplace_back(*e);
    std::vector<char*> envp;
    for (std::string& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    char path[] = TICKD_CLOCK_PROBE;
    char* argv[] = {path, nullptr};
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::execve(path, argv, envp.data());
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
  }
  ~Probe() {
    ::close(to_);
    ::close(from_);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // {wall clock, monotonic clock} of the child, in seconds.
  std::pair<double, double> Read() {
    REQUIRE(::write(to_, "?\n", 2) == 2);
    std::string line;
    pollfd p{from_, POLLIN, 0};
    while (line.find('\n') == std::string::npos && ::poll(&p, 1, 2000) == 1) {
      char buf[128];
      const ssize_t n = ::read(from_, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<std::size_t>(n));
    }
    std::istringstream in(line);
    long long real_ns = 0;
    long long mono_ns = 0;
    REQUIRE(static_cast<bool>(in >> real_ns >> mono_ns));
    return {real_ns / 1e9, mono_ns / 1e9};
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The clock under test, or nullptr after a visible skip.
std::unique_ptr<FakeClock> ClockOrSkip(const std::string& dir) {
  std::string why;
  if (!FakeClock::Available(&why)) {
    WARN("skipped: " << why);
    return nullptr;
  }
  auto made = FakeClock::Create(dir);
  REQUIRE(made.has_value());
  return std::move(*made);
}

// `date +%s` run fresh with the clock's environment.
double DateWith(const std::vector<std::string>& env) {
  std::string command = "env";
  for (const std::string& e : env) command += " '" + e + "'";
  command += " date +%s";
  double seconds = 0;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    if (std::fscanf(pipe, "%lf", &seconds) != 1) seconds = 0;
    ::pclose(pipe);
  }
  return seconds;
}

}  // namespace

TEST_CASE("FakeClock steps a running child's wall clock forward and back",
          "[nemesis][fake_clock]") {
  tickd::testing::TempDir dir;
  const auto owned = ClockOrSkip(dir.path());
  if (!owned) return;
  FakeClock& clock = *owned;
  CHECK(Slurp(clock.control_file()) == "+0.000\n");
  const auto env = clock.Env();
  CHECK(std::find(env.begin(), env.end(), "FAKETIME_NO_CACHE=1") != env.end());

  Probe probe(env);
  const auto [wall0, mono0] = probe.Read();
  CHECK(std::abs(wall0 - RealNow()) < 1.0);

  REQUIRE(clock.Step(3600s).has_value());
  const auto [wall1, mono1] = probe.Read();
  CHECK(wall1 - RealNow() == Approx(3600).margin(1.0));
  CHECK(mono1 - mono0 < 1.0);  // the monotonic clock did not move with it
  CHECK(DateWith(env) - RealNow() == Approx(3600).margin(2.0));

  REQUIRE(clock.Step(-2h).has_value());  // cumulative: an hour behind real time
  CHECK(clock.offset().count() == Approx(-3600).margin(0.01));
  CHECK(Slurp(clock.control_file()) == "-3600.000\n");
  const auto [wall2, mono2] = probe.Read();
  CHECK(wall2 - RealNow() == Approx(-3600).margin(1.0));
  CHECK(mono2 >= mono1);

  REQUIRE(clock.Step(3600s + 250ms).has_value());
  CHECK(probe.Read().first - RealNow() == Approx(0.25).margin(0.1));
}

TEST_CASE("FakeClock drift: the child's clock runs at the rate, then at real speed",
          "[nemesis][fake_clock]") {
  tickd::testing::TempDir dir;
  const auto owned = ClockOrSkip(dir.path());
  if (!owned) return;
  FakeClock& clock = *owned;
  Probe probe(clock.Env());

  const auto [wall0, mono0] = probe.Read();
  REQUIRE(clock.Drift(1.5).has_value());
  std::this_thread::sleep_for(1s);
  const auto [wall1, mono1] = probe.Read();
  // Half a second gained per real second (less the last period not yet written).
  CHECK((wall1 - wall0) / (mono1 - mono0) == Approx(1.5).margin(0.1));

  REQUIRE(clock.Drift(1.0).has_value());
  const double gained = clock.offset().count();
  CHECK(gained == Approx(0.5).margin(0.1));
  std::this_thread::sleep_for(500ms);
  const auto [wall2, mono2] = probe.Read();
  CHECK((wall2 - wall1) - (mono2 - mono1) == Approx(0.0).margin(0.1));  // no more drift
  CHECK(wall2 - RealNow() == Approx(gained).margin(0.1));               // kept what it gained

  CHECK(!clock.Drift(0).has_value());
  CHECK(!clock.Drift(-1).has_value());
}
