// A real PostgreSQL 15 server for tests and benchmarks: `initdb` into a temporary
// folder owned by the `postgres` user (initdb and postgres refuse to run as root, so
// under root both run through `setpriv --reuid=postgres`), a superuser `tickd` with a
// password (scram-sha-256 for every connection), a free loopback port, the socket in
// the same folder. fsync=off and full_page_writes=off ONLY to make the tests fast: a
// killed server (Kill) still keeps every commit, because the commit's WAL reached the
// kernel; only a crash of the machine could lose it. Kill() + Start() is a crash and
// a restart (crash recovery) on the same port and data. Optionally the server alone
// runs under libfaketime (e.g. "+0 x2": its clock runs twice as fast).
// With PostgresServerTls: ssl=on with the given certificates and pg_hba.conf replaced
// by the given lines (e.g. `hostssl … cert` for client certificates).
// Header-only; needs libpq (PkgConfig::LIBPQ) for Query().
#pragma once

#include <fcntl.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/lock/temp_dir.h"
#include "tests/support/server_process.h"

namespace tickd::testing {

struct PostgresServerTls {
  std::string ca_file;    // checks client certificates (ssl_ca_file)
  std::string cert_file;  // the server's; copied with the key into the server's folder,
  std::string key_file;   // owned by the server's user (PostgreSQL insists)
  std::string hba;        // the whole pg_hba.conf
};

class PostgresServer {
 public:
  static constexpr const char* kBinDir = "/usr/lib/postgresql/15/bin";
  static constexpr const char* kFakeTimeLib =
      "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  static constexpr const char* kUser = "tickd";
  static constexpr const char* kDefaultPassword = "pg-S3cret-Pa55word";

  // faketime: a FAKETIME value for the server only ("" = the real clock). fsync: the
  // server's default durability (benchmarks); false: fsync=off (tests, see above).
  explicit PostgresServer(std::string faketime = "", bool fsync = false,
                          std::optional<PostgresServerTls> tls = std::nullopt)
      : faketime_(std::move(faketime)),
        fsync_(fsync),
        password_(kDefaultPassword),
        tls_(std::move(tls)) {
    if (!Available()) return;
    port_ = FreeLoopbackPort();
    if (InitDb() && (!tls_ || ConfigureTls())) Start();
  }
  ~PostgresServer() { Stop(); }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  static bool Available() {
    return ::access((std::string(kBinDir) + "/initdb").c_str(), X_OK) == 0 &&
           ::access((std::string(kBinDir) + "/postgres").c_str(), X_OK) == 0 &&
           (::geteuid() != 0 || ::getpwnam("postgres") != nullptr);
  }
  static bool FakeTimeAvailable() { return ::access(kFakeTimeLib, R_OK) == 0; }

