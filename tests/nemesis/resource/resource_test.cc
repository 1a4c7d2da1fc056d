// The fenced resource (resource.h), its client, and the two programs built on them.
#include "tests/nemesis/resource/resource.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

namespace tickd::nemesis {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Json = nlohmann::json;

// A fresh folder under /tmp (socket paths must stay short), removed afterwards.
struct TempDir {
  TempDir() {
    std::string tmpl = "/tmp/nemesis-res-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

std::vector<Json> ReadJournal(const fs::path& file) {
  std::vector<Json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    INFO(line);
    out.push_back(Json::parse(line));  // throws (fails the test) on a torn line
  }
  return out;
}

// Polls `cond` every 10 ms for up to `timeout`.
template <typename F>
bool WaitFor(F cond, milliseconds timeout = milliseconds(5000)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return cond();
}

// A raw connection, for the steps WriteOnce does in one go.
class RawClient {
 public:
  explicit RawClient(const fs::path& socket) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawClient() { Close(); }
  void Send(const std::string& s) {
    REQUIRE(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
  }
  // The next line, or "<eof>" / "<timeout>".
  std::string Line() {
    std::string line;
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return "<timeout>";
      char ch;
      if (::recv(fd_, &ch, 1, 0) <= 0) return "<eof>";
      if (ch == '\n') return line;
      line += ch;
    }
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Runs `argv` with `env` added to the environment. Returns its pid; output goes to
// `out` (appended).
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const fs::path& out) {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  for (const std::string& kv : env) {
    const auto eq = kv.find('=');
    ::setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

// Waits up to `timeout` for `pid`; its exit status, or -1 (killed by a signal or still
// running: then it is killed).
int Reap(pid_t pid, milliseconds timeout = milliseconds(10000)) {
  int status = 0;
  const bool exited = WaitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout);
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether a server accepts connections on `socket` (a stale file does not).
bool Connectable(const fs::path& socket) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

std::vector<std::string> TickEnv(const std::string& job, std::int64_t tick, std::uint64_t fence,
                                 const std::string& node) {
  return {"TICKD_JOB=" + job, "TICKD_TICK_UNIX=" + std::to_string(tick),
          "TICKD_FENCE=" + std::to_string(fence), "TICKD_NODE=" + node};
}

struct Served {
  Served() {
    std::string error;
    resource = FencedResource::Open(socket(), journal(), &error);
    INFO(error);
    REQUIRE(resource);
    resource->Start();
  }
  fs::path socket() const { return dir.path / "r.sock"; }
  fs::path journal() const { return dir.path / "journal.jsonl"; }
  WriteResult Write(const std::string& job, std::int64_t tick, std::uint64_t fence,
                    const std::string& node, int hold_ms = 0) {
    return WriteOnce(socket(), WriteRequest{job, tick, fence, node, hold_ms});
  }
  TempDir dir;
  std::unique_ptr<FencedResource> resource;
};

TEST_CASE("resource: a higher fence is accepted, an equal or lower one rejected",
          "[nemesis][resource]") {
  Served s;
  CHECK(s.Write("j1", 100, 5, "n1").outcome == WriteOutcome::kAccepted);
  const WriteResult equal = s.Write("j1", 101, 5, "n2");
  CHECK(equal.outcome == WriteOutcome::kRejected);
  CHECK(equal.detail == "5");
  const WriteResult lower = s.Write("j1", 101, 4, "n2");
  CHECK(lower.outcome == WriteOutcome::kRejected);
  CHECK(lower.detail == "5");
  CHECK(s.Write("j1", 102, 6, "n3").outcome == WriteOutcome::kAccepted);
  CHECK(s.resource->HighestFence("j1") == 6u);

  s.resource->Stop();
  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 4);
  CHECK(j[0]["accepted"] == true);
  CHECK(j[0]["last_fence"].is_null());
  CHECK(j[1]["accepted"] == false);
  CHECK(j[1]["ended"] == "rejected");
  CHECK(j[1]["last_fence"] == 5);
  CHECK(j[2]["fence"] == 4);
  CHECK(j[2]["ended"] == "rejected");
  CHECK(j[3]["accepted"] == true);
  CHECK(j[3]["last_fence"] == 5);
  for (std::size_t i = 0; i < j.size(); ++i) CHECK(j[i]["seq"] == i + 1);
}

TEST_CASE("resource: each job has its own highest fence", "[nemesis][resource]") {
  Served s;
  CHECK(s.Write("j1", 100, 10, "n1").outcome == WriteOutcome::kAccepted);
  CHECK(s.Write("j2", 100, 3, "n1").outcome == WriteOutcome::kAccepted);
  CHECK(s.Write("j2", 101, 4, "n2").outcome == WriteOutcome::kAccepted);
  CHECK(s.Write("j1", 101, 4, "n2").outcome == WriteOutcome::kRejected);
  CHECK(s.resource->HighestFence("j1") == 10u);
  CHECK(s.resource->HighestFence("j2") == 4u);
  CHECK_FALSE(s.resource->HighestFence("j3"));
}

TEST_CASE("resource: END journals the attempt with its times", "[nemesis][resource]") {
  Served s;
  const auto before = std::chrono::system_clock::now();
  RawClient c(s.socket());
  c.Send("BEGIN cleanup 1764000000 42 node-a\n");
  CHECK(c.Line() == "ACCEPT");
  std::this_thread::sleep_for(milliseconds(150));
  CHECK(ReadJournal(s.journal()).empty());  // written when the attempt ends
  c.Send("END\n");
  CHECK(c.Line() == "<eof>");  // the server closes once END is journaled
  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 1);
  CHECK(j[0]["job"] == "cleanup");
  CHECK(j[0]["tick"] == 1764000000);
  CHECK(j[0]["fence"] == 42);
  CHECK(j[0]["replica"] == "node-a");
  CHECK(j[0]["accepted"] == true);
  CHECK(j[0]["ended"] == "end");
  const std::int64_t before_ms =
      std::chrono::duration_cast<milliseconds>(before.time_since_epoch()).count();
  CHECK(j[0]["start_ms"].get<std::int64_t>() >= before_ms);
  CHECK(j[0]["end_ms"].get<std::int64_t>() - j[0]["start_ms"].get<std::int64_t>() >= 150);
}

TEST_CASE(
    "resource: WRITEs are OK while the fence is the highest, REFUSED once a later "
    "one began, and journaled",
    "[nemesis][resource]") {
  Served s;
  RawClient old_run(s.socket());
  old_run.Send("BEGIN long 1764000000 5 n1\n");
  REQUIRE(old_run.Line() == "ACCEPT");
  old_run.Send("WRITE\n");
  CHECK(old_run.Line() == "OK");
  CHECK(s.Write("long", 1764000004, 9, "n2").outcome == WriteOutcome::kAccepted);
  old_run.Send("WRITE\nWRITE\n");
  CHECK(old_run.Line() == "REFUSED 9");
  CHECK(old_run.Line() == "REFUSED 9");  // the connection stays: the writer may go on
  old_run.Send("END\n");
  CHECK(old_run.Line() == "<eof>");
  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 2);
  CHECK_FALSE(j[0].contains("writes"));  // no WRITE: no key
  CHECK(j[1]["fence"] == 5);
  CHECK(j[1]["ended"] == "end");
  REQUIRE(j[1]["writes"].size() == 3);
  CHECK(j[1]["writes_refused"] == 2);
  CHECK(j[1]["writes"][1].get<std::int64_t>() >= j[0]["start_ms"].get<std::int64_t>());
}

TEST_CASE("nemesis_write --write-every-ms: writes while it holds; exit 3 when refused",
          "[nemesis][resource]") {
  Served s;
  const fs::path out = s.dir.path / "write.out";
  const std::string sock = s.socket().string();
  const pid_t first =
      Spawn({NEMESIS_WRITE, "--socket", sock, "--hold-ms", "1500", "--write-every-ms", "100"},
            TickEnv("long", 1764000000, 5, "n1"), out);
  REQUIRE(WaitFor([&] { return s.resource->Stats().open == 1; }));
  std::this_thread::sleep_for(milliseconds(300));
  CHECK(s.Write("long", 1764000004, 9, "n2").outcome == WriteOutcome::kAccepted);
  CHECK(Reap(first) == 3);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("writes refused: fence 5 is below 9") != std::string::npos);
  std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 2);
  const Json& run = j[1]["fence"] == 5 ? j[1] : j[0];
  // A write every 100 ms of the 1.5 s hold (14, the last before the hold ends); some
  // before the later fence began, the rest after it, all of those refused.
  CHECK(run["writes"].size() == 14);
  CHECK(run["writes_refused"].get<int>() >= 1);
  CHECK(run["writes_refused"].get<int>() < 14);
  CHECK(Reap(Spawn({NEMESIS_WRITE, "--socket", sock, "--write-every-ms", "0"},
                   TickEnv("long", 1764000005, 10, "n1"), out)) == 2);
}

