// The nginx example of docker/ (nginx.conf with auth_request -> /check, and Sluice's
// docker/sluice/nginx.yaml) run for real: a Debian nginx on loopback in front of a real
// sluice with the shipped rules, and an upstream served by the same nginx. Only the
// container addresses and paths are replaced; a change to the example that this test
// cannot follow fails it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/child_process.hpp"
#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path.string());
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Replaces every occurrence; fails the test when `from` does not occur at all.
void replaceAll(std::string& text, const std::string& from, const std::string& to) {
  std::size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "the example no longer contains: " << from;
  while (at != std::string::npos) {
    text.replace(at, from.size(), to);
    at = text.find(from, at + to.size());
  }
}

std::string nginxBinary() {
  for (const char* path : {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"}) {
    if (access(path, X_OK) == 0) {
      return path;
    }
  }
  return "";
}

// Fixed windows are epoch-aligned minutes: start when enough of the current one is left.
void awaitFreshMinute(int needed_seconds) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  auto into = std::chrono::duration_cast<std::chrono::milliseconds>(now) % std::chrono::minutes(1);
  if (into > std::chrono::seconds(60 - needed_seconds)) {
    std::this_thread::sleep_for(std::chrono::minutes(1) - into + std::chrono::milliseconds(50));
  }
}

class NginxExampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nginx_path_ = nginxBinary();
    if (nginx_path_.empty()) {
      GTEST_SKIP() << "nginx is not installed (scripts/deps.sh test installs nginx-light)";
    }
    dir_ = makeTempDir("sluice-nginx-example");
    const fs::path source = SLUICE_SOURCE_DIR;

    // Sluice: the demo's forward_auth, trusting this nginx on loopback instead of its
    // container address, with the rules the demo mounts.
    std::string sluice_config = readFile(source / "docker/sluice/nginx.yaml");
    replaceAll(sluice_config, "trusted_proxies: [172.28.0.10/32]",
               "trusted_proxies: [127.0.0.1/32]");
    std::ofstream(dir_ + "/sluice.yaml") << sluice_config;
    SluiceOptions options;
    options.rule_files.clear();
    for (const auto& entry : fs::directory_iterator(source / "config/rules")) {
      if (entry.path().extension() == ".yaml") {
        options.rule_files[entry.path().filename().string()] = readFile(entry.path());
      }
    }
    options.args = {"--threads", "1", "--config", dir_ + "/sluice.yaml"};
    sluice_ = std::make_unique<SluiceProcess>(options);

    // nginx: the example, with loopback ports, paths in the temporary directory, and the
    // upstream as a second server of the same nginx.
    gateway_port_ = freeLoopbackPort();
    std::uint16_t upstream_port = freeLoopbackPort();
    std::string conf = readFile(source / "docker/nginx/nginx.conf");
    replaceAll(conf, "/tmp/", dir_ + "/");
    replaceAll(conf, "error_log /dev/stderr", "error_log " + dir_ + "/error.log");
    replaceAll(conf, "access_log /dev/stdout", "access_log " + dir_ + "/access.log");
    const std::string sluice_address = "127.0.0.1:" + std::to_string(sluice_->port());
    const std::string upstream_address = "127.0.0.1:" + std::to_string(upstream_port);
    replaceAll(conf, "server sluice:8080;", "server " + sluice_address + ";");
    replaceAll(conf, "server upstream:80;", "server " + upstream_address + ";");
    replaceAll(conf, "listen 8000;", "listen 127.0.0.1:" + std::to_string(gateway_port_) + ";");
    std::size_t http_end = conf.rfind('}');
    ASSERT_NE(http_end, std::string::npos);
    conf.insert(http_end,
                "  server {\n"
                "    listen " +
                    upstream_address +
                    ";\n"
                    "    location / {\n"
                    "      return 200 \"upstream ok\\n\";\n"
                    "    }\n"
                    "  }\n");
    std::ofstream(dir_ + "/nginx.conf") << conf;

    ChildOptions child;
    child.argv = {nginx_path_,         "-p", dir_,         "-c", dir_ + "/nginx.conf", "-e",
                  dir_ + "/error.log", "-g", "daemon off;"};
    child.output_file = dir_ + "/nginx.out";
    nginx_ = std::make_unique<ChildProcess>(child);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        HttpClient probe("127.0.0.1", gateway_port_, std::chrono::milliseconds(500));
        probe.get("/healthz-probe-does-not-count");
        break;
      } catch (const std::exception&) {
        ASSERT_TRUE(nginx_->running()) << "nginx exited:\n" << nginx_->output() << nginxErrors();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  void TearDown() override {
    if (nginx_) {
      nginx_->signal(SIGQUIT);  // graceful: workers finish, then the master exits
      if (!nginx_->wait(std::chrono::seconds(5))) {
        nginx_.reset();  // SIGKILL
      }
    }
    sluice_.reset();
    if (!dir_.empty()) {
      fs::remove_all(dir_);
    }
  }

  std::string nginxErrors() const {
    std::ifstream in(dir_ + "/error.log");
    std::ostringstream text;
    text << in.rdbuf();
    return "\nnginx error.log:\n" + text.str();
  }

  HttpResponse viaGateway(const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return HttpClient("127.0.0.1", gateway_port_).request("GET", "/page", {}, headers);
  }

  std::string nginx_path_;
  std::string dir_;
  std::uint16_t gateway_port_ = 0;
  std::unique_ptr<SluiceProcess> sluice_;
  std::unique_ptr<ChildProcess> nginx_;
};