  int port() const { return port_; }
  const std::string& password() const { return password_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // postgres://tickd@127.0.0.1:PORT/DB (the password is passed apart, as the daemon does).
  std::string url(const std::string& db = "postgres") const {
    return "postgres://" + std::string(kUser) + "@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }
  // The last lines of the server's log (for failure messages).
  std::string LogTail() const {
    std::ifstream in(dir_.path() + "/server.log");
    std::stringstream all;
    all << in.rdbuf();
    const std::string s = all.str();
    return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
  }

  // Starts the server and waits until it accepts queries (≤ 20 s: crash recovery).
  bool Start() {
    if (pid_ > 0) return true;
    if (!initialized_) return false;
    std::vector<std::string> args = AsPostgres();
    if (!faketime_.empty()) {
      args.insert(args.end(), {"/usr/bin/env", std::string("LD_PRELOAD=") + kFakeTimeLib,
                               "FAKETIME=" + faketime_});
    }
    args.insert(args.end(), {std::string(kBinDir) + "/postgres", "-D", dir_.path() + "/data", "-k",
                             dir_.path(), "-p", std::to_string(port_), "-c",
                             "listen_addresses=127.0.0.1", "-c", "max_connections=200"});
    if (!fsync_) args.insert(args.end(), {"-c", "fsync=off", "-c", "full_page_writes=off"});
    if (tls_) {
      args.insert(args.end(), {"-c", "ssl=on", "-c", "ssl_cert_file=" + dir_.path() + "/server.crt",
                               "-c", "ssl_key_file=" + dir_.path() + "/server.key", "-c",
                               "ssl_ca_file=" + dir_.path() + "/ca.crt"});
    }
    const pid_t pid = Spawn(args, dir_.path() + "/server.log", /*own_group=*/true);
    if (pid < 0) return false;
    pid_ = pid;
    const std::string conninfo = "host=127.0.0.1 port=" + std::to_string(port_) +
                                 " dbname=postgres connect_timeout=2 user=" + kUser;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      if (PQping(conninfo.c_str()) == PQPING_OK) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  // SIGKILL to the postmaster and every backend: a crash; committed work survives.
  void Kill() { StopWith(SIGKILL); }
  // SIGINT: a fast, clean shutdown.
  void Stop() { StopWith(SIGINT); }
  // SIGSTOP / SIGCONT to every server process: a server that stops answering.
  void Pause() const { SignalAll(SIGSTOP); }
  void Resume() const { SignalAll(SIGCONT); }

  // Runs `sql` as the superuser in `db`; the first column of the first row ("" when
  // the statement returns none), or nullopt with the error in *error.
  std::optional<std::string> Query(const std::string& sql, const std::string& db = "postgres",
                                   std::string* error = nullptr) const {
    const std::string port = std::to_string(port_);
    const char* keys[] = {"host", "port", "dbname", "user", "password", "connect_timeout", nullptr};
    const char* values[] = {"127.0.0.1",       port.c_str(), db.c_str(), kUser,
                            password_.c_str(), "5",          nullptr};
    PGconn* conn = PQconnectdbParams(keys, values, 0);
    std::optional<std::string> out;
    if (PQstatus(conn) != CONNECTION_OK) {
      if (error) *error = PQerrorMessage(conn);
    } else {
      PGresult* r = PQexec(conn, sql.c_str());
      const ExecStatusType st = PQresultStatus(r);
      if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        out = (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0)
                  ? std::string(PQgetvalue(r, 0, 0))
                  : std::string();
      } else if (error) {
        *error = PQresultErrorMessage(r);
      }
      PQclear(r);
    }
    PQfinish(conn);
    return out;
  }

  // A new, empty database (each test case gets its own store).
  bool CreateDatabase(const std::string& name, std::string* error = nullptr) const {
    return Query("CREATE DATABASE \"" + name + "\"", "postgres", error).has_value();
  }

 private:
  // Under root: the prefix that runs a program as the `postgres` user (exec, no fork,
  // so the pid stays the program's).
  static std::vector<std::string> AsPostgres() {
    if (::geteuid() != 0) return {};
    return {"/usr/bin/setpriv",
            "--reuid=postgres",
            "--regid=postgres",
            "--init-groups",
            "--pdeathsig",
            "INT",
            "--"};
  }

  // fork + exec with stdout/stderr to `log`; own_group: the child leads a new process
  // group (so Kill reaches every server process). -1 on failure.
  static pid_t Spawn(std::vector<std::string> args, const std::string& log, bool own_group) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    if (own_group) ::setpgid(0, 0);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    ::dup2(null_fd, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }

  bool InitDb() {
    if (dir_.path().empty()) return false;
    const std::string pwfile = dir_.path() + "/pwfile";
    std::ofstream(pwfile) << password_ << "\n";
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) return false;
      for (const std::string& p : {dir_.path(), pwfile}) {
        if (::chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) return false;
      }
    }
    ::chmod(dir_.path().c_str(), 0700);
    std::vector<std::string> args = AsPostgres();
    args.insert(args.end(), {std::string(kBinDir) + "/initdb", "-D", dir_.path() + "/data", "-U",
                             kUser, "--pwfile=" + pwfile, "-A", "scram-sha-256", "--no-sync",
                             "--no-instructions", "-E", "UTF8", "--locale=C.UTF-8"});
    const pid_t pid = Spawn(args, dir_.path() + "/initdb.log", false);
    int status = 0;
    initialized_ = pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0;
    std::filesystem::remove(pwfile);
    return initialized_;
  }

  // Copies the certificates where the server's user can read them and writes
  // pg_hba.conf (both owned by that user; the key mode 0600, which PostgreSQL requires).
  bool ConfigureTls() {
    const std::pair<std::string, std::string> copies[] = {
        {tls_->ca_file, dir_.path() + "/ca.crt"},
        {tls_->cert_file, dir_.path() + "/server.crt"},
        {tls_->key_file, dir_.path() + "/server.key"}};
    std::error_code ec;
    for (const auto& [from, to] : copies) {
      if (!std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing,
                                      ec)) {
        return false;
      }
    }
    const std::string hba = dir_.path() + "/data/pg_hba.conf";
    std::ofstream(hba, std::ios::trunc) << tls_->hba;
    ::chmod((dir_.path() + "/server.key").c_str(), 0600);
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      for (const std::string& p : {copies[0].second, copies[1].second, copies[2].second, hba}) {
        if (pw == nullptr || ::chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) return false;
      }
    }
    return true;
  }

  // The postmaster's children (backends, checkpointer, …): each calls setsid(), so
  // they are not in the postmaster's process group; /proc names them by parent.
  std::vector<pid_t> Children() const {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 2));
      char state = 0;
      pid_t ppid = 0;
      if (rest >> state >> ppid && ppid == pid_ && state != 'Z') out.push_back(std::stoi(name));
    }
    return out;
  }

  // sig: SIGKILL, SIGSTOP or SIGCONT, to the postmaster and its children. SIGSTOP
  // first holds the postmaster, so it forks no child while they are signalled.
  void SignalAll(int sig) const {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP);
    for (pid_t child : Children()) ::kill(child, sig);
    ::kill(pid_, sig);
    if (sig == SIGCONT) ::kill(pid_, SIGCONT);
  }

  // True while `pid` runs (a zombie has released its memory: not running).
  static bool Running(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const auto close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
  }

  void StopWith(int sig) {
    if (pid_ <= 0) return;
    // The backends outlive a killed postmaster for a moment; a postmaster started while
    // one still holds the old shared memory refuses to start ("pre-existing shared
    // memory block is still in use"), so they are waited for too.
    const std::vector<pid_t> children = Children();
    if (sig == SIGKILL) {
      SignalAll(SIGKILL);
    } else {
      SignalAll(SIGCONT);
      ::kill(pid_, sig);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    if (!ReapBy(pid_, until)) {
      SignalAll(SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (const pid_t child : children) {
      while (Running(child) && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    pid_ = -1;
  }

  std::string faketime_;
  bool fsync_;
  std::string password_;
  std::optional<PostgresServerTls> tls_;
  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool initialized_ = false;
};

}  // namespace tickd::testing
