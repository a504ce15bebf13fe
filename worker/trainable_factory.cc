#include "worker/trainable_factory.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace psflow {

absl::StatusOr<Backends> MakeBackends(const WorkerConfig& config) {
  Backends b;
  if (!config.gpu) {
    const int threads = config.compute_threads;
    b.all.push_back(nn::MakeCpuBackend(threads));
    b.description =
        absl::StrCat("the CPU backend (",
                     threads > 0 ? absl::StrCat(threads, " thread(s)") : "a thread per core", ", ",
                     nn::CpuKernels(), ")");
    return b;
  }
  const int first = config.first_gpu, n = config.num_gpus;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::unique_ptr<nn::Backend>> backend =
        nn::MakeCudaBackend(first + i, config.precision);
    if (!backend.ok()) {
      return n == 1 ? backend.status()
                    : absl::Status(backend.status().code(),
                                   absl::StrCat("--gpu=", first, " --num_gpus=", n, ": ",
                                                backend.status().message()));
    }
    b.all.push_back(*std::move(backend));
  }
  b.description =
      absl::StrCat(n == 1 ? "GPU " : "GPUs ", first, n == 1 ? "" : absl::StrCat("-", first + n - 1),
                   " (", nn::PrecisionName(config.precision), " products",
                   config.cuda_graphs ? ", CUDA graphs" : "", ")");
  return b;
}

absl::StatusOr<TrainableModel> MakeTrainable(const WorkerConfig& config, const Backends& backends) {
  const uint64_t seed = config.seed * 31 + static_cast<uint64_t>(config.shard_index);
  TrainableModel t;
  if (backends.all.size() > 1) {
    std::vector<nn::Backend*> raw;
    for (const auto& b : backends.all) raw.push_back(b.get());
    ASSIGN_OR_RETURN(t.towers, nn::Towers::Create(config.model.spec, raw, config.batch_size, seed));
    if (config.cuda_graphs) t.towers->EnableGraphs();
    t.trainable = t.towers.get();
    t.model = &t.towers->tower(0);
    return t;
  }
  ASSIGN_OR_RETURN(t.single,
                   nn::Model::Create(config.model.spec, *backends.all[0], config.batch_size, seed));
  if (config.cuda_graphs) t.single->EnableGraphs();
  t.trainable = t.single.get();
  t.model = t.single.get();
  return t;
}

}  // namespace psflow
