// A small closed-loop HTTP/1.1 load generator that speaks TCP and unix sockets alike, for
// comparing Sluice's two transports with one client (wrk, h2load and ab have no unix socket).
// Each connection sends Sluice's benchmark request (the body of bench/wrk/decision.lua's json
// mode: domain bench, one `op` descriptor, a client id drawn from N), waits for the whole
// answer, and sends the next: no pipelining. One thread, one io_context: pin it with taskset.
//
//   bench_http_load --target unix:/run/sluice.sock | HOST:PORT [--connections 64]
//                   [--seconds 10] [--warmup 1] [--clients 10000] [--op fixed_window_allow]
//
// Prints one JSON line: requests, seconds, requests_per_second, non2xx, errors.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "load_client.hpp"

namespace {

namespace net = boost::asio;
using sluice::bench::Endpoint;
using sluice::bench::KeepAliveConnection;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  int connections = 64;
  double seconds = 10;
  double warmup = 1;
  int clients = 10'000;
  std::string op = "fixed_window_allow";
};

struct Totals {
  std::uint64_t requests = 0;
  std::uint64_t non2xx = 0;
  std::uint64_t errors = 0;
  bool counting = false;
  bool stopping = false;
};

/// One keep-alive connection sending request after request.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::io_context& io, const std::vector<Endpoint>& endpoints, const Options& options,
             Totals& totals, std::uint32_t seed)
      : connection_(io), options_(options), totals_(totals), random_(seed) {
    connection_.connect(endpoints);
    body_head_ = R"({"domain":"bench","clientId":")";
    body_tail_ = R"(","descriptors":[{"entries":[{"key":"op","value":")" + options.op + R"("}]}]})";
  }

  void send() {
    if (totals_.stopping) {
      return;
    }
    char id[16];
    std::snprintf(id, sizeof(id), "c%08d",
                  static_cast<int>(random_() % static_cast<std::uint32_t>(options_.clients)));
    body_ = body_head_;
    body_ += id;
    body_ += body_tail_;
    connection_.request().clear();
    sluice::bench::appendDecisionRequest(connection_.request(), body_);
    connection_.exchange(
        [self = shared_from_this()](boost::system::error_code ec, sluice::bench::Answer answer) {
          if (ec) {
            return self->fail();
          }
          if (self->totals_.counting) {
            ++self->totals_.requests;
            if (answer.status / 100 != 2) {
              ++self->totals_.non2xx;
            }
          }
          self->send();
        });
  }

 private:
  void fail() {
    if (!totals_.stopping) {
      ++totals_.errors;
    }
  }

  KeepAliveConnection connection_;
  const Options& options_;
  Totals& totals_;
  std::minstd_rand random_;
  std::string body_head_;
  std::string body_tail_;
  std::string body_;
};

int usage() {
  std::cerr << "usage: bench_http_load --target unix:PATH|HOST:PORT [--connections N] "
               "[--seconds S] [--warmup S] [--clients N] [--op OP]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--target") {
      options.target = value;
    } else if (flag == "--connections") {
      options.connections = std::stoi(value);
    } else if (flag == "--seconds") {
      options.seconds = std::stod(value);
    } else if (flag == "--warmup") {
      options.warmup = std::stod(value);
    } else if (flag == "--clients") {
      options.clients = std::stoi(value);
    } else if (flag == "--op") {
      options.op = value;
    } else {
      return usage();
    }
  }
  if (options.target.empty() || argc % 2 == 0 || options.connections < 1 || options.clients < 1) {
    return usage();
  }
  net::io_context ioc(1);
  Totals totals;
  std::vector<std::shared_ptr<Connection>> connections;
  try {
    const std::vector<Endpoint> endpoints = sluice::bench::resolveTarget(ioc, options.target);
    for (int i = 0; i < options.connections; ++i) {
      connections.push_back(std::make_shared<Connection>(ioc, endpoints, options, totals,
                                                         static_cast<std::uint32_t>(i + 1)));
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_http_load: cannot connect to " << options.target << ": " << e.what()
              << "\n";
    return 1;
  }
  for (auto& connection : connections) {
    connection->send();
  }
  net::steady_timer timer(ioc);
  Clock::time_point started;
  timer.expires_after(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.warmup)));
  timer.async_wait([&](boost::system::error_code) {
    totals.counting = true;
    started = Clock::now();
    timer.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(options.seconds)));
    timer.async_wait([&](boost::system::error_code) {
      totals.counting = false;
      totals.stopping = true;
      ioc.stop();
    });
  });
  ioc.run();
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf(
      "{\"target\":\"%s\",\"connections\":%d,\"requests\":%llu,\"seconds\":%.3f,"
      "\"requests_per_second\":%.0f,\"non2xx\":%llu,\"errors\":%llu}\n",
      options.target.c_str(), options.connections, static_cast<unsigned long long>(totals.requests),
      elapsed, static_cast<double>(totals.requests) / elapsed,
      static_cast<unsigned long long>(totals.non2xx),
      static_cast<unsigned long long>(totals.errors));
  return totals.errors > 0 ? 1 : 0;
}
