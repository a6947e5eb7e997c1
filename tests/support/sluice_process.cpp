#include "support/sluice_process.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "support/free_port.hpp"

namespace sluice::test {

const char* const kSeedAuthRules = R"(domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      unit: minute
      requests_per_unit: 5
)";

const char* const kSeedDefaultRules = R"(domain: default
rate_limit:
  name: default_per_client
  unit: minute
  requests_per_unit: 100
)";

namespace fs = std::filesystem;

std::string sluiceBinary() {
  const char* other = std::getenv("SLUICE_TEST_BINARY");
  return other != nullptr && *other != '\0' ? other : SLUICE_BINARY;
}

std::string makeTempDir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  return pattern;
}

SluiceProcess::SluiceProcess(SluiceOptions options) : options_(std::move(options)) {
  dir_ = makeTempDir("sluice-test");
  fs::create_directories(rulesDir());
  for (const auto& [name, yaml] : options_.rule_files) {
    writeRuleFile(name, yaml);
  }
  // The free port may be taken between the probe and sluice's bind: try a few.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string listen;
    if (options_.tcp) {
      port_ = freeLoopbackPort();
      listen = "127.0.0.1:" + std::to_string(port_);
    }
    if (options_.unix_socket) {
      listen += (listen.empty() ? "" : ",") + std::string("unix:") + socketPath();
    }
    ChildOptions child;
    child.argv = {sluiceBinary(), "--listen", listen};
    if (options_.rules_dir) {
      child.argv.insert(child.argv.end(), {"--rules", rulesDir()});
    }
    if (options_.admin) {
      admin_port_ = freeLoopbackPort();
      child.argv.insert(child.argv.end(),
                        {"--admin-listen", "127.0.0.1:" + std::to_string(admin_port_)});
    }
    child.argv.insert(child.argv.end(), options_.args.begin(), options_.args.end());
    child.env = options_.env;
    child.output_file = dir_ + "/sluice.log";
    process_ = std::make_unique<ChildProcess>(child);
    if (!options_.wait_healthy || waitHealthy(options_.start_timeout)) {
      return;
    }
    bool port_taken = log().find("cannot listen") != std::string::npos;
    if (!port_taken) {
      break;
    }
  }
  std::string output = process_ ? log() : "";
  process_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
  throw std::runtime_error("sluice did not become healthy; its output:\n" + output);
}

SluiceProcess::~SluiceProcess() {
  process_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

void SluiceProcess::writeRuleFile(const std::string& name, const std::string& yaml) const {
  // Hidden temporary name: a watcher ignores it until the rename makes it appear whole.
  std::string tmp = rulesDir() + "/." + name + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << yaml;
  }
  fs::rename(tmp, rulesDir() + "/" + name);
}

bool SluiceProcess::waitHealthy(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process_->running()) {
      return false;
    }
    try {
      HttpClient probe = options_.tcp
                             ? HttpClient("127.0.0.1", port_, std::chrono::milliseconds(500))
                             : HttpClient(UnixSocket{socketPath()}, std::chrono::milliseconds(500));
      if (probe.get("/healthz").status == 200) {
        return true;
      }
    } catch (const std::exception&) {
      // Not listening yet.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::pair<int, std::string> runSluice(const std::vector<std::string>& args,
                                      std::chrono::milliseconds timeout) {
  std::string dir = makeTempDir("sluice-run");
  ChildOptions child;
  child.argv = {sluiceBinary()};
  child.argv.insert(child.argv.end(), args.begin(), args.end());
  child.output_file = dir + "/output.log";
  child.cwd = SLUICE_SOURCE_DIR;
  int code = -1;
  std::string output;
  {
    ChildProcess process(child);
    auto status = process.wait(timeout);
    code = status.value_or(-1);
    output = process.output();
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return {code, output};
}

double seriesValue(SluiceProcess& sluice, const std::string& series) {
  const std::string text = sluice.client().get("/metrics").body;
  const std::size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size() + 2));
}

double seriesTotal(std::initializer_list<SluiceProcess*> sluices, const std::string& series) {
  double total = 0;
  for (SluiceProcess* sluice : sluices) {
    total += std::max(seriesValue(*sluice, series), 0.0);
  }
  return total;
}

double familyTotal(SluiceProcess& sluice, const std::string& family, const std::string& label) {
  const std::string text = sluice.client().get("/metrics").body;
  double sum = 0;
  std::size_t pos = 0;
  while ((pos = text.find(family, pos)) != std::string::npos) {
    const std::size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    const bool sample = pos == 0 || text[pos - 1] == '\n';  // not a # HELP / # TYPE line
    pos = end;
    if (!sample || (line[family.size()] != '{' && line[family.size()] != ' ') ||
        line.find(label) == std::string::npos) {
      continue;
    }
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

}  // namespace sluice::test
