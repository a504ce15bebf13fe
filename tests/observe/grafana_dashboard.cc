#include "tests/observe/grafana_dashboard.h"

#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace psflow::observe {
namespace {

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

absl::Status CollectQueries(const nlohmann::json& panels, const std::string& file_name,
                            std::string& row, std::vector<PanelQuery>& out) {
  for (const nlohmann::json& panel : panels) {
    const std::string title = panel.value("title", "");
    if (panel.value("type", "") == "row") {
      row = title;
      if (panel.contains("panels")) {
        RETURN_IF_ERROR(CollectQueries(panel["panels"], file_name, row, out));
      }
      continue;
    }
    std::string unit;
    if (panel.contains("fieldConfig") && panel["fieldConfig"].contains("defaults")) {
      unit = panel["fieldConfig"]["defaults"].value("unit", "");
    }
    for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array())) {
      if (!target.contains("expr") || !target["expr"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file_name, ": panel \"", title, "\" has a target without an expr"));
      }
      out.push_back({file_name, row, title, target.value("refId", ""),
                     target["expr"].get<std::string>(), unit});
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string PanelQuery::Describe() const {
  return absl::StrCat(dashboard, ": ", panel, " (", ref_id, ")");
}

absl::StatusOr<nlohmann::json> LoadDashboard(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json dashboard = nlohmann::json::parse(text.str(), nullptr, false);
  if (dashboard.is_discarded() || !dashboard.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return dashboard;
}

absl::StatusOr<std::vector<PanelQuery>> PanelQueries(const nlohmann::json& dashboard,
                                                     const std::string& file_name) {
  std::vector<PanelQuery> out;
  std::string row;
  RETURN_IF_ERROR(
      CollectQueries(dashboard.value("panels", nlohmann::json::array()), file_name, row, out));
  return out;
}

std::string SubstituteVariables(const std::string& expr,
                                const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < expr.size()) {
    if (expr[i] != '$') {
      out.push_back(expr[i++]);
      continue;
    }
    size_t end = i + 1;
    std::string name;
    if (end < expr.size() && expr[end] == '{') {
      const size_t close = expr.find('}', end);
      if (close == std::string::npos) {
        out.push_back(expr[i++]);
        continue;
      }
      name = expr.substr(end + 1, close - end - 1);
      name = name.substr(0, name.find(':'));  // ${name:format}
      end = close + 1;
    } else {
      while (end < expr.size() && IsNameChar(expr[end])) ++end;
      name = expr.substr(i + 1, end - i - 1);
    }
    auto it = values.find(name);
    if (it == values.end()) {
      out.append(expr, i, end - i);
    } else {
      out += it->second;
    }
    i = end;
  }
  return out;
}

std::vector<Selector> SelectorsIn(const std::string& expr) {
  // `up` only with braces: bare, the word could be anything.
  static const std::regex kSelector(
      R"(\b(psflow_[a-z0-9_]+)(\s*\{([^}]*)\})?|\b(up)\s*\{([^}]*)\})");
  std::vector<Selector> out;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kSelector);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    if (m[1].matched) {
      out.push_back({m[1].str(), m[3].str()});
    } else {
      out.push_back({m[4].str(), m[5].str()});
    }
  }
  return out;
}

}  // namespace psflow::observe
