#include "tests/observe/metrics_reference.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psflow::observe {
namespace {

namespace fs = std::filesystem;

// The text of every non-test .cc file under source_dir's component folders.
absl::StatusOr<std::map<std::string, std::string>> ComponentSources(const std::string& source_dir) {
  std::map<std::string, std::string> files;
  for (const char* component : {"core", "ps", "worker", "operator"}) {
    std::error_code error;
    for (fs::recursive_directory_iterator it(fs::path(source_dir) / component, error), end;
         !error && it != end; it.increment(error)) {
      const std::string path = it->path().string();
      if (!it->is_regular_file() || !absl::EndsWith(path, ".cc") ||
          absl::EndsWith(path, "_test.cc")) {
        continue;
      }
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      files[path] = text.str();
    }
    if (error) {
      return absl::NotFoundError(
          absl::StrCat("cannot list ", source_dir, "/", component, ": ", error.message()));
    }
  }
  return files;
}

// "gauge" for "Gauge", "BuildGauge", "AddGauge".
std::string TypeOf(const std::string& builder) { return absl::AsciiStrToLower(builder); }

}  // namespace

absl::StatusOr<MetricFamilies> ParseMetricsTable(const std::string& markdown) {
  MetricFamilies out;
  for (absl::string_view line : absl::StrSplit(markdown, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(line, "| `psflow_")) continue;
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    // "", name, type, labels, meaning..., "" (a meaning may not contain '|')
    if (cells.size() != 6) {
      return absl::InvalidArgumentError(absl::StrCat("not a 4-column row: ", line));
    }
    absl::string_view name = absl::StripAsciiWhitespace(cells[1]);
    if (!absl::ConsumePrefix(&name, "`") || !absl::ConsumeSuffix(&name, "`")) {
      return absl::InvalidArgumentError(absl::StrCat("metric not in backquotes: ", line));
    }
    MetricFamily family;
    family.type = std::string(absl::StripAsciiWhitespace(cells[2]));
    const std::string labels(absl::StripAsciiWhitespace(cells[3]));
    if (labels != "-") {
      for (absl::string_view label : absl::StrSplit(labels, ',')) {
        family.labels.insert(std::string(absl::StripAsciiWhitespace(label)));
      }
    }
    if (!out.emplace(std::string(name), family).second) {
      return absl::InvalidArgumentError(absl::StrCat(name, " appears twice"));
    }
  }
  if (out.empty()) return absl::NotFoundError("no metric table rows");
  return out;
}

absl::StatusOr<MetricFamilies> RegisteredInSources(const std::string& source_dir) {
  auto files = ComponentSources(source_dir);
  if (!files.ok()) return files.status();
  // Add<Type>(registry, "name"), <Type>(registry, "name") (LateGauge's too) and
  // Build<Type>().Name("name"), the registry named by any identifier; \s spans lines.
  static const std::regex kRegistration(
      R"(\b(?:Add|Late|Build)?(Counter|Gauge|Histogram)\(\s*(?:\w+,\s*|\)\s*\.Name\(\s*)\"(psflow_[a-z0-9_]+)\")");
  MetricFamilies out;
  for (const auto& [path, text] : *files) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kRegistration);
         it != std::sregex_iterator(); ++it) {
      out[(*it)[2].str()].type = TypeOf((*it)[1].str());
    }
  }
  return out;
}

absl::StatusOr<std::set<std::string>> MetricNameLiteralsInSources(const std::string& source_dir) {
  auto files = ComponentSources(source_dir);
  if (!files.ok()) return files.status();
  static const std::regex kLiteral(R"(\"(psflow_(?:ps|worker|operator)_[a-z0-9_]+)\")");
  std::set<std::string> out;
  for (const auto& [path, text] : *files) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kLiteral);
         it != std::sregex_iterator(); ++it) {
      out.insert((*it)[1].str());
    }
  }
  return out;
}

MetricFamilies ParseExposition(const std::string& text) {
  MetricFamilies out;
  std::map<std::string, std::string> sample_family;  // "x_bucket" -> "x" for histograms
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (words.size() != 2) continue;
      out[words[0]].type = words[1];
      if (words[1] == "histogram" || words[1] == "summary") {
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          sample_family[words[0] + suffix] = words[0];
        }
      }
      sample_family[words[0]] = words[0];
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    const std::string name(line.substr(0, name_end));
    auto family = sample_family.find(name);
    MetricFamily& f = out[family == sample_family.end() ? name : family->second];
    if (name_end == absl::string_view::npos || line[name_end] != '{') continue;
    // {a="x",b="y"}: label values may hold anything escaped, so walk the quotes.
    size_t i = name_end + 1;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == absl::string_view::npos) break;
      const std::string label(absl::StripAsciiWhitespace(line.substr(i, eq - i)));
      if (label != "le" && label != "quantile") f.labels.insert(label);
      i = eq + 2;  // past ="
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      ++i;  // past the closing quote
      if (i < line.size() && line[i] == ',') ++i;
    }
  }
  return out;
}

}  // namespace psflow::observe
