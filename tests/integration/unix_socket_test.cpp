// The HTTP listener on a unix socket (`--listen unix:PATH`), against the real binary over a
// real unix socket: decisions beside a TCP listener and alone, the file's mode, a live
// socket never taken, a stale one replaced, the file removed on exit, and /check's client
// address for peers that have none.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

const std::string kLogin =
    R"({"domain":"auth","clientId":"u1","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";

SluiceOptions unixOptions(bool tcp, std::vector<std::string> args = {"--threads", "2"}) {
  SluiceOptions options;
  options.tcp = tcp;
  options.unix_socket = true;
  options.args = std::move(args);
  return options;
}

unsigned modeOf(const std::string& path) {
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path;
  EXPECT_TRUE(S_ISSOCK(status.st_mode)) << path;
  return status.st_mode & 07777;
}

bool exists(const std::string& path) {
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0;
}

/// A rules directory with the seed auth rules, below `dir`.
std::string rulesDirIn(const std::string& dir) {
  const std::string rules = dir + "/rules";
  std::filesystem::create_directories(rules);
  std::ofstream(rules + "/auth.yaml") << kSeedAuthRules;
  return rules;
}

/// A socket file whose server is gone: bound, never listened on, closed without unlink.
void makeStaleSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  ::close(fd);
}

TEST(UnixSocketTest, DecidesOverTheUnixSocketBesideTcpWithOneStore) {
  SluiceProcess sluice(unixOptions(true));
  HttpClient local = sluice.unixClient();
  HttpClient tcp = sluice.client();
  HttpResponse first = local.post("/shouldAllowRequest", kLogin);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("X-Ratelimit-Remaining"), "4");
  EXPECT_EQ(tcp.post("/shouldAllowRequest", kLogin).header("X-Ratelimit-Remaining"), "3");
  EXPECT_EQ(local.post("/shouldAllowRequest", kLogin).header("X-Ratelimit-Remaining"), "2");
  EXPECT_NE(sluice.log().find("listening on 127.0.0.1:" + std::to_string(sluice.port()) +
                              ", unix:" + sluice.socketPath()),
            std::string::npos)
      << sluice.log();
}

TEST(UnixSocketTest, ServesAloneWithTheDefaultModeAndManyConnectionsAcrossThreads) {
  SluiceProcess sluice(unixOptions(false));
  EXPECT_EQ(modeOf(sluice.socketPath()), 0660u);
  // More connections than threads, all open at once: the one acceptor hands them out in turn.
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<HttpClient>(sluice.unixClient()));
    EXPECT_EQ(clients.back()->get("/healthz").status, 200);
  }
  for (auto& client : clients) {
    EXPECT_EQ(client->get("/readyz").status, 200);
  }
  // Pipelined requests over a raw unix connection are answered in order.
  RawConnection raw(UnixSocket{sluice.socketPath()});
  ASSERT_TRUE(
      raw.send("GET /healthz HTTP/1.1\r\nHost: l\r\n\r\nGET /nope HTTP/1.1\r\nHost: l\r\n\r\n"));
  EXPECT_EQ(raw.readResponse(milliseconds(5000)).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(raw.readResponse(milliseconds(5000)).substr(0, 22), "HTTP/1.1 404 Not Found");
}

TEST(UnixSocketTest, ModeIsConfigurable) {
  SluiceProcess sluice(unixOptions(false, {"--threads", "1", "--listen-mode", "0600"}));
  EXPECT_EQ(modeOf(sluice.socketPath()), 0600u);
  EXPECT_EQ(sluice.unixClient().get("/healthz").status, 200);
}

TEST(UnixSocketTest, TheFileIsRemovedOnExit) {
  SluiceProcess sluice(unixOptions(false));
  ASSERT_TRUE(exists(sluice.socketPath()));
  sluice.signal(SIGTERM);
  EXPECT_EQ(sluice.wait(milliseconds(10'000)), 0) << sluice.log();
  EXPECT_FALSE(exists(sluice.socketPath()));
}

TEST(UnixSocketTest, ALiveSocketIsNeverTaken) {
  SluiceProcess first(unixOptions(false));
  auto [code, output] =
      runSluice({"--listen", "unix:" + first.socketPath(), "--rules", first.rulesDir()},
                milliseconds(20'000));
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("cannot listen on unix:" + first.socketPath() +
                        ": another server is listening on this socket"),
            std::string::npos)
      << output;
  // The first server still owns its socket and serves on it.
  EXPECT_TRUE(exists(first.socketPath()));
  EXPECT_EQ(first.unixClient().get("/healthz").status, 200);
}

TEST(UnixSocketTest, AStaleSocketIsReplaced) {
  const std::string dir = makeTempDir("sluice-unix");
  const std::string path = dir + "/stale.sock";
  makeStaleSocket(path);
  ASSERT_TRUE(exists(path));
  {
    ChildProcess sluice([&] {
      ChildOptions child;
      child.argv = {sluiceBinary(), "--listen", "unix:" + path, "--rules", rulesDirIn(dir)};
      child.output_file = dir + "/sluice.log";
      return child;
    }());
    HttpResponse r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline && r.status != 200 && sluice.running()) {
      try {
        r = HttpClient(UnixSocket{path}, milliseconds(500)).get("/healthz");
      } catch (const std::exception&) {
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    EXPECT_EQ(r.status, 200) << sluice.output();
    EXPECT_NE(sluice.output().find("replaced the stale socket " + path), std::string::npos)
        << sluice.output();
  }
  std::filesystem::remove_all(dir);
}

TEST(UnixSocketTest, AFileThatIsNotASocketIsLeftAlone) {
  const std::string dir = makeTempDir("sluice-unix");
  const std::string path = dir + "/not-a-socket";
  std::ofstream(path) << "precious";
  auto [code, output] =
      runSluice({"--listen", "unix:" + path, "--rules", rulesDirIn(dir)}, milliseconds(20'000));
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("cannot listen on unix:" + path +
                        ": the path exists and is not a socket (not removed)"),
            std::string::npos)
      << output;
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
  std::filesystem::remove_all(dir);
}

// A unix-socket peer has no address: it is taken for a trusted proxy, so the client of
// /check is the nearest untrusted X-Forwarded-For address.
TEST(UnixSocketTest, CheckTakesTheClientAddressFromTheProxyHeader) {
  SluiceProcess sluice(unixOptions(false));
  HttpClient local = sluice.unixClient();
  auto remaining = [&](const std::string& forwarded_for) {
    HttpResponse r = local.request("GET", "/check", {}, {{"X-Forwarded-For", forwarded_for}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.header("X-Ratelimit-Remaining");
  };
  EXPECT_EQ(remaining("203.0.113.7"), "99");
  EXPECT_EQ(remaining("203.0.113.7"), "98");
  EXPECT_EQ(remaining("198.51.100.9"), "99");
  // What the client wrote before its own address is not believed.
  EXPECT_EQ(remaining("192.0.2.1, 203.0.113.7"), "97");
}

}  // namespace
}  // namespace sluice::test
