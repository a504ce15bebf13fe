#include "worker/worker_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace psflow {
namespace {

ClusterSpec Alone() {
  ClusterSpec s;
  s.cluster["worker"] = {"localhost:0"};
  s.task = {"worker", 0};
  return s;
}

// One worker, an evaluator and (with_ps) two ps tasks; this process is `type` `index`.
ClusterSpec SmallCluster(const std::string& type, int index, bool with_ps) {
  ClusterSpec s;
  s.cluster["worker"] = {"w:1"};
  if (with_ps) s.cluster["ps"] = {"p:1", "p:2"};
  s.cluster["evaluator"] = {"e:1"};
  s.task = {type, index};
  return s;
}

// A chief, two workers, an evaluator and (with_ps) two ps tasks.
ClusterSpec Cluster(const std::string& type, int index, bool with_ps = true) {
  ClusterSpec s = SmallCluster(type, index, with_ps);
  s.cluster["chief"] = {"c:1"};
  s.cluster["worker"] = {"w:1", "w:2"};
  return s;
}

TEST(WorkerConfig, FlagsLeftUnsetTakeTheModelsRecipe) {
  const absl::StatusOr<WorkerConfig> c =
      MakeWorkerConfig(WorkerFlags{.model = "ptb_lstm", .model_config = "small"}, Alone(), true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->batch_size, 20);
  EXPECT_EQ(c->learning_rate, 1.0f);
  EXPECT_EQ(c->max_grad_norm, 5.0f);
  EXPECT_EQ(c->train_epochs, 13);
  EXPECT_EQ(c->training.optimizer.name(), "sgd");
  EXPECT_TRUE(c->is_chief);
  EXPECT_TRUE(c->ps_hosts.empty());
  EXPECT_FALSE(c->overlap);  // nothing to overlap with alone
  EXPECT_EQ(c->precision, nn::Precision::kFp32);
  EXPECT_EQ(c->loss_scale.mode, nn::LossScaleOptions::Mode::kNone);
}

TEST(WorkerConfig, FlagsGivenWinAndTheClusterPlacesTheTask) {
  const WorkerFlags flags{.batch_size = 7,
                          .learning_rate = 0.5f,
                          .optimizer = "adam",
                          .max_grad_norm = 0,
                          .replicas_to_aggregate = 2,
                          .train_steps = 11,
                          .train_seconds = 2.5,
                          .device = "gpu",
                          .num_gpus = 2,
                          .use_fp16 = true};
  const absl::StatusOr<WorkerConfig> c = MakeWorkerConfig(flags, Cluster("worker", 1), false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->batch_size, 7);
  EXPECT_EQ(c->training.optimizer.name(), "adam");
  EXPECT_EQ(c->max_grad_norm, 0.0f);
  EXPECT_EQ(c->num_trainers, 3);  // the chief trains too
  EXPECT_EQ(c->shard_index, 2);   // after the chief's shard 0
  EXPECT_FALSE(c->is_chief);
  EXPECT_EQ(c->training.sync.total_workers(), 3);
  EXPECT_EQ(c->training.worker_index, 2);
  EXPECT_EQ(c->ps_hosts, (std::vector<std::string>{"p:1", "p:2"}));
  EXPECT_TRUE(c->overlap);
  EXPECT_EQ(c->precision, nn::Precision::kFp16);
  EXPECT_EQ(c->loss_scale.mode, nn::LossScaleOptions::Mode::kDynamic);  // auto with fp16
  EXPECT_EQ(c->train_steps, 11);
  EXPECT_EQ(c->train_seconds, 2.5);
  const absl::StatusOr<WorkerConfig> sync =
      MakeWorkerConfig(WorkerFlags{.sync_replicas = true}, Cluster("chief", 0), false);
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_FALSE(sync->overlap);  // sync steps wait for each other
  EXPECT_TRUE(sync->is_chief);
  EXPECT_EQ(sync->shard_index, 0);
}

struct Refused {
  const char* what;
  std::function<void(WorkerFlags&)> flags;
  ClusterSpec spec;
  bool standalone;
  absl::StatusCode code;
  std::string message;  // a part of the one line
};

// Every contradiction tests/bad_input_test.cc checks on the binary, and the rest, one row each.
std::vector<Refused> RefusedConfigs() {
  using F = WorkerFlags&;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  return {
      {"ps task type", [](F) {}, Cluster("ps", 0), false, kInvalid, "task type \"ps\""},
      {"workers without ps", [](F) {}, Cluster("worker", 0, false), false, kInvalid,
       "several workers need at least one ps task"},
      {"evaluator without ps", [](F) {}, SmallCluster("evaluator", 0, false), false, kInvalid,
       "an evaluator follows the ps tasks"},
      {"eval interval", [](F f) { f.eval_interval_s = 0; }, Alone(), true, kInvalid,
       "--eval_interval_s must be > 0"},
      {"unknown model", [](F f) { f.model = "resnet50"; }, Alone(), true,
       absl::StatusCode::kNotFound, "unknown model \"resnet50\""},
      {"unknown ptb config", [](F f) { f.model = "ptb_lstm", f.model_config = "huge"; }, Alone(),
       true, absl::StatusCode::kNotFound, "huge"},
      {"batch size", [](F f) { f.batch_size = -1; }, Alone(), true, kInvalid,
       "--batch_size must be >= 1"},
      {"learning rate", [](F f) { f.learning_rate = -1; }, Alone(), true, kInvalid,
       "--learning_rate must be > 0"},
      {"no ps connections", [](F f) { f.ps_connections = 0; }, Alone(), true, kInvalid,
       "--ps_connections must be in [1, 64], got 0"},
      {"too many ps connections", [](F f) { f.ps_connections = 65; }, Alone(), true, kInvalid,
       "--ps_connections must be in [1, 64], got 65"},
      {"wire dtype", [](F f) { f.wire_dtype = "fp8"; }, Alone(), true, kInvalid,
       "--wire_dtype must be float32, bfloat16 or float16, got \"fp8\""},
      {"placement", [](F f) { f.placement = "random"; }, Alone(), true, kInvalid,
       "--placement: unknown placement \"random\" (balanced or round_robin)"},
      {"clip NaN", [](F f) { f.max_grad_norm = std::nanf(""); }, Alone(), true, kInvalid,
       "--max_grad_norm is NaN"},
      {"replicas to aggregate", [](F f) { f.replicas_to_aggregate = 4; }, Cluster("worker", 0),
       false, kInvalid, "--replicas_to_aggregate must be in [0, 3]"},
      {"optimizer", [](F f) { f.optimizer = "adamw"; }, Alone(), true, kInvalid, "adamw"},
      {"epochs", [](F f) { f.train_epochs = -1; }, Alone(), true, kInvalid,
       "--train_epochs must be >= 1"},
      {"steps", [](F f) { f.train_steps = -1; }, Alone(), true, kInvalid,
       "--train_epochs must be >= 1 (or --train_steps >= 1)"},
      {"seconds negative", [](F f) { f.train_seconds = -1; }, Alone(), true, kInvalid,
       "--train_seconds must be a number of seconds >= 0, got -1"},
      {"seconds NaN", [](F f) { f.train_seconds = std::nan(""); }, Alone(), true, kInvalid,
       "--train_seconds must be a number of seconds >= 0, got nan"},
      {"seconds infinite", [](F f) { f.train_seconds = HUGE_VAL; }, Alone(), true, kInvalid,
       "--train_seconds must be a number of seconds >= 0, got inf"},
      {"data source", [](F f) { f.data_source = "imagenet"; }, Alone(), true, kInvalid,
       "--data_source must be real or synthetic, got \"imagenet\""},
      {"synthetic evaluator", [](F f) { f.data_source = "synthetic"; }, Cluster("evaluator", 0),
       false, kInvalid, "an evaluator needs a test split"},
      {"eval steps", [](F f) { f.eval_steps = -1; }, Alone(), true, kInvalid,
       "--eval_steps must be >= 0"},
      {"threads", [](F f) { f.compute_threads = 100000; }, Alone(), true, kInvalid,
       "--compute_threads must be between 0 and 1024"},
      {"device", [](F f) { f.device = "tpu"; }, Alone(), true, kInvalid,
       "--device must be cpu or gpu, got \"tpu\""},
      {"gpu index", [](F f) { f.gpu = -1; }, Alone(), true, kInvalid, "--gpu must be >= 0"},
      {"no gpus", [](F f) { f.num_gpus = 0; }, Alone(), true, kInvalid, "--num_gpus must be >= 1"},
      {"gpus on the cpu", [](F f) { f.num_gpus = 2; }, Alone(), true, kInvalid,
       "--num_gpus > 1 needs --device=gpu"},
      {"graphs on the cpu", [](F f) { f.cuda_graphs = true; }, Alone(), true, kInvalid,
       "--cuda_graphs needs --device=gpu"},
      {"ps timeout", [](F f) { f.ps_timeout_s = 0; }, Alone(), true, kInvalid,
       "--ps_timeout_s must be >= 1"},
      {"startup timeout", [](F f) { f.startup_timeout_s = -1; }, Alone(), true, kInvalid,
       "--startup_timeout_s must be >= 0 (0: no limit)"},
      {"dtype", [](F f) { f.dtype = "fp8"; }, Alone(), true, kInvalid, "--dtype "},
      {"fp16 against bf16", [](F f) { f.device = "gpu", f.dtype = "bf16", f.use_fp16 = true; },
       Alone(), true, kInvalid, "--use_fp16 contradicts --dtype=bf16"},
      {"bf16 on the cpu", [](F f) { f.dtype = "bf16"; }, Alone(), true, kInvalid,
       "--dtype=bf16 needs --device=gpu"},
      {"loss scale", [](F f) { f.loss_scale = "huge"; }, Alone(), true, kInvalid, "--loss_scale "},
      {"compute mode", [](F f) { f.compute = "simulated"; }, Alone(), true, kInvalid,
       "--compute must be real, replay:MS or replay:measured, got \"simulated\""},
      {"replay without ms", [](F f) { f.compute = "replay:"; }, Alone(), true, kInvalid,
       "--compute=replay:MS needs MS"},
      {"replay ms zero", [](F f) { f.compute = "replay:0"; }, Alone(), true, kInvalid,
       "a positive number, got \"0\""},
      {"replay ms negative", [](F f) { f.compute = "replay:-5"; }, Alone(), true, kInvalid,
       "got \"-5\""},
      {"replay ms infinite", [](F f) { f.compute = "replay:inf"; }, Alone(), true, kInvalid,
       "got \"inf\""},
      {"replay ms NaN", [](F f) { f.compute = "replay:nan"; }, Alone(), true, kInvalid,
       "got \"nan\""},
      {"replay ms text", [](F f) { f.compute = "replay:20ms"; }, Alone(), true, kInvalid,
       "got \"20ms\""},
      {"replay on a gpu", [](F f) { f.compute = "replay:20", f.device = "gpu"; }, Alone(), true,
       kInvalid, "--compute=replay runs on the CPU backend"},
  };
}

TEST(WorkerConfig, ComputeIsRealOrAReplayedStepTime) {
  const absl::StatusOr<WorkerConfig> real = MakeWorkerConfig(WorkerFlags{}, Alone(), true);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_FALSE(real->compute.replay());
  EXPECT_EQ(real->compute.label, "real");
  const absl::StatusOr<WorkerConfig> fixed =
      MakeWorkerConfig(WorkerFlags{.compute = "replay:12.5"}, Alone(), true);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->compute.kind, ComputeMode::Kind::kReplay);
  EXPECT_EQ(fixed->compute.step_ms, 12.5);
  EXPECT_EQ(fixed->compute.label, "replay:12.5");
  const absl::StatusOr<WorkerConfig> measured =
      MakeWorkerConfig(WorkerFlags{.compute = "replay:measured"}, Alone(), true);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->compute.kind, ComputeMode::Kind::kReplayMeasured);
  EXPECT_EQ(measured->compute.label, "replay:measured");
}

