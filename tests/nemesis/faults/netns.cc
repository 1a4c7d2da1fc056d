// Namespaces, veths and nftables through the `ip` and `nft` commands (iproute2,
// nftables): what an operator would type, and each failure comes with the command's
// own message. Every command is bounded (kCommandTimeout) and killed past it.
#include "tests/nemesis/faults/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>

namespace tickd::nemesis {
namespace {

constexpr auto kCommandTimeout = std::chrono::seconds(10);
constexpr const char* kPrefix = "tickd-nem-";

std::string FindTool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = std::string(dir) + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

const std::string& IpTool() {
  static const std::string path = FindTool("ip");
  return path;
}
const std::string& NftTool() {
  static const std::string path = FindTool("nft");
  return path;
}

std::string Join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Runs argv (argv[0] a path) with `input` on its stdin; ok when it exits 0. The error
// carries the command and what it printed.
Result<void> Run(std::vector<std::string> argv, const std::string& input = "") {
  const std::string context = Join(argv);
  int in_pipe[2];
  int out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return MakeError(context, std::strerror(errno));
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return MakeError(context, std::strerror(errno));
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(out_pipe[1], 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (pid < 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    return MakeError(context, std::string("fork: ") + std::strerror(errno));
  }
  // The inputs here are a few hundred bytes: they fit the pipe.
  (void)!::write(in_pipe[1], input.data(), input.size());
  ::close(in_pipe[1]);
  std::string output;
  const auto until = std::chrono::steady_clock::now() + kCommandTimeout;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{out_pipe[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    char buf[1024];
    const ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (timed_out) return MakeError(context, "no answer within 10 s (killed)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return MakeError(context, output.empty() ? "exit status " + std::to_string(status) : output);
  }
  return {};
}

Result<void> Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv{IpTool()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(std::move(argv));
}

Result<void> DeleteNamespace(const std::string& name) { return Ip({"netns", "del", name}); }

// "tickd-nem-<pid>-…" → pid, or 0.
pid_t PidOf(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return 0;
  std::size_t digits = 0;
  pid_t pid = 0;
  for (std::size_t i = std::strlen(kPrefix); i < name.size() && std::isdigit(name[i]); ++i) {
    pid = pid * 10 + (name[i] - '0');
    ++digits;
  }
  return digits > 0 ? pid : 0;
}

std::atomic<int> topology_serial{0};

}  // namespace

bool NetnsTopology::Available(std::string* why) {
  static std::once_flag once;
  static bool available = false;
  static std::string reason;
  std::call_once(once, [] {
    if (::geteuid() != 0) {
      reason = "not root: network namespaces and nftables need root (CAP_NET_ADMIN)";
      return;
    }
    if (IpTool().empty()) {
      reason = "no `ip` (iproute2) in /usr/sbin, /sbin, /usr/bin, /bin";
      return;
    }
    if (NftTool().empty()) {
      reason = "no `nft` (nftables) in /usr/sbin, /sbin, /usr/bin, /bin";
      return;
    }
    const std::string probe = kPrefix + std::to_string(::getpid()) + "-probe";
    if (auto made = Ip({"netns", "add", probe}); !made) {
      reason = "cannot create a network namespace: " + made.error().ToString();
      return;
    }
    auto table = Run({IpTool(), "netns", "exec", probe, NftTool(), "-f", "-"},
                     "table inet tickd_probe {\n  chain input { type filter hook input "
                     "priority 0; policy accept; }\n}\n");
    (void)DeleteNamespace(probe);
    if (!table) {
      reason = "cannot create an nftables table in a namespace: " + table.error().ToString();
      return;
    }
    available = true;
  });
  if (!available && why != nullptr) *why = reason;
  return available;
}

Result<std::unique_ptr<NetnsTopology>> NetnsTopology::Create(int replicas) {
  if (replicas < 1 || replicas > kMaxReplicas) {
    return MakeError("netns topology", "replicas must be 1.." + std::to_string(kMaxReplicas) +
                                           ", not " + std::to_string(replicas));
  }
  std::string why;
  if (!Available(&why)) return MakeError("netns topology", why);
  CleanupStale();
  std::unique_ptr<NetnsTopology> t(new NetnsTopology());
  const int serial = topology_serial++;
  t->prefix_ = kPrefix + std::to_string(::getpid()) + "-" + std::to_string(serial);
  t->store_ns_ = t->prefix_ + "-s";
  // On an error the destructor deletes the namespaces made so far.
  const std::string& s = t->store_ns_;
  if (auto r = Ip({"netns", "add", s}); !r) return tl::unexpected(r.error());
  t->replica_ns_.reserve(static_cast<std::size_t>(replicas));
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-n", s, "link", "set", "lo", "up"},
           {"-n", s, "addr", "add", std::string(kStoreAddress) + "/32", "dev", "lo"}}) {
    if (auto r = Ip(args); !r) return tl::unexpected(r.error());
  }
  for (int i = 0; i < replicas; ++i) {
    const std::string r_ns = t->prefix_ + "-r" + std::to_string(i);
    const std::string net = "10.213." + std::to_string(i + 1) + ".";
    const std::string store_if = "s" + std::to_string(i + 1);
    if (auto r = Ip({"netns", "add", r_ns}); !r) return tl::unexpected(r.error());
    t->replica_ns_.push_back(r_ns);
    // Both ends are created inside namespaces: the root namespace never sees them.
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"-n", r_ns, "link", "set", "lo", "up"},
             {"-n", s, "link", "add", store_if, "type", "veth", "peer", "name", "nem0", "netns",
              r_ns},
             {"-n", s, "addr", "add", net + "1/24", "dev", store_if},
             {"-n", s, "link", "set", store_if, "up"},
             {"-n", r_ns, "addr", "add", net + "2/24", "dev", "nem0"},
             {"-n", r_ns, "link", "set", "nem0", "up"},
             {"-n", r_ns, "route", "add", std::string(kStoreAddress) + "/32", "via", net + "1"}}) {
      if (auto r = Ip(args); !r) return tl::unexpected(r.error());
    }
  }
  if (auto r = t->ApplyRules(); !r) return tl::unexpected(r.error());
  return t;
}

