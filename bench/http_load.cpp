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
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace net = boost::asio;
using Socket = net::generic::stream_protocol::socket;
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
  Connection(Socket socket, const Options& options, Totals& totals, std::uint32_t seed)
      : socket_(std::move(socket)), options_(options), totals_(totals), random_(seed) {
    const std::string body_head = R"({"domain":"bench","clientId":")";
    const std::string body_tail =
        R"(","descriptors":[{"entries":[{"key":"op","value":")" + options.op + R"("}]}]})";
    const std::size_t body_length = body_head.size() + 9 + body_tail.size();
    head_ =
        "POST /shouldAllowRequest HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body_length) + "\r\n\r\n" + body_head;
    tail_ = body_tail;
  }

  void send() {
    if (totals_.stopping) {
      return;
    }
    char id[16];
    std::snprintf(id, sizeof(id), "c%08d",
                  static_cast<int>(random_() % static_cast<std::uint32_t>(options_.clients)));
    request_ = head_;
    request_ += id;
    request_ += tail_;
    net::async_write(socket_, net::buffer(request_),
                     [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                       if (ec) {
                         return self->fail();
                       }
                       self->read();
                     });
  }

 private:
  void read() {
    socket_.async_read_some(net::buffer(chunk_), [self = shared_from_this()](
                                                     boost::system::error_code ec, std::size_t n) {
      if (ec) {
        return self->fail();
      }
      self->received_.append(self->chunk_.data(), n);
      self->parse();
    });
  }

  // Waits for the head, then for Content-Length bytes of body.
  void parse() {
    const std::size_t end = received_.find("\r\n\r\n");
    if (end == std::string::npos) {
      return read();
    }
    std::size_t length = 0;
    const std::size_t field = received_.find("Content-Length: ");
    if (field != std::string::npos && field < end) {
      length = std::strtoul(received_.c_str() + field + 16, nullptr, 10);
    }
    if (received_.size() < end + 4 + length) {
      return read();
    }
    if (totals_.counting) {
      ++totals_.requests;
      if (received_.compare(9, 1, "2") != 0) {
        ++totals_.non2xx;
      }
    }
    received_.erase(0, end + 4 + length);
    send();
  }

  void fail() {
    if (!totals_.stopping) {
      ++totals_.errors;
    }
  }

  Socket socket_;
  const Options& options_;
  Totals& totals_;
  std::minstd_rand random_;
  std::string head_;
  std::string tail_;
  std::string request_;
  std::string received_;
  std::array<char, 4096> chunk_{};
};

Socket connect(net::io_context& ioc, const std::string& target) {
  Socket socket(ioc);
  if (target.starts_with("unix:")) {
    socket.connect(net::generic::stream_protocol::endpoint(
        net::local::stream_protocol::endpoint(target.substr(5))));
    return socket;
  }
  const std::size_t colon = target.rfind(':');
  net::ip::tcp::resolver resolver(ioc);
  net::ip::tcp::socket tcp(ioc);
  net::connect(tcp, resolver.resolve(target.substr(0, colon), target.substr(colon + 1)));
  tcp.set_option(net::ip::tcp::no_delay(true));
  const auto protocol = tcp.local_endpoint().protocol();
  socket.assign(net::generic::stream_protocol(protocol.family(), protocol.protocol()),
                tcp.release());
  return socket;
}

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
    for (int i = 0; i < options.connections; ++i) {
      connections.push_back(std::make_shared<Connection>(
          connect(ioc, options.target), options, totals, static_cast<std::uint32_t>(i + 1)));
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
