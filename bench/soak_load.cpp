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
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
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
  std::vector<Endpoint> endpoints;
  Counts second;  ///< this second's, written out and reset every second
  Counts total;
  bool stopping = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::io_context& io, Shared& shared, std::uint32_t seed, Clock::time_point first)
      : shared_(shared),
        connection_(io),
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
    connection_.asyncConnect(shared_.endpoints,
                             [self = shared_from_this()](boost::system::error_code ec) {
                               if (ec) {
                                 return self->failed(false);
                               }
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
    connection_.request().clear();
    sluice::bench::appendDecisionRequest(connection_.request(), body);
    sent_at_ = Clock::now();
    answer_timer_.expires_after(kAnswerTimeout);
    answer_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) {
        boost::system::error_code ignored;
        // The pending read fails: counted as an error there.
        self->connection_.socket().close(ignored);
      }
    });
    connection_.exchange(
        [self = shared_from_this()](boost::system::error_code ec, sluice::bench::Answer answer) {
          if (ec) {
            return self->failed(true);
          }
          self->answered(answer);
        });
  }

  void answered(const sluice::bench::Answer& answer) {
    answer_timer_.cancel();
    std::uint64_t Counts::*kind = answer.status == 200
                                      ? (answer.degraded ? &Counts::degraded : &Counts::ok)
                                  : answer.status == 429 ? &Counts::denied
                                                         : &Counts::errors;
    count(kind);
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
    connection_.socket().close(ignored);
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

  Shared& shared_;
  sluice::bench::KeepAliveConnection connection_;
  net::steady_timer slot_timer_;
  net::steady_timer answer_timer_;
  std::minstd_rand random_;
  Clock::time_point next_slot_;
  Clock::time_point sent_at_;
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
    shared.endpoints = sluice::bench::resolveTarget(io, target);
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