TEST_CASE("resource: a malformed line gets ERROR and is not journaled", "[nemesis][resource]") {
  Served s;
  RawClient c(s.socket());
  c.Send("BEGIN j1 notanumber 1 n1\n");
  CHECK(c.Line().rfind("ERROR", 0) == 0);
  CHECK(c.Line() == "<eof>");
  RawClient d(s.socket());
  d.Send(std::string(5000, 'x'));
  CHECK(d.Line() == "ERROR line too long");
  CHECK(s.resource->Stats().attempts == 0);
  CHECK(ReadJournal(s.journal()).empty());
}

TEST_CASE("resource: a client killed while holding is journaled as a disconnect",
          "[nemesis][resource]") {
  Served s;
  const pid_t pid = Spawn({NEMESIS_WRITE, "--socket", s.socket().string(), "--hold-ms", "60000"},
                          TickEnv("j1", 1764000000, 7, "n1"), s.dir.path / "write.out");
  REQUIRE(WaitFor([&] { return s.resource->Stats().open == 1; }));
  ::kill(pid, SIGKILL);
  CHECK(Reap(pid) == -1);
  REQUIRE(WaitFor([&] { return s.resource->Stats().open == 0; }));
  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 1);
  CHECK(j[0]["accepted"] == true);
  CHECK(j[0]["ended"] == "disconnect");
  CHECK(j[0]["fence"] == 7);
}

