#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/child_process.hpp"
#include "support/http_client.hpp"

namespace sluice::test {

/// The seed example (config/rules): domain auth, auth_type=login, 5 per minute; and
/// a default domain with a domain-level limit of 100 per minute.
extern const char* const kSeedAuthRules;
extern const char* const kSeedDefaultRules;

struct SluiceOptions {
  /// Rule files written into a fresh rules directory: file name -> YAML.
  std::map<std::string, std::string> rule_files{{"auth.yaml", kSeedAuthRules},
                                                {"default.yaml", kSeedDefaultRules}};
  std::vector<std::string> args{"--threads", "2"};  ///< more flags
  std::vector<std::pair<std::string, std::string>> env;
  bool wait_healthy = true;
  /// Pass `--rules <dir of rule_files>`; false for a sluice whose rules come over xDS.
  bool rules_dir = true;
  /// Listen on 127.0.0.1:<free port> (port()), and/or on the unix socket socketPath().
  bool tcp = true;
  bool unix_socket = false;
  /// Also an admin listener on 127.0.0.1:<free port> (adminPort()), picked again with the
  /// other port when a start is retried.
  bool admin = false;
  std::chrono::milliseconds start_timeout{10'000};
};

/// Options with these flags (and the seed rules).
inline SluiceOptions withArgs(std::vector<std::string> args) {
  SluiceOptions options;
  options.args = std::move(args);
  return options;
}

/// Options with these rule files and flags.
inline SluiceOptions withRules(std::map<std::string, std::string> rule_files,
                               std::vector<std::string> args = {"--threads", "2"}) {
  SluiceOptions options;
  options.rule_files = std::move(rule_files);
  options.args = std::move(args);
  return options;
}

/// The real `sluice` binary (sluiceBinary()) on a free loopback port with its own rules
/// directory; output goes to a log file in the test's temporary directory. Starting waits
/// for GET /healthz (throws std::runtime_error with the log when it does not come up).
/// The destructor kills the process and removes the directory.
class SluiceProcess {
 public:
  explicit SluiceProcess(SluiceOptions options = {});
  ~SluiceProcess();
  SluiceProcess(const SluiceProcess&) = delete;
  SluiceProcess& operator=(const SluiceProcess&) = delete;

  std::uint16_t port() const { return port_; }
  /// The admin listener's port of SluiceOptions::admin (0 without one).
  std::uint16_t adminPort() const { return admin_port_; }
  /// The unix socket of SluiceOptions::unix_socket: <dir()>/sluice.sock.
  std::string socketPath() const { return dir_ + "/sluice.sock"; }
  const std::string& dir() const { return dir_; }
  std::string rulesDir() const { return dir_ + "/rules"; }
  HttpClient client(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const {
    return HttpClient("127.0.0.1", port_, timeout);
  }

  HttpClient unixClient(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) const {
    return HttpClient(UnixSocket{socketPath()}, timeout);
  }

  /// (Re)writes one rule file atomically (write + rename).
  void writeRuleFile(const std::string& name, const std::string& yaml) const;

  void signal(int signal_number) { process_->signal(signal_number); }
  std::optional<int> wait(std::chrono::milliseconds timeout) { return process_->wait(timeout); }
  bool running() { return process_->running(); }
  std::string log() const { return process_->output(); }

 private:
  bool waitHealthy(std::chrono::milliseconds timeout);

  SluiceOptions options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::uint16_t admin_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

/// The value of one series of the sidecar's /metrics, its name and labels as /metrics writes
/// them (`sluice_eventual_round_trips_total{reason="tight"}`); -1 when absent.
double seriesValue(SluiceProcess& sluice, const std::string& series);

/// The sum of one series over several sidecars, an absent one counting 0: what they did
/// together, whichever of them the scheduler favoured.
double seriesTotal(std::initializer_list<SluiceProcess*> sluices, const std::string& series);

/// The sum of every sample of the metric `family` in the sidecar's /metrics whose labels
/// contain `label` ("" for all of them): e.g. every kind of `sluice_redis_faults_total`.
double familyTotal(SluiceProcess& sluice, const std::string& family, const std::string& label = "");

/// Runs `sluice` with `args` to completion (e.g. --help, --validate): exit code and output.
std::pair<int, std::string> runSluice(const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// A fresh temporary directory (removed by the caller).
std::string makeTempDir(const std::string& prefix);

/// The `sluice` binary the tests start: SLUICE_BINARY (this build's), unless the environment
/// variable SLUICE_TEST_BINARY names another one (e.g. a ThreadSanitizer build of sluice
/// driven by an ordinary build of the tests: docs/quality.md).
std::string sluiceBinary();

}  // namespace sluice::test
