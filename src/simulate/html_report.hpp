#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "simulate/differ.hpp"

namespace sluice::simulate {

/// Collects, for one client ("who"), its traffic per rule over time, and renders the HTML
/// report: one self-contained file (inline CSS, SVG and a few lines of script; nothing
/// fetched), with the summary, each rule's denials over time under both rule sets, the
/// client's rate against the limit, and the sortable table of newly denied clients.
class HtmlRecorder {
 public:
  explicit HtmlRecorder(std::string who) : who_(std::move(who)) {}
  const std::string& who() const { return who_; }
  void setWho(std::string who) {
    who_ = std::move(who);
    rules_.clear();
  }

  /// One replayed request (the baseline's decision may be null).
  void add(Micros at, const Decision* old_decision, const Decision& new_decision);

  /// The report; the client chart shows the rule where who()'s denials changed most.
  std::string render(const Differ& differ, std::uint64_t malformed,
                     const std::vector<std::string>& notes, std::size_t top) const;

 private:
  struct ClientSeries {
    TimeSeries hits_old;
    TimeSeries hits_new;
    TimeSeries denied_old;
    TimeSeries denied_new;
  };
  void record(Micros at, const Decision& decision, bool is_new);

  std::string who_;
  std::map<std::string, ClientSeries> rules_;  // by domain "\n" rule name
  std::string scratch_;
};

}  // namespace sluice::simulate