TEST_CASE("resource: Stop journals the attempts still open as shutdown", "[nemesis][resource]") {
  Served s;
  RawClient c(s.socket());
  c.Send("BEGIN j1 1764000000 1 n1\n");
  CHECK(c.Line() == "ACCEPT");
  s.resource->Stop();
  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 1);
  CHECK(j[0]["ended"] == "shutdown");
  CHECK_FALSE(fs::exists(s.socket()));
}

TEST_CASE("resource: concurrent clients are served at once, every attempt journaled",
          "[nemesis][resource]") {
  Served s;
  constexpr int kClients = 64;
  constexpr int kHoldMs = 300;
  std::vector<std::thread> threads;
  std::vector<WriteOutcome> outcomes(kClients, WriteOutcome::kSocketError);
  const auto started = std::chrono::steady_clock::now();
  // Half write their own job (all accepted), half race on one job with fences 1..32.
  // (Catch2's assertions are not thread-safe: the threads only record.)
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      const bool own = i % 2 == 0;
      outcomes[static_cast<std::size_t>(i)] =
          s.Write(own ? "own-" + std::to_string(i) : "shared", 1764000000,
                  static_cast<std::uint64_t>(i / 2 + 1), "n" + std::to_string(i), kHoldMs)
              .outcome;
    });
  }
  for (std::thread& t : threads) t.join();
  const auto elapsed = std::chrono::steady_clock::now() - started;
  int accepted = 0;
  for (int i = 0; i < kClients; ++i) {
    const WriteOutcome o = outcomes[static_cast<std::size_t>(i)];
    accepted += o == WriteOutcome::kAccepted ? 1 : 0;
    if (i % 2 == 0) CHECK(o == WriteOutcome::kAccepted);
    if (i % 2 == 1) CHECK((o == WriteOutcome::kAccepted || o == WriteOutcome::kRejected));
  }
  // Served one after another, the holds alone would take 64 × 300 ms.
  CHECK(elapsed < milliseconds(kClients * kHoldMs / 4));

  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == kClients);
  std::set<std::uint64_t> seqs;
  std::vector<Json> shared;
  for (const Json& e : j) {
    seqs.insert(e["seq"].get<std::uint64_t>());
    if (e["job"] == "shared") shared.push_back(e);
  }
  CHECK(seqs.size() == kClients);
  CHECK(static_cast<int>(s.resource->Stats().accepted) == accepted);
  // In decision order, the shared job's accepted fences strictly increase and every
  // rejection names a last fence at least as high as the rejected one.
  std::sort(shared.begin(), shared.end(),
            [](const Json& a, const Json& b) { return a["seq"] < b["seq"]; });
  std::uint64_t highest = 0;
  for (const Json& e : shared) {
    const auto fence = e["fence"].get<std::uint64_t>();
    if (e["accepted"] == true) {
      CHECK(fence > highest);
      highest = fence;
    } else {
      CHECK(e["last_fence"].get<std::uint64_t>() == highest);
      CHECK(fence <= highest);
    }
  }
  CHECK(s.resource->HighestFence("shared") == highest);
}

