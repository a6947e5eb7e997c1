#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace sluice::test {
namespace {

constexpr int kStartAttempts = 5;

std::string makeTempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "sluice-redis-XXXXXX").string();
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  return std::string(buf.data());
}

ReplyPtr runCommand(redisContext* context, const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(context, static_cast<int>(args.size()), args.data(), lens.data());
  return ReplyPtr(static_cast<redisReply*>(raw));
}

}  // namespace

int RedisServer::freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    throw std::runtime_error("socket() failed");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind/getsockname failed");
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

RedisServer::RedisServer(RedisServerOptions options)
    : options_(std::move(options)), dir_(makeTempDir()) {
  if (options_.unix_socket) {
    unix_path_ = dir_ + "/redis.sock";
  }
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    port_ = freePort();
    if (options_.cluster_bus) {
      do {
        bus_port_ = freePort();
      } while (bus_port_ == port_);
    }
    launch();
    if (waitForPing(options_.start_timeout)) {
      return;
    }
    stop();
  }
  std::filesystem::remove_all(dir_);
  throw std::runtime_error("redis-server did not start (see its log in a temp dir)");
}

RedisServer::~RedisServer() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string RedisServer::url(int db) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

std::string RedisServer::unixUrl() const { return "unix://" + unix_path_; }

void RedisServer::launch() {
  std::vector<std::string> args = {"redis-server", "--port",    std::to_string(port_),
                                   "--bind",       "127.0.0.1", "--dir",
                                   dir_,           "--save",    "",
                                   "--appendonly", "no",        "--daemonize",
                                   "no",           "--logfile", dir_ + "/redis.log"};
  if (!unix_path_.empty()) {
    args.insert(args.end(), {"--unixsocket", unix_path_, "--unixsocketperm", "700"});
  }
  if (!options_.password.empty()) {
    args.insert(args.end(), {"--requirepass", options_.password});
  }
  if (options_.cluster_bus) {
    args.insert(args.end(), {"--cluster-port", std::to_string(bus_port_)});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    // A test killed by a timeout must not leave its redis-server behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
      ::dup2(devnull, STDERR_FILENO);
    }
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  client_.reset();
}

bool RedisServer::waitForPing(std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      // The server died (port taken by someone else in the meantime, ...).
      const_cast<RedisServer*>(this)->pid_ = -1;
      return false;
    }
    timeval tv{0, 200'000};
    ContextPtr c(redisConnectWithTimeout("127.0.0.1", port_, tv));
    if (c && c->err == 0) {
      ReplyPtr reply = runCommand(c.get(), {"PING"});
      if (reply && (reply->type == REDIS_REPLY_STATUS ||
                    (reply->type == REDIS_REPLY_ERROR &&
                     (std::string_view(reply->str).starts_with("NOAUTH") ||
                      std::string_view(reply->str).starts_with("LOADING"))))) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisServer::stop() {
  client_.reset();
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

void RedisServer::restart() {
  stop();
  // The port may be briefly unavailable; the server sets SO_REUSEADDR so this is rare.
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    launch();
    if (waitForPing(options_.start_timeout)) {
      return;
    }
    stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
}

ContextPtr RedisServer::connect() const {
  timeval tv{2, 0};
  ContextPtr c(redisConnectWithTimeout("127.0.0.1", port_, tv));
  if (!c || c->err != 0) {
    throw std::runtime_error("cannot connect to redis-server on port " + std::to_string(port_));
  }
  if (!options_.password.empty()) {
    ReplyPtr reply = runCommand(c.get(), {"AUTH", options_.password});
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error("AUTH failed");
    }
  }
  return c;
}

ReplyPtr RedisServer::command(const std::vector<std::string>& argv) {
  if (!client_) {
    client_ = connect();
  }
  ReplyPtr reply = runCommand(client_.get(), argv);
  if (!reply) {
    client_.reset();
    throw std::runtime_error("redis command failed: connection error");
  }
  return reply;
}

long long RedisServer::commandCalls(std::string_view command) {
  ReplyPtr info = this->command({"INFO", "commandstats"});
  if (info->type != REDIS_REPLY_STRING && info->type != REDIS_REPLY_STATUS) {
    throw std::runtime_error("INFO commandstats did not answer a string");
  }
  const std::string_view text(info->str, info->len);
  const std::string tag = "cmdstat_" + std::string(command) + ":calls=";
  const std::size_t at = text.find(tag);
  if (at == std::string_view::npos) {
    return 0;
  }
  return std::stoll(std::string(text.substr(at + tag.size(), 20)));
}

BlackholeServer::BlackholeServer(Mode mode) : mode_(mode) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("blackhole listener failed");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

BlackholeServer::~BlackholeServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

void BlackholeServer::run() {
  struct Client {
    int fd;
    bool spoke = false;
  };
  std::vector<Client> clients;
  auto next_byte = std::chrono::steady_clock::now();
  auto send_all = [](int fd, const std::string& bytes) {
    // Best effort: a client that left is found by the next read.
    (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  };
  while (!stop_) {
    const bool endless = mode_ == Mode::kEndlessReply && replying_;
    if (endless && std::chrono::steady_clock::now() >= next_byte) {
      next_byte = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      for (const Client& c : clients) {
        if (c.spoke) {
          send_all(c.fd, "x");  // one more byte of a bulk string that never ends
        }
      }
    }
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    const std::size_t first_client = 1;
    for (const Client& c : clients) {
      fds.push_back({c.fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 20) <= 0) {
      continue;
    }
    if (fds[0].revents & POLLIN) {
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        clients.push_back({c});
        ++accepted_;
      }
    }
    for (std::size_t i = first_client; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        continue;
      }
      auto it = std::find_if(clients.begin(), clients.end(),
                             [&](const Client& c) { return c.fd == fds[i].fd; });
      char buf[4096];
      if (::read(fds[i].fd, buf, sizeof buf) <= 0) {
        ::close(fds[i].fd);
        clients.erase(it);
        continue;
      }
      if (!it->spoke) {
        it->spoke = true;
        ++spoke_;
        if (endless) {
          send_all(it->fd, "$1000000000\r\n");
        }
      }
    }
  }
  for (const Client& c : clients) {
    ::close(c.fd);
  }
}

}  // namespace sluice::test