NetnsTopology::~NetnsTopology() {
  proxies_.clear();  // their listening sockets live in the store-side namespace
  for (const std::string& ns : replica_ns_) (void)DeleteNamespace(ns);
  if (!store_ns_.empty()) (void)DeleteNamespace(store_ns_);
}

int NetnsTopology::CleanupStale() {
  std::vector<std::string> stale;
  if (DIR* dir = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      const pid_t pid = PidOf(name);
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
    }
    ::closedir(dir);
  }
  int removed = 0;
  for (const std::string& name : stale) removed += DeleteNamespace(name) ? 1 : 0;
  return removed;
}

std::vector<std::string> NetnsTopology::ExecPrefix(int i) const {
  return {IpTool(), "netns", "exec", replica_ns_.at(static_cast<std::size_t>(i))};
}

Result<std::pair<std::string, int>> NetnsTopology::ExposeToReplicas(int upstream_port) {
  auto found = proxies_.find(upstream_port);
  if (found == proxies_.end()) {
    ProxyOptions options;
    options.listen_host = kStoreAddress;
    options.upstream_port = upstream_port;
    options.listen_netns = store_ns_;
    auto proxy = FaultProxy::Start(options);
    if (!proxy) return tl::unexpected(proxy.error());
    found = proxies_.emplace(upstream_port, std::move(*proxy)).first;
  }
  return std::make_pair(std::string(kStoreAddress), found->second->port());
}

FaultProxy* NetnsTopology::ExposedProxy(int upstream_port) const {
  const auto found = proxies_.find(upstream_port);
  return found == proxies_.end() ? nullptr : found->second.get();
}

Result<void> NetnsTopology::Partition(int i, Direction direction) {
  (void)replica_ns_.at(static_cast<std::size_t>(i));
  const auto previous = partitions_;
  partitions_[i] = direction;
  auto applied = ApplyRules();
  if (!applied) partitions_ = previous;
  return applied;
}

Result<void> NetnsTopology::Heal(int i) {
  (void)replica_ns_.at(static_cast<std::size_t>(i));
  if (partitions_.erase(i) == 0) return {};
  return ApplyRules();
}

bool NetnsTopology::Partitioned(int i, Direction* direction) const {
  const auto found = partitions_.find(i);
  if (found == partitions_.end()) return false;
  if (direction != nullptr) *direction = found->second;
  return true;
}

// The whole table is rewritten in one nft transaction (declare, flush, add), so a
// change never leaves a moment with half of the rules.
Result<void> NetnsTopology::ApplyRules() {
  std::string table = prefix_;
  for (char& c : table) c = c == '-' ? '_' : c;
  std::ostringstream rules;
  rules << "table inet " << table << " {\n"
        << "  chain input { type filter hook input priority 0; policy accept; }\n"
        << "  chain output { type filter hook output priority 0; policy accept; }\n"
        << "}\n"
        << "flush table inet " << table << "\n";
  for (const auto& [replica, direction] : partitions_) {
    const std::string dev = "\"s" + std::to_string(replica + 1) + "\"";
    if (direction != Direction::kFromStore)
      rules << "add rule inet " << table << " input iifname " << dev << " drop\n";
    if (direction != Direction::kToStore)
      rules << "add rule inet " << table << " output oifname " << dev << " drop\n";
  }
  return Run({IpTool(), "netns", "exec", store_ns_, NftTool(), "-f", "-"}, rules.str());
}

std::string ToString(NetnsTopology::Direction direction) {
  switch (direction) {
    case NetnsTopology::Direction::kBoth:
      return "both";
    case NetnsTopology::Direction::kToStore:
      return "to-store";
    case NetnsTopology::Direction::kFromStore:
      return "from-store";
  }
  return "?";
}

}  // namespace tickd::nemesis
