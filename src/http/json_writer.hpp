#pragma once

#include <cstdint>
#include <string>
#include <string_view>

/// Appends compact JSON to a string without building a tree: the decision answers are
/// written straight into the buffer that goes on the wire. The output is what
/// nlohmann::json::dump() writes (no spaces, UTF-8 kept as is, invalid UTF-8 replaced by
/// U+FFFD), so both encoders can be mixed and compared.
///
/// The writer tracks commas only; nesting correctness is the caller's (every begin has
/// its end, keys only inside objects). Misuse shows in the unit tests, not at run time.
namespace sluice::http {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }

  /// `"name":` inside an object; the next call writes its value. `name` is one of our own
  /// field names (plain ASCII, nothing to escape) and is written as it is.
  void key(std::string_view name);

  void value(std::string_view text);
  void value(const char* text) { value(std::string_view(text)); }
  void value(bool flag);
  void value(std::int64_t number);
  void value(int number) { value(static_cast<std::int64_t>(number)); }
  /// Text that is already valid JSON (e.g. the rules' compact `metadata`).
  void raw(std::string_view json);

  template <typename T>
  void field(std::string_view name, const T& v) {
    key(name);
    value(v);
  }

 private:
  void separate();
  void open(char bracket);
  void close(char bracket);

  std::string& out_;
  bool first_ = true;        // nothing written yet at this nesting level
  bool after_key_ = false;   // a key was written: its value needs no comma
};

/// Appends `text` as a JSON string literal (quotes included) in nlohmann's escaping.
void appendJsonString(std::string& out, std::string_view text);

}  // namespace sluice::http
