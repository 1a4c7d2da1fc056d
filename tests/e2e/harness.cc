#include "tests/e2e/harness.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tickd::e2e {

namespace {

// Spawns argv with stdout+stderr appended to `log` (or a pipe read back when log is
// empty) and `extra_env` on top of this process's environment.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const fs::path& log) {
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const std::string& kv : extra_env) {
    const std::string key = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env_storage, [&](const std::string& s) { return s.rfind(key, 0) == 0; });
    env_storage.push_back(kv);
  }
  std::vector<char*> envp;
  for (std::string& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage = argv;
  std::vector<char*> args;
  for (std::string& s : argv_storage) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // Nothing else of the test's: a replica a crashed test leaves behind must not hold
  // its descriptors (a `flock` around the suite, a server's pipe) open.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("spawn ") + argv[0] + ": " + std::strerror(rc));
  return pid;
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string LogLine::Get(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? std::string() : it->second;
}

std::string TickText(long long unix_s) {
  const std::time_t t = unix_s;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<LogLine> Events(const std::vector<LogLine>& lines, const std::string& event,
                            const std::string& job, const std::string& tick) {
  std::vector<LogLine> out;
  for (const LogLine& l : lines) {
    if (l.event == event && l.Get("job") == job && (tick.empty() || l.Get("tick") == tick)) {
      out.push_back(l);
    }
  }
  return out;
}

std::optional<LogLine> ParseLogLine(std::string_view line) {
  LogLine out;
  out.raw = std::string(line);
  std::size_t i = 0;
  auto word = [&]() {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    return std::string(line.substr(start, i - start));
  };
  out.ts = word();
  out.level = word();
  out.event = word();
  // "2026-11-21T14:00:00.003Z": a timestamp, not some other output.
  if (out.ts.size() < 20 || out.ts[4] != '-' || out.ts[10] != 'T' || out.event.empty()) {
    return std::nullopt;
  }
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t eq = line.find('=', i);
    if (eq == std::string_view::npos) break;
    std::string key(line.substr(i, eq - i));
    i = eq + 1;
    std::string value;
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (i < line.size() && line[i] != '"') {
        if (line[i] == '\\' && i + 1 < line.size()) {
          ++i;
          value += line[i] == 'n' ? '\n' : line[i];
        } else {
          value += line[i];
        }
        ++i;
      }
      ++i;  // closing quote
    } else {
      std::size_t start = i;
      while (i < line.size() && line[i] != ' ') ++i;
      value = std::string(line.substr(start, i - start));
    }
    out.fields[key] = value;
  }
  return out;
}

std::string BackendFixture::LockYamlVia(const fs::path& dir, const std::string& address) const {
  std::string yaml = LockYaml(dir);
  const std::string own = Address();
  const std::size_t at = own.empty() ? std::string::npos : yaml.find(own);
  if (at == std::string::npos) {
    throw std::runtime_error(name() + ": the lock section names no server address to replace");
  }
  return yaml.replace(at, own.size(), address);
}

std::unique_ptr<BackendFixture> MakeSqliteFixture() {
  class Sqlite final : public BackendFixture {
   public:
    std::string name() const override { return "sqlite"; }
    std::string LockYaml(const fs::path&) const override {
      return "  backend: sqlite\n  url: sqlite://./tickd.db\n";
    }
  };
  return std::make_unique<Sqlite>();
}

Replica::Replica(std::string node, fs::path config, fs::path log, std::vector<std::string> env,
                 std::vector<std::string> prefix)
    : node_(std::move(node)),
      config_(std::move(config)),
      log_(std::move(log)),
      env_(std::move(env)),
      prefix_(std::move(prefix)) {}

Replica::~Replica() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void Replica::Start() {
  std::vector<std::string> argv = prefix_;
  for (std::string arg : {std::string(TICKD_BINARY), std::string("run"), std::string("-c"),
                          config_.string(), std::string("--node-id"), node_}) {
    argv.push_back(std::move(arg));
  }
  pid_ = Spawn(argv, env_, log_);
}

void Replica::Signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> Replica::Wait(milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

std::string Replica::LogText() const { return ReadFile(log_); }

std::vector<LogLine> Replica::Lines() const {
  std::vector<LogLine> out;
  for (const std::string& l : ReadLines(log_)) {
    if (auto parsed = ParseLogLine(l)) out.push_back(std::move(*parsed));
  }
  return out;
}

Cluster::Cluster(BackendFixture& backend) : backend_(backend) {
  std::string tmpl = (fs::temp_directory_path() / "tickd-e2e-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
}

Cluster::~Cluster() {
  for (auto& r : replicas_) {
    r->Signal(SIGCONT);
    r->Signal(SIGKILL);
    r->Wait(milliseconds(5000));
  }
  // Jobs run in their own process groups; a killed replica's children are gone with
  // it or finish soon. Keep the folder when asked, for reading after a failure.
  std::error_code ec;
  if (!keep_ && std::getenv("TICKD_E2E_KEEP") == nullptr) fs::remove_all(dir_, ec);
}

fs::path Cluster::WriteJobFile(const std::string& body, const std::string& extra_lock) {
  std::ostringstream out;
  out << "version: 1\nlock:\n" << backend_.LockYaml(dir_);
  std::istringstream extra(extra_lock);
  for (std::string line; std::getline(extra, line);) {
    if (!line.empty()) out << "  " << line << "\n";
  }
  out << body;
  return WriteJobFileText(out.str());
}

fs::path Cluster::WriteJobFileText(const std::string& text) {
  job_file_ = dir_ / "jobs.yaml";
  std::ofstream out(job_file_);
  out << text;
  out.close();
  fs::permissions(job_file_, fs::perms::owner_read | fs::perms::owner_write |
                                 fs::perms::group_read | fs::perms::others_read);
  return job_file_;
}

Replica& Cluster::StartReplica(const std::string& node, std::vector<std::string> env,
                               std::vector<std::string> prefix) {
  for (const std::string& kv : backend_.Env()) env.push_back(kv);
  replicas_.push_back(std::make_unique<Replica>(node, job_file_, dir_ / (node + ".log"),
                                                std::move(env), std::move(prefix)));
  replicas_.back()->Start();
  return *replicas_.back();
}

std::vector<LogLine> Cluster::AllLines() const {
  std::vector<LogLine> out;
  for (const auto& r : replicas_) {
    auto lines = r->Lines();
    out.insert(out.end(), lines.begin(), lines.end());
  }
  return out;
}

bool Cluster::WaitUntil(const std::function<bool()>& done, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return done();
}

std::vector<std::string> FakeTimeEnv(double offset_seconds) {
  std::ostringstream offset;
  offset << (offset_seconds >= 0 ? "+" : "") << offset_seconds;
  return {"LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
          "FAKETIME=" + offset.str(), "DONT_FAKE_MONOTONIC=1", "FAKETIME_DONT_RESET=1",
          "FAKETIME_NO_CACHE=1"};
}

std::vector<std::string> ReadLines(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env) {
  char tmpl[] = "/tmp/tickd-cmd-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  pid_t pid = Spawn(argv, env, tmpl);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string output = ReadFile(tmpl);
  ::unlink(tmpl);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

}  // namespace tickd::e2e
