#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice::test {

struct ChildOptions {
  std::vector<std::string> argv;                         ///< argv[0] is the executable path
  std::vector<std::pair<std::string, std::string>> env;  ///< set on top of the parent's
  std::vector<std::string> unset_env;                    ///< removed from the parent's
  std::string output_file;  ///< stdout and stderr go here (created or truncated)
  std::string cwd;          ///< empty: the parent's
};

/// A child process (fork/exec) with its stdout and stderr captured to a file. The
/// destructor kills it (SIGKILL) if it is still running and reaps it.
class ChildProcess {
 public:
  /// Starts the process; throws std::runtime_error when fork or the output file fails
  /// (an exec failure shows as exit status 127 and a message in the output).
  explicit ChildProcess(ChildOptions options);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  /// Sends a signal (no-op after the process was reaped).
  void signal(int signal_number);

  /// Waits for the process to end: its exit code, or 128 + signal when a signal killed it;
  /// nullopt if it still runs after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout);

  bool running();

  /// What the process wrote so far.
  std::string output() const;
  const std::string& outputFile() const { return options_.output_file; }

 private:
  ChildOptions options_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace sluice::test