TEST(WorkerConfig, EveryContradictionIsOneLineNamingTheFlag) {
  for (const Refused& r : RefusedConfigs()) {
    SCOPED_TRACE(r.what);
    WorkerFlags flags;
    r.flags(flags);
    const absl::StatusOr<WorkerConfig> c = MakeWorkerConfig(flags, r.spec, r.standalone);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), r.code) << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), r.message)) << c.status();
    EXPECT_FALSE(absl::StrContains(c.status().message(), "\n")) << c.status();
  }
}

// --ps_timeout_s bounds every call to a ps, not only the connection: a sync step longer than
// 60 s, or a ps whose --push_timeout_s is above 60 s, needs the workers' pulls to wait longer.
TEST(WorkerConfig, PsTimeoutIsTheCallDeadlineToo) {
  const absl::StatusOr<WorkerConfig> c =
      MakeWorkerConfig(WorkerFlags{.ps_timeout_s = 150}, Cluster("worker", 1), false);
  ASSERT_TRUE(c.ok()) << c.status();
  const PsClient::Options o = MakePsClientOptions(*c, TransportSecurity{});
  EXPECT_EQ(o.connect_timeout, std::chrono::seconds(150));
  EXPECT_EQ(o.rpc_timeout, std::chrono::seconds(150));
  EXPECT_EQ(o.startup_timeout, std::chrono::seconds(0));  // the default: no limit
  EXPECT_EQ(o.ps_addresses, (std::vector<std::string>{"p:1", "p:2"}));
  EXPECT_EQ(o.training.worker_index, c->training.worker_index);
  EXPECT_TRUE(o.pushes);
  // An evaluator only pulls: whatever its optimizer flags, the ps's training is not its to check.
  const absl::StatusOr<WorkerConfig> evaluator =
      MakeWorkerConfig(WorkerFlags{.optimizer = "adam"}, Cluster("evaluator", 0), false);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  EXPECT_FALSE(MakePsClientOptions(*evaluator, TransportSecurity{}).pushes);
}

