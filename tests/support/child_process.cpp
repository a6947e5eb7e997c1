#include "support/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace sluice::test {
namespace {

std::vector<std::string> childEnvironment(const ChildOptions& options) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : options.env) {
      replaced = replaced || key == name;
    }
    for (const auto& key : options.unset_env) {
      replaced = replaced || key == name;
    }
    if (!replaced) {
      env.push_back(std::move(entry));
    }
  }
  for (const auto& [key, value] : options.env) {
    env.push_back(key + "=" + value);
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

}  // namespace

ChildProcess::ChildProcess(ChildOptions options) : options_(std::move(options)) {
  if (options_.argv.empty()) {
    throw std::runtime_error("ChildProcess: empty argv");
  }
  // Everything the child needs is prepared before fork: after it only async-signal-safe
  // calls are allowed (the test process may have threads).
  std::vector<std::string> env = childEnvironment(options_);
  std::vector<char*> envp = pointers(env);
  std::vector<std::string> args = options_.argv;
  std::vector<char*> argv = pointers(args);
  int out_fd = ::open(options_.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    throw std::runtime_error("ChildProcess: cannot open " + options_.output_file + ": " +
                             std::strerror(errno));
  }
  const char* cwd = options_.cwd.empty() ? nullptr : options_.cwd.c_str();
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    int err = errno;
    ::close(out_fd);
    throw std::runtime_error(std::string("ChildProcess: fork: ") + std::strerror(err));
  }
  if (pid_ == 0) {
    // A test that dies (a crash, SIGPIPE, ctest's timeout) must not leave its children
    // running: they would load the machine of every later test and benchmark. (The signal
    // follows the thread that forked: children are started from the test's main thread.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(125);  // the test died between fork and prctl
    }
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
    }
    if (cwd != nullptr && ::chdir(cwd) != 0) {
      ::_exit(126);
    }
    ::execve(argv[0], argv.data(), envp.data());
    static constexpr char kMessage[] = "ChildProcess: execve failed\n";
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
    ::_exit(127);
  }
  ::close(out_fd);
}

ChildProcess::~ChildProcess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    (void)wait(std::chrono::milliseconds(5000));
  }
}

void ChildProcess::signal(int signal_number) {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, signal_number);
  }
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  if (status_) {
    return status_;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return status_;
    }
    if (r < 0 && errno != EINTR) {
      status_ = -1;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool ChildProcess::running() { return pid_ > 0 && !wait(std::chrono::milliseconds(0)).has_value(); }

std::string ChildProcess::output() const {
  std::ifstream in(options_.output_file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace sluice::test
