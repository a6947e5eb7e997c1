// The load of bench/soak.sh: keep-alive HTTP/1.1 connections posting decisions
// (POST /shouldAllowRequest, domain `soak`, descriptor op=read, a client id drawn from N) at a
// fixed total rate, or as fast as they can (--rate 0, for the maximum), and one CSV line per
// second:
//
//   t,sent,ok,degraded,denied,errors,max_ms
//
// ok: 200 answered by the store; degraded: 200 with `X-Sluice-Degraded: true` (a failure
// mode answered); denied: 429; errors: anything else (another status, no answer within 5 s,
// a connection error; the connection is then made again). max_ms: the slowest answer of that
// second. Each connection sends its next request when its previous one is answered and its
// next slot (connections / rate apart) has come; a connection more than a second behind
// skips the missed slots instead of bursting. One thread, one io_context.
//
//   bench_soak_load --target HOST:PORT [--rate R] [--seconds S] [--connections N]
//                   [--clients N] [--out FILE.csv]
//
// Prints one JSON line at the end: sent, ok, degraded, denied, errors, seconds. SIGTERM and
// SIGINT stop it early (the totals are printed all the same).
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::seconds kAnswerTimeout{5};
constexpr std::chrono::milliseconds kReconnectPause{20};

struct Options {
  std::string host = "127.0.0.1";
  std::string port;
  double rate = 0;  ///< requests per second in all; 0: unpaced
  double seconds = 10;
  int connections = 32;
  int clients = 1000;
  std::string out;
};

struct Counts {
  std::uint64_t sent = 0, ok = 0, degraded = 0, denied = 0, errors = 0;
  double max_ms = 0;
};

struct Shared {
  Options options;
  tcp::endpoint endpoint;
  Counts second;  ///< this second's, written out and reset every second
  Counts total;
  bool stopping = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::io_context& io, Shared& shared, std::uint32_t seed, Clock::time_point first)
      : io_(io),
        shared_(shared),
        socket_(io),
        slot_timer_(io),
        answer_timer_(io),
        random_(seed),
        next_slot_(first) {}

  void start() { connect(); }

 private:
  void connect() {
    if (shared_.stopping) {
      return;
    }
    socket_ = tcp::socket(io_);
    received_.clear();
    socket_.async_connect(shared_.endpoint,
                          [self = shared_from_this()](boost::system::error_code ec) {
                            if (ec) {
                              return self->failed(false);
                            }
                            self->socket_.set_option(tcp::no_delay(true));
                            self->waitForSlot();
                          });
  }

  void waitForSlot() {
    if (shared_.stopping) {
      return;
    }
    if (shared_.options.rate <= 0) {
      return send();
    }
    const auto now = Clock::now();
    if (now - next_slot_ > std::chrono::seconds(1)) {
      next_slot_ = now;  // far behind: skip the missed slots, do not burst
    }
    const auto slot = next_slot_;
    next_slot_ += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(shared_.options.connections / shared_.options.rate));
    if (slot <= now) {
      return send();
    }
    slot_timer_.expires_at(slot);
    slot_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) {
        self->send();
      }
    });
  }

  void send() {
    if (shared_.stopping) {
      return;
    }
    const std::string body =
        R"({"domain":"soak","clientId":"c)" +
        std::to_string(random_() % static_cast<std::uint32_t>(shared_.options.clients)) +
        R"(","descriptors":[[{"key":"op","value":"read"}]]})";
    request_ =
        "POST /shouldAllowRequest HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    sent_at_ = Clock::now();
    answer_timer_.expires_after(kAnswerTimeout);
    answer_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) {
        self->socket_.close();  // the pending read fails: counted as an error there
      }
    });
    net::async_write(socket_, net::buffer(request_),
                     [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                       if (ec) {
                         return self->failed(true);
                       }
                       self->read();
                     });
  }

  void read() {
    socket_.async_read_some(net::buffer(chunk_), [self = shared_from_this()](
                                                     boost::system::error_code ec, std::size_t n) {
      if (ec) {
        return self->failed(true);
      }
      self->received_.append(self->chunk_.data(), n);
      self->parse();
    });
  }

  void parse() {
    const std::size_t end = received_.find("\r\n\r\n");
    if (end == std::string::npos) {
      return read();
    }
    std::size_t length = 0;
    const std::string_view head(received_.data(), end);
    if (const std::size_t field = head.find("\r\nContent-Length: ");
        field != std::string_view::npos) {
      length = std::strtoul(received_.c_str() + field + 18, nullptr, 10);
    }
    if (received_.size() < end + 4 + length) {
      return read();
    }
    answer_timer_.cancel();
    const int status = received_.size() > 12 ? std::atoi(received_.c_str() + 9) : 0;
    const bool degraded = head.find("\r\nX-Sluice-Degraded: true") != std::string_view::npos;
    std::uint64_t Counts::*kind = status == 200   ? (degraded ? &Counts::degraded : &Counts::ok)
                                  : status == 429 ? &Counts::denied
                                                  : &Counts::errors;
    count(kind);
    received_.erase(0, end + 4 + length);
    waitForSlot();
  }

  /// An error: a request without an answer (`sent`) or a connection that could not be made.
  void failed(bool sent) {
    answer_timer_.cancel();
    if (shared_.stopping) {
      return;
    }
    if (sent) {
      count(&Counts::errors);
    }
    boost::system::error_code ignored;
    socket_.close(ignored);
    slot_timer_.expires_after(kReconnectPause);
    slot_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) {
        self->connect();
      }
    });
  }

  void count(std::uint64_t Counts::*kind) {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - sent_at_).count();
    for (Counts* c : {&shared_.second, &shared_.total}) {
      ++c->sent;
      ++(c->*kind);
      c->max_ms = std::max(c->max_ms, ms);
    }
  }

  net::io_context& io_;
  Shared& shared_;
  tcp::socket socket_;
  net::steady_timer slot_timer_;
  net::steady_timer answer_timer_;
  std::minstd_rand random_;
  Clock::time_point next_slot_;
  Clock::time_point sent_at_;
  std::string request_;
  std::string received_;
  std::array<char, 4096> chunk_{};
};

