#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "simulate/access_record.hpp"
#include "sluice/common/result.hpp"

namespace sluice::simulate {

/// How to read another program's JSON access log (nginx `log_format ... escape=json`,
/// Envoy's `json_format`): which field is the time, the client, each descriptor entry
/// (docs/what-if.md, "Logs of other proxies"). Loaded from a small YAML file (`--map`).
class LogMap {
 public:
  /// kInvalidArgument with "file:line: message" when the file is wrong.
  static Result<std::unique_ptr<LogMap>> load(const std::string& path);
  virtual ~LogMap() = default;
  /// One line into `out`; false with `error` when it is not JSON or lacks the time.
  virtual bool parse(std::string_view line, LoggedRequest& out, std::string& error) const = 0;
};

}  // namespace sluice::simulate
