#include <string>
#include <string_view>
#include <vector>

#include "sluice/decision/decision.hpp"

namespace sluice {
namespace {

void appendEntry(std::string& out, const Entry& entry) {
  if (!out.empty()) {
    out += ',';
  }
  out += entry.key;
  out += '=';
  out += entry.value;
}

/// The node `entry` meets at this level, as the matcher finds it (an exact value first,
/// then a wildcard, then a key-only node); `fixed` says whether its bucket holds a value
/// every request of that node shares (an exact value, a wildcard under share_threshold).
const DescriptorNode* nodeOf(const std::vector<DescriptorNode>& level, const Entry& entry,
                             bool& fixed) {
  const DescriptorNode* wildcard = nullptr;
  const DescriptorNode* key_only = nullptr;
  for (const DescriptorNode& node : level) {
    if (node.key != entry.key) {
      continue;
    }
    if (node.value && !node.wildcard) {
      if (*node.value == entry.value) {
        fixed = true;
        return &node;
      }
    } else if (node.value) {
      const std::string_view pattern = *node.value;
      const std::string_view prefix = pattern.substr(0, pattern.find('*'));
      if (wildcard == nullptr && std::string_view(entry.value).substr(0, prefix.size()) == prefix) {
        wildcard = &node;
      }
    } else if (key_only == nullptr) {
      key_only = &node;
    }
  }
  if (wildcard != nullptr) {
    fixed = wildcard->share_threshold;
    return wildcard;
  }
  fixed = false;
  return key_only;
}

}  // namespace

void assignBucketIdentity(std::string& out, const Decision& decision, std::size_t descriptor) {
  out.clear();
  const DecisionRequest& request = decision.request;
  if (!request.client_id.empty()) {
    out.assign(request.client_id);
    return;
  }
  if (descriptor >= request.descriptors.size()) {
    return;
  }
  const Descriptor& entries = request.descriptors[descriptor];
  const std::vector<DescriptorNode>* level =
      decision.domain != nullptr ? &decision.domain->descriptors : nullptr;
  for (const Entry& entry : entries) {
    if (level == nullptr) {
      appendEntry(out, entry);
      continue;
    }
    bool fixed = false;
    const DescriptorNode* node = nodeOf(*level, entry, fixed);
    if (node == nullptr) {
      break;  // the rules go no deeper: later entries are not part of the bucket
    }
    if (!fixed) {
      appendEntry(out, entry);
    }
    level = &node->children;
  }
  if (out.empty()) {
    for (const Entry& entry : entries) {
      appendEntry(out, entry);
    }
  }
}

}  // namespace sluice
