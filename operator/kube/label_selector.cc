#include "operator/kube/label_selector.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psflow::kube {
namespace {

bool ValidToken(absl::string_view s) {
  if (s.empty() || s.size() > 316) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '/';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text) {
  LabelSelector selector;
  if (absl::StripAsciiWhitespace(text).empty()) return selector;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    absl::string_view term = absl::StripAsciiWhitespace(raw);
    Term t;
    size_t pos;
    if ((pos = term.find("!=")) != absl::string_view::npos) {
      t = {std::string(absl::StripAsciiWhitespace(term.substr(0, pos))), Op::kNotEquals,
           std::string(absl::StripAsciiWhitespace(term.substr(pos + 2)))};
    } else if ((pos = term.find("==")) != absl::string_view::npos) {
      t = {std::string(absl::StripAsciiWhitespace(term.substr(0, pos))), Op::kEquals,
           std::string(absl::StripAsciiWhitespace(term.substr(pos + 2)))};
    } else if ((pos = term.find('=')) != absl::string_view::npos) {
      t = {std::string(absl::StripAsciiWhitespace(term.substr(0, pos))), Op::kEquals,
           std::string(absl::StripAsciiWhitespace(term.substr(pos + 1)))};
    } else if (absl::ConsumePrefix(&term, "!")) {
      t = {std::string(absl::StripAsciiWhitespace(term)), Op::kNotExists, ""};
    } else {
      t = {std::string(term), Op::kExists, ""};
    }
    const bool has_value = t.op == Op::kEquals || t.op == Op::kNotEquals;
    if (!ValidToken(t.key) || (has_value && !t.value.empty() && !ValidToken(t.value))) {
      return absl::InvalidArgumentError(
          absl::StrCat("label selector \"", text, "\": bad term \"", raw, "\""));
    }
    selector.terms_.push_back(std::move(t));
  }
  return selector;
}

LabelSelector LabelSelector::Equals(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  LabelSelector selector;
  for (const auto& [key, value] : pairs) selector.terms_.push_back({key, Op::kEquals, value});
  return selector;
}

bool LabelSelector::Matches(const nlohmann::json& labels) const {
  for (const Term& t : terms_) {
    const nlohmann::json* value = nullptr;
    if (labels.is_object()) {
      auto it = labels.find(t.key);
      if (it != labels.end() && it->is_string()) value = &*it;
    }
    switch (t.op) {
      case Op::kEquals:
        if (value == nullptr || value->get_ref<const std::string&>() != t.value) return false;
        break;
      case Op::kNotEquals:
        if (value != nullptr && value->get_ref<const std::string&>() == t.value) return false;
        break;
      case Op::kExists:
        if (value == nullptr) return false;
        break;
      case Op::kNotExists:
        if (value != nullptr) return false;
        break;
    }
  }
  return true;
}

std::string LabelSelector::ToString() const {
  return absl::StrJoin(terms_, ",", [](std::string* out, const Term& t) {
    switch (t.op) {
      case Op::kEquals: absl::StrAppend(out, t.key, "=", t.value); break;
      case Op::kNotEquals: absl::StrAppend(out, t.key, "!=", t.value); break;
      case Op::kExists: absl::StrAppend(out, t.key); break;
      case Op::kNotExists: absl::StrAppend(out, "!", t.key); break;
    }
  });
}

}  // namespace psflow::kube
