// Writes a replayable access log (docs/what-if.md, "The log") to stdout, for the replay
// benchmark (bench/simulate/run.sh): `bench_simulate_gen_log LINES|SIZE [clients=10000]
// [rate=20000]`. SIZE ends in G or M (bytes of log); LINES is a plain count. Lines are in time
// order, `rate` requests per second in total, spread over `clients` users and the rules of
// bench/simulate/rules_*.yaml (one descriptor of two entries, or a client id).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "simulate/access_record.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LINES|SIZE(G|M) [clients] [rate]\n", argv[0]);
    return 2;
  }
  std::string amount = argv[1];
  std::uint64_t lines = 0;
  std::uint64_t bytes = 0;
  const char unit = amount.back();
  if (unit == 'G' || unit == 'M') {
    bytes = std::strtoull(amount.c_str(), nullptr, 10) << (unit == 'G' ? 30 : 20);
  } else {
    lines = std::strtoull(amount.c_str(), nullptr, 10);
  }
  const std::uint64_t clients = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10'000;
  const double rate = argc > 3 ? std::strtod(argv[3], nullptr) : 20'000;
  std::mt19937_64 rng(42);
  // A skewed population: a few clients send most of the traffic.
  std::discrete_distribution<int> tier({70, 25, 5});
  sluice::Micros now = 1'795'651'200'000'000;  // 2026-11-26T00:00:00Z
  const auto step = static_cast<sluice::Micros>(1e6 / rate);
  sluice::DecisionRequest request;
  request.domain = "api";
  std::string line;
  std::uint64_t written = 0;
  const char* paths[] = {"/login", "/search", "/checkout", "/items"};
  static char buffer[1 << 20];
  std::setvbuf(stdout, buffer, _IOFBF, sizeof(buffer));
  for (std::uint64_t i = 0; lines == 0 ? written < bytes : i < lines; ++i) {
    now += step;
    std::uint64_t who = 0;
    switch (tier(rng)) {
      case 0:
        who = rng() % clients;
        break;
      case 1:
        who = rng() % (clients / 100 + 1);
        break;
      default:
        who = rng() % 10;
        break;
    }
    const std::string user = "user-" + std::to_string(who);
    request.client_id.clear();
    if (i % 4 == 0) {
      request.client_id = user;
      request.descriptors = {{{"path", paths[rng() % 4]}}};
    } else {
      request.descriptors = {{{"path", paths[rng() % 4]}, {"user", user}}};
    }
    line.clear();
    sluice::simulate::appendAccessJson(line, now, request, "", "", false, 0, "");
    line += '\n';
    if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size()) {
      return 1;  // the reader went away
    }
    written += line.size();
  }
  return 0;
}