TEST_F(NginxExampleTest, TwoHundredsTurnInto429sWithTheHeaders) {
  awaitFreshMinute(15);
  // The probe counted once for this client (127.0.0.1): read where the bucket stands.
  HttpResponse first = viaGateway();
  ASSERT_EQ(first.status, 200) << first.body << nginxErrors();
  EXPECT_EQ(first.body, "upstream ok\n");
  const int limit = std::stoi(first.header("X-Ratelimit-Limit"));
  int remaining = std::stoi(first.header("X-Ratelimit-Remaining"));
  ASSERT_GT(limit, 0);
  EXPECT_FALSE(first.header("RateLimit-Policy").empty());
  while (remaining > 0) {
    HttpResponse r = viaGateway();
    ASSERT_EQ(r.status, 200) << r.body << nginxErrors();
    EXPECT_EQ(std::stoi(r.header("X-Ratelimit-Remaining")), remaining - 1);
    remaining = std::stoi(r.header("X-Ratelimit-Remaining"));
  }
  for (int i = 0; i < 2; ++i) {
    HttpResponse denied = viaGateway();
    ASSERT_EQ(denied.status, 429) << denied.body << nginxErrors();
    EXPECT_GE(std::stoi(denied.header("Retry-After")), 1);
    EXPECT_EQ(denied.header("X-Ratelimit-Limit"), std::to_string(limit));
    EXPECT_EQ(denied.header("X-Ratelimit-Remaining"), "0");
    EXPECT_NE(denied.body.find("rate limited"), std::string::npos) << denied.body;
    EXPECT_EQ(denied.body.find("upstream ok"), std::string::npos);
  }
}

TEST_F(NginxExampleTest, EachUserHasItsOwnBucket) {
  awaitFreshMinute(15);
  int limit = 0;
  for (int i = 0;; ++i) {
    HttpResponse r = viaGateway({{"X-User-Id", "alice"}});
    if (r.status == 429) {
      EXPECT_EQ(i, limit) << "alice was denied before her limit";
      break;
    }
    ASSERT_EQ(r.status, 200) << r.body << nginxErrors();
    limit = std::stoi(r.header("X-Ratelimit-Limit"));
    ASSERT_LE(i, limit) << "alice was never denied";
  }
  HttpResponse bob = viaGateway({{"X-User-Id", "bob"}});
  EXPECT_EQ(bob.status, 200) << bob.body;
  EXPECT_EQ(bob.header("X-Ratelimit-Remaining"), std::to_string(limit - 1));
}

}  // namespace
}  // namespace sluice::test