TEST_CASE("resource: a restarted resource carries on from its journal", "[nemesis][resource]") {
  TempDir dir;
  std::string error;
  {
    auto r = FencedResource::Open(dir.path / "s", dir.path / "journal.jsonl", &error);
    REQUIRE(r);
    r->Start();
    CHECK(WriteOnce(dir.path / "s", {"j1", 100, 9, "n1", 0}).outcome == WriteOutcome::kAccepted);
  }
  auto r = FencedResource::Open(dir.path / "s", dir.path / "journal.jsonl", &error);
  REQUIRE(r);
  r->Start();
  CHECK(r->HighestFence("j1") == 9u);
  CHECK(WriteOnce(dir.path / "s", {"j1", 101, 9, "n2", 0}).outcome == WriteOutcome::kRejected);
  r->Stop();
  const std::vector<Json> j = ReadJournal(dir.path / "journal.jsonl");
  REQUIRE(j.size() == 2);
  CHECK(j[1]["seq"] == 2);

  // A journal with garbage in the middle is refused with its place.
  std::ofstream(dir.path / "bad.jsonl") << "{\"job\":\"j1\"}\nnot json\n{}\n";
  CHECK_FALSE(FencedResource::Open(dir.path / "t", dir.path / "bad.jsonl", &error));
  CHECK(error.find("bad.jsonl:1") != std::string::npos);
}

