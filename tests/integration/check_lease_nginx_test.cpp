// An in-flight limit behind nginx's auth_request, as docs/deployment.md ("In-flight limits
// through /check") configures it: a Debian nginx on loopback asks a real sluice's /check,
// passes the lease of an allowed request on to the application in X-Sluice-Lease, and the
// application (here, the test) releases it when its work is done.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "support/child_process.hpp"
#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string nginxBinary() {
  for (const char* path : {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"}) {
    if (access(path, X_OK) == 0) {
      return path;
    }
  }
  return "";
}

// One job at a time, whose lease outlives the test: only a release frees the slot.
const char* const kRules = R"(domain: jobs
rate_limit:
  algorithm: concurrency
  max_in_flight: 1
  lease: 5m
)";

const char* const kForwardAuth = R"(forward_auth:
  deny_status: 403
  domain: jobs
  client:
    - {from: client_ip}
  trusted_proxies: [127.0.0.1/32]
)";

// The gateway of docs/deployment.md: auth_request to /check, the lease passed on to the
// application; the application answers with the lease it was given. /ready (asked by no
// check) tells that nginx is up.
std::string nginxConfig(const std::string& dir, std::uint16_t sluice_port,
                        std::uint16_t gateway_port, std::uint16_t app_port) {
  const std::string app = "127.0.0.1:" + std::to_string(app_port);
  return "worker_processes 1;\npid " + dir + "/nginx.pid;\nevents {}\nhttp {\n" +
         "  access_log off;\n  client_body_temp_path " + dir + "/body;\n  proxy_temp_path " + dir +
         "/proxy;\n  fastcgi_temp_path " + dir + "/fastcgi;\n  uwsgi_temp_path " + dir +
         "/uwsgi;\n  scgi_temp_path " + dir + "/scgi;\n" +
         "  server {\n    listen 127.0.0.1:" + std::to_string(gateway_port) + ";\n" +
         "    location = /ready {\n      return 204;\n    }\n" +
         "    location / {\n      auth_request /_sluice_check;\n" +
         "      auth_request_set $sluice_lease $upstream_http_x_sluice_lease;\n" +
         "      proxy_set_header X-Sluice-Lease $sluice_lease;\n" +
         "      error_page 403 = @busy;\n      proxy_pass http://" + app + ";\n    }\n" +
         "    location = /_sluice_check {\n      internal;\n      proxy_pass http://127.0.0.1:" +
         std::to_string(sluice_port) + "/check;\n      proxy_pass_request_body off;\n" +
         "      proxy_set_header Content-Length \"\";\n" +
         "      proxy_set_header X-Original-URI $request_uri;\n    }\n" +
         "    location @busy {\n      return 429 \"busy\\n\";\n    }\n  }\n" +
         "  server {\n    listen " + app + ";\n    location / {\n" +
         "      return 200 \"$http_x_sluice_lease\";\n    }\n  }\n}\n";
}

TEST(CheckLeaseNginxTest, TheAppGetsTheLeaseOfItsRequestAndReleasesIt) {
  const std::string nginx = nginxBinary();
  if (nginx.empty()) {
    GTEST_SKIP() << "nginx is not installed (scripts/deps.sh test installs nginx-light)";
  }
  const std::string dir = makeTempDir("sluice-check-lease");
  std::ofstream(dir + "/sluice.yaml") << kForwardAuth;
  SluiceProcess sluice(
      withRules({{"jobs.yaml", kRules}}, {"--threads", "1", "--config", dir + "/sluice.yaml"}));
  const std::uint16_t gateway_port = freeLoopbackPort();
  const std::uint16_t app_port = freeLoopbackPort();
  std::ofstream(dir + "/nginx.conf") << nginxConfig(dir, sluice.port(), gateway_port, app_port);
  ChildOptions child;
  child.argv = {nginx, "-p",         dir, "-c", dir + "/nginx.conf", "-e", dir + "/error.log",
                "-g",  "daemon off;"};
  child.output_file = dir + "/nginx.out";
  auto process = std::make_unique<ChildProcess>(child);
  const auto errors = [&] {
    std::ifstream in(dir + "/error.log");
    std::ostringstream text;
    text << in.rdbuf();
    return "\nnginx: " + process->output() + "\nerror.log:\n" + text.str() + "\nsluice:\n" +
           sluice.log();
  };
  const auto viaGateway = [&] { return HttpClient("127.0.0.1", gateway_port).get("/job"); };
  ASSERT_TRUE(waitFor(
      [&] {
        try {
          return HttpClient("127.0.0.1", gateway_port, 500ms).get("/ready").status == 204;
        } catch (const std::exception&) {
          return false;
        }
      },
      10s))
      << errors();

  const HttpResponse first = viaGateway();
  ASSERT_EQ(first.status, 200) << first.body << errors();
  const std::string lease = first.body;
  ASSERT_EQ(lease.rfind("l1.", 0), 0U) << "the application got no lease: " << lease << errors();

  const HttpResponse busy = viaGateway();
  EXPECT_EQ(busy.status, 429) << busy.body << errors();
  EXPECT_EQ(busy.body, "busy\n");

  // The application's work is done: it gives the slot back.
  const HttpResponse released =
      sluice.client().post("/release", nlohmann::json{{"lease", lease}}.dump());
  ASSERT_EQ(released.status, 200) << released.body;
  const HttpResponse again = viaGateway();
  ASSERT_EQ(again.status, 200) << again.body << errors();
  EXPECT_NE(again.body, lease) << "a new request, a new lease";

  process->signal(SIGQUIT);
  if (!process->wait(5s)) {
    process.reset();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sluice::test
