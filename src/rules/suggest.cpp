#include "rules/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace sluice::rules_detail {
namespace {

std::string normalize(std::string_view word) {
  std::string out;
  out.reserve(word.size());
  for (const char ch : word) {
    if (ch == '_' || ch == '-' || ch == ' ') {
      continue;
    }
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  return out;
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
std::size_t editDistance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) {
    d[i][0] = i;
  }
  for (std::size_t j = 0; j <= m; ++j) {
    d[0][j] = j;
  }
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::optional<std::string> closestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates) {
  const std::string normalized = normalize(word);
  if (normalized.empty()) {
    return std::nullopt;
  }
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string_view candidate : candidates) {
    const std::size_t distance = editDistance(normalized, normalize(candidate));
    // Up to 2 edits, and fewer than a third of the word, so short words do not all look alike.
    const std::size_t allowed =
        std::min<std::size_t>(2, std::max<std::size_t>(1, normalized.size() / 3));
    if (distance <= allowed && (!best || distance < best_distance)) {
      best = std::string(candidate);
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace sluice::rules_detail
