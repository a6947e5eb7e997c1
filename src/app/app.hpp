#pragma once

/// The sluice process: command line, logging, rules, stores, HTTP server, signals.
namespace sluice::app {

/// Runs sluice with the process's arguments and environment (DESIGN.md §2a). Returns the
/// exit code: 0 after a graceful shutdown (or --help, or valid rules with --validate),
/// 1 when the rules are invalid or the server cannot start, 2 for a bad command line.
int runMain(int argc, char** argv);

}  // namespace sluice::app
