#pragma once

#include <memory>
#include <variant>

/// The sluice process: command line, logging, rules, stores, HTTP server, signals.
namespace sluice::app {

struct AppOptions;
class SluiceServer;

/// Runs sluice with the process's arguments and environment (README.md, "Command line"). Returns
/// the exit code: 0 after a graceful shutdown (or --help, or valid rules with --validate), 1 when
/// the rules are invalid or the server cannot start, 2 for a bad command line.
int runMain(int argc, char** argv);

/// Builds the whole server from parsed options: the rules, the listener (bound), the
/// operators' side, and for each I/O thread its store, decision service and routes (one
/// function builds a thread's services). Nothing is served until run(). On failure, the
/// exit code (1, or 2 for options that cannot be used), already reported.
std::variant<std::unique_ptr<SluiceServer>, int> makeServer(const AppOptions& options);

/// Serves until SIGINT/SIGTERM (SIGHUP reloads the rules); returns the exit code (0).
int run(SluiceServer& server);

}  // namespace sluice::app
