#include "worker/models/model_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/models/model_check.h"

namespace psflow::models {
namespace {

// "3.4 KiB", "12.5 MiB".
std::string Bytes(int64_t n) {
  const double b = static_cast<double>(n);
  if (b < 1024 * 1024) return absl::StrFormat("%.1f KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return absl::StrFormat("%.1f MiB", b / (1024 * 1024));
  return absl::StrFormat("%.2f GiB", b / (1024.0 * 1024 * 1024));
}

}  // namespace

std::string ModelSummary(const ModelDefinition& m, absl::string_view source) {
  const bool tokens = std::holds_alternative<nn::EmbeddingSpec>(m.spec.layers.front());
  const std::vector<LayerReport> layers = CheckModel(m.spec, tokens).value();
  std::string out =
      absl::StrFormat("%s: model \"%s\", input %s %s, %d classes, data %s\n", source, m.spec.name,
                      ShapeText(m.spec.input_shape), tokens ? "token_ids" : "float32",
                      m.spec.num_classes, DataFormatName(m.data.format));
  size_t width = 0;
  for (const LayerReport& l : layers) width = std::max(width, l.label.size());
  int64_t total = 0;
  for (const LayerReport& l : layers) {
    absl::StrAppendFormat(&out, "  %-*s  %s -> %s%s%s", width, l.label, ShapeText(l.input),
                          ShapeText(l.output), l.detail.empty() ? "" : ", ", l.detail);
    if (l.parameters > 0) absl::StrAppendFormat(&out, ", %d parameters", l.parameters);
    out += "\n";
    total += l.parameters;
  }
  const Recipe& r = m.recipe;
  absl::StrAppendFormat(&out,
                        "%s: valid: %d layers, %d parameters (%s as float32); %s at "
                        "learning rate %g, batches of %d, %d epoch%s%s\n",
                        source, layers.size(), total, Bytes(total * 4), r.optimizer,
                        r.learning_rate, r.batch_size, r.epochs, r.epochs == 1 ? "" : "s",
                        r.max_grad_norm > 0
                            ? absl::StrFormat(", gradients clipped at norm %g", r.max_grad_norm)
                            : "");
  return out;
}

}  // namespace psflow::models