int usage() {
  std::cerr << "usage: bench_soak_load --target HOST:PORT [--rate R] [--seconds S] "
               "[--connections N] [--clients N] [--out FILE.csv]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Shared shared;
  Options& options = shared.options;
  std::string target;
  try {
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string_view flag = argv[i];
      const std::string value = argv[i + 1];
      if (flag == "--target") {
        target = value;
      } else if (flag == "--rate") {
        options.rate = std::stod(value);
      } else if (flag == "--seconds") {
        options.seconds = std::stod(value);
      } else if (flag == "--connections") {
        options.connections = std::stoi(value);
      } else if (flag == "--clients") {
        options.clients = std::stoi(value);
      } else if (flag == "--out") {
        options.out = value;
      } else {
        return usage();
      }
    }
  } catch (const std::exception&) {
    return usage();
  }
  const std::size_t colon = target.rfind(':');
  if (colon == std::string::npos || argc % 2 == 0 || options.connections < 1 ||
      options.clients < 1 || options.seconds <= 0) {
    return usage();
  }
  options.host = target.substr(0, colon);
  options.port = target.substr(colon + 1);

  net::io_context io(1);
  try {
    tcp::resolver resolver(io);
    shared.endpoint = *resolver.resolve(options.host, options.port).begin();
  } catch (const std::exception& e) {
    std::cerr << "bench_soak_load: " << target << ": " << e.what() << "\n";
    return 1;
  }
  std::ofstream csv;
  if (!options.out.empty()) {
    csv.open(options.out);
    if (!csv) {
      std::cerr << "bench_soak_load: cannot write " << options.out << "\n";
      return 1;
    }
    csv << "t,sent,ok,degraded,denied,errors,max_ms\n" << std::flush;
  }

  const auto started = Clock::now();
  std::vector<std::shared_ptr<Connection>> connections;
  for (int i = 0; i < options.connections; ++i) {
    // Slots spread evenly over the first interval, not all at once.
    const auto offset = options.rate > 0 ? std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(i / options.rate))
                                         : Clock::duration::zero();
    connections.push_back(std::make_shared<Connection>(
        io, shared, static_cast<std::uint32_t>(i + 1), started + offset));
    connections.back()->start();
  }

  auto stop = [&] {
    shared.stopping = true;
    io.stop();
  };
  net::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (!ec) {
      stop();
    }
  });
  net::steady_timer tick(io);
  int second = 0;
  std::function<void()> arm = [&] {
    ++second;
    tick.expires_at(started + std::chrono::seconds(second));
    tick.async_wait([&](boost::system::error_code ec) {
      if (ec) {
        return;
      }
      if (csv.is_open()) {
        const Counts& c = shared.second;
        const double now =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        char line[160];
        std::snprintf(
            line, sizeof(line), "%.3f,%llu,%llu,%llu,%llu,%llu,%.1f\n", now,
            static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.ok),
            static_cast<unsigned long long>(c.degraded), static_cast<unsigned long long>(c.denied),
            static_cast<unsigned long long>(c.errors), c.max_ms);
        csv << line << std::flush;
      }
      shared.second = Counts{};
      if (second >= options.seconds) {
        return stop();
      }
      arm();
    });
  };
  arm();
  io.run();

  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  const Counts& t = shared.total;
  std::printf(
      "{\"sent\":%llu,\"ok\":%llu,\"degraded\":%llu,\"denied\":%llu,\"errors\":%llu,"
      "\"seconds\":%.3f}\n",
      static_cast<unsigned long long>(t.sent), static_cast<unsigned long long>(t.ok),
      static_cast<unsigned long long>(t.degraded), static_cast<unsigned long long>(t.denied),
      static_cast<unsigned long long>(t.errors), elapsed);
  return 0;
}
