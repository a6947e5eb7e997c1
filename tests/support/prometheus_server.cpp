#include "support/prometheus_server.hpp"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

constexpr int kStartAttempts = 3;

std::string seconds(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

}  // namespace

std::string findOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) {
      end = dirs.size();
    }
    std::filesystem::path candidate = std::filesystem::path(dirs.substr(start, end - start)) / name;
    std::error_code ec;
    if (!candidate.parent_path().empty() && std::filesystem::is_regular_file(candidate, ec) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
    start = end + 1;
  }
  return {};
}

bool havePrometheus() {
  return !findOnPath("prometheus").empty() && !findOnPath("promtool").empty();
}

std::string urlEncode(const std::string& value) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

PrometheusServer::PrometheusServer(PrometheusOptions options)
    : options_(std::move(options)), dir_(makeTempDir("sluice-prometheus")) {
  std::ofstream config(dir_ + "/prometheus.yml");
  config << "global:\n"
         << "  scrape_interval: " << seconds(options_.scrape_interval) << "\n"
         << "  scrape_timeout: " << seconds(options_.scrape_interval) << "\n"
         << "  evaluation_interval: " << seconds(options_.evaluation_interval) << "\n";
  if (!options_.rule_files.empty()) {
    config << "rule_files:\n";
    for (const std::string& file : options_.rule_files) {
      config << "  - '" << file << "'\n";
    }
  }
  config << "scrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: [";
  for (std::size_t i = 0; i < options_.targets.size(); ++i) {
    config << (i > 0 ? ", '" : "'") << options_.targets[i] << "'";
  }
  config << "]\n";
  config.close();

  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    port_ = freeLoopbackPort();
    ChildOptions child;
    child.argv = {findOnPath("prometheus"), "--config.file=" + dir_ + "/prometheus.yml",
                  "--storage.tsdb.path=" + dir_ + "/data",
                  "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"};
    child.output_file = dir_ + "/prometheus.log";
    process_ = std::make_unique<ChildProcess>(child);
    const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
    while (std::chrono::steady_clock::now() < deadline && process_->running()) {
      try {
        if (get("/-/ready").first == 200) {
          return;
        }
      } catch (const std::exception&) {
        // not listening yet
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    process_.reset();  // port taken by someone else, or too slow: try again
  }
  std::string log;
  std::ifstream in(dir_ + "/prometheus.log");
  log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir_);
  throw std::runtime_error("prometheus did not become ready:\n" + log);
}

PrometheusServer::~PrometheusServer() {
  if (process_) {
    process_->signal(SIGTERM);
    if (!process_->wait(std::chrono::seconds(10))) {
      process_->signal(SIGKILL);
      process_->wait(std::chrono::seconds(5));
    }
    process_.reset();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::pair<int, std::string> PrometheusServer::get(const std::string& target) const {
  HttpClient client("127.0.0.1", port_, std::chrono::seconds(10));
  HttpResponse response = client.get(target);
  return {response.status, response.body};
}

std::string PrometheusServer::query(const std::string& expr) const {
  return get("/api/v1/query?query=" + urlEncode(expr)).second;
}

}  // namespace sluice::test