// --startup_timeout_s reaches the client as it is; 0 (the default) is no limit.
TEST(WorkerConfig, StartupTimeoutIsTheClientsStartupWait) {
  const absl::StatusOr<WorkerConfig> c =
      MakeWorkerConfig(WorkerFlags{.startup_timeout_s = 45}, Cluster("worker", 1), false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(MakePsClientOptions(*c, TransportSecurity{}).startup_timeout, std::chrono::seconds(45));
}

// --ps_connections reaches the client as its connections per task; 1 by default.
TEST(WorkerConfig, PsConnectionsAreTheClientsConnectionsPerTask) {
  for (const int n : {1, 4, 64}) {
    const absl::StatusOr<WorkerConfig> c =
        MakeWorkerConfig(WorkerFlags{.ps_connections = n}, Cluster("worker", 1), false);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(MakePsClientOptions(*c, TransportSecurity{}).connections_per_task, n);
  }
  const absl::StatusOr<WorkerConfig> c = MakeWorkerConfig({}, Cluster("worker", 1), false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(MakePsClientOptions(*c, TransportSecurity{}).connections_per_task, 1);
}

TEST(WorkerConfig, TheHandOverCopiesOnlyForGraphsThatStreamToTheHost) {
  struct Row {
    bool cuda_graphs;
    int num_gpus;
    float max_grad_norm;
    nn::LossScaleOptions::Mode loss_scale;
    HandOver want;
  };
  using Mode = nn::LossScaleOptions::Mode;
  const Row rows[] = {
      {false, 1, 0, Mode::kNone, HandOver::kSwap},   {false, 2, 5, Mode::kDynamic, HandOver::kSwap},
      {true, 1, 0, Mode::kNone, HandOver::kCopy},     // per-layer copies recorded
      {true, 1, 5, Mode::kNone, HandOver::kSwap},     // clipped: one copy after the graph
      {true, 1, 0, Mode::kStatic, HandOver::kSwap},   // loss scaling: the same
      {true, 1, 0, Mode::kDynamic, HandOver::kSwap},  //
      {true, 2, 0, Mode::kNone, HandOver::kSwap},     // towers reduce after their graphs
  };
  for (const Row& r : rows) {
    WorkerConfig c;
    c.cuda_graphs = r.cuda_graphs;
    c.num_gpus = r.num_gpus;
    c.max_grad_norm = r.max_grad_norm;
    c.loss_scale.mode = r.loss_scale;
    EXPECT_EQ(HandOverFor(c), r.want) << r.cuda_graphs << " " << r.num_gpus << " "
                                      << r.max_grad_norm << " " << static_cast<int>(r.loss_scale);
  }
}

}  // namespace
}  // namespace psflow