TEST_CASE("nemesis_write: exit status 0 accepted, 3 rejected, 4 unreachable, 2 bad input",
          "[nemesis][resource]") {
  Served s;
  const fs::path out = s.dir.path / "write.out";
  const std::string sock = s.socket().string();
  const std::vector<std::string> argv = {NEMESIS_WRITE, "--socket", sock, "--hold-ms", "50"};
  CHECK(Reap(Spawn(argv, TickEnv("j1", 1764000000, 3, "n1"), out)) == 0);
  CHECK(Reap(Spawn(argv, TickEnv("j1", 1764000001, 3, "n2"), out)) == 3);
  CHECK(Reap(Spawn(argv, TickEnv("j1", 1764000001, 4, "n2"), out)) == 0);
  CHECK(Reap(Spawn({NEMESIS_WRITE, "--socket", (s.dir.path / "nothing").string()},
                   TickEnv("j1", 1764000002, 9, "n1"), out)) == 4);
  CHECK(Reap(Spawn(argv, {"TICKD_JOB=j1", "TICKD_TICK_UNIX=1764000002", "TICKD_NODE=n1"}, out)) ==
        2);  // no TICKD_FENCE (the test runner's environment has none either)
  CHECK(Reap(Spawn({NEMESIS_WRITE, "--socket", sock, "--hold-ms", "soon"},
                   TickEnv("j1", 1764000002, 9, "n1"), out)) == 2);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("rejected: fence 3 is not above 3") != std::string::npos);
  CHECK(text.find("TICKD_FENCE") != std::string::npos);
  CHECK(text.find("--hold-ms soon") != std::string::npos);

  const std::vector<Json> j = ReadJournal(s.journal());
  REQUIRE(j.size() == 3);
  CHECK(j[0]["end_ms"].get<std::int64_t>() - j[0]["start_ms"].get<std::int64_t>() >= 50);
  CHECK(j[1]["ended"] == "rejected");
  CHECK(j[2]["replica"] == "n2");
}

TEST_CASE("nemesis_resource: serves until SIGTERM; a SIGKILLed one leaves whole lines",
          "[nemesis][resource]") {
  TempDir dir;
  const fs::path sock = dir.path / "r.sock";
  const fs::path journal = dir.path / "journal.jsonl";
  const fs::path out = dir.path / "resource.out";
  pid_t server =
      Spawn({NEMESIS_RESOURCE, "--socket", sock.string(), "--journal", journal.string()}, {}, out);
  REQUIRE(WaitFor([&] { return Connectable(sock); }));
  // Writers keep coming while the server is killed.
  std::vector<pid_t> writers;
  for (int i = 0; i < 40; ++i) {
    writers.push_back(Spawn({NEMESIS_WRITE, "--socket", sock.string(), "--hold-ms", "20"},
                            TickEnv("j" + std::to_string(i % 4), 1764000000 + i,
                                    static_cast<std::uint64_t>(i + 1), "n1"),
                            dir.path / "write.out"));
    if (i == 30) {
      // Killed once some writer has been journaled (on a loaded machine none of the 30
      // may have ended yet), so the check below is about whole lines, not timing.
      REQUIRE(WaitFor(
          [&] {
            std::ifstream in(journal);  // a whole line (the server may be writing one)
            std::string line;
            return std::getline(in, line) && !in.eof();
          },
          milliseconds(60'000)));
      ::kill(server, SIGKILL);
      CHECK(Reap(server) == -1);
    }
  }
  for (pid_t w : writers) Reap(w);
  const std::vector<Json> killed = ReadJournal(journal);  // every line parses
  CHECK(!killed.empty());

  server =
      Spawn({NEMESIS_RESOURCE, "--socket", sock.string(), "--journal", journal.string()}, {}, out);
  REQUIRE(WaitFor([&] { return Connectable(sock); }));
  CHECK(Reap(Spawn({NEMESIS_WRITE, "--socket", sock.string()}, TickEnv("j9", 1764000000, 1, "n1"),
                   dir.path / "write.out")) == 0);
  ::kill(server, SIGTERM);
  CHECK(Reap(server) == 0);
  CHECK_FALSE(fs::exists(sock));
  CHECK(ReadJournal(journal).size() == killed.size() + 1);
  // Bad arguments: exit status 2.
  CHECK(Reap(Spawn({NEMESIS_RESOURCE, "--socket"}, {}, out)) == 2);
}

}  // namespace
}  // namespace tickd::nemesis
