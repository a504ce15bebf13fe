// Sparse pulls through the whole worker (Trainer, OverlappedSync, PsClient) against real ps tasks
// on loopback: every step reads its batch's embedding rows fresh — as they are on the ps in the
// snapshot its values come from, other workers' updates included — although each pull brings only
// some rows. Serial, overlapped (both hand-overs, across epoch boundaries: Flush) and sync with two
// workers; on both transports.
//
// How "fresh" is checked exactly: a trainable whose every push adds 1 to a dense counter and 1 to
// each row its batch reads (gradients -1, SGD at rate 1; sync averages two workers: 1/2 per
// touch), so a pulled snapshot's counter says how many steps it holds, and each row's value must
// be what those steps' batches made of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ps/loopback_ps.h"
#include "worker/data/batch_source.h"
#include "worker/data/prefetcher.h"
#include "worker/overlapped_sync.h"
#include "worker/ps_client.h"
#include "worker/trainer.h"

namespace psflow {
namespace {

constexpr int64_t kVocab = 64;
constexpr int64_t kBatch = 5;
constexpr int64_t kBatchesPerEpoch = 6;

// The token ids of worker w's batch `step` (some repeated within a batch).
std::vector<int64_t> Ids(int worker, int64_t step) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kBatch; ++i) ids.push_back((step * 11 + i * 7 + worker * 3) % kVocab);
  ids.push_back(ids[0]);  // a repeated id: its row is read (and pushed) once
  return ids;
}

// Worker w's batches, one after the other, as floats (what an embedding's input holds).
class ScriptedIds final : public data::BatchSource {
 public:
  explicit ScriptedIds(int worker) : worker_(worker) {}
  int64_t batches_per_epoch() const override { return kBatchesPerEpoch; }
  void Fill(data::BatchBuffer& out) override {
    const std::vector<int64_t> ids = Ids(worker_, next_++);
    out.inputs.assign(ids.begin(), ids.end());
    out.labels.assign(ids.size(), 0);
    out.size = static_cast<int64_t>(ids.size());
  }

 private:
  const int worker_;
  int64_t next_ = 0;
};

// Handles: 0 the counter [1], 1 the embedding [kVocab, 1] (sparse).
class RowCheckingTrainable final : public nn::Trainable {
 public:
  // `workers` push every step (sync: averaged, each row's touch weighs 1 / workers); with
  // skip_every > 0 (one worker), every skip_every-th step's gradients are not finite (not pushed).
  RowCheckingTrainable(int workers, bool sync, int skip_every = 0)
      : workers_(workers), weight_(sync ? 0.5f : 1.0f), skip_every_(skip_every) {
    params_.Declare("counter", {1}, nn::Initializer::Zeros());
    params_.Declare("embedding", {kVocab, 1}, nn::Initializer::Zeros());
    params_.MarkSparse(1);
    params_.Finalize();
  }

  nn::ParameterSet& params() override { return params_; }
  int64_t labels_per_example() const override { return 1; }
  absl::Status ListRowsRead(const nn::Batch& batch, nn::ParameterSet& into) override {
    into.mutable_rows_to_pull(1) = Rows(batch);
    into.set_pulls_rows(true);
    return absl::OkStatus();
  }
  absl::StatusOr<double> ComputeGradients(const nn::Batch& batch, float) override {
    const std::vector<int64_t> rows = Rows(batch);
    const auto steps = static_cast<int64_t>(params_.value(0)[0]);
    for (int64_t r : rows) {
      float expected = 0;
      if (skip_every_ > 0) {  // one worker: the batches it pushed
        for (int64_t s = 0; s < steps && s < static_cast<int64_t>(pushed_.size()); ++s) {
          if (std::binary_search(pushed_[s].begin(), pushed_[s].end(), r)) expected += weight_;
        }
      }
      for (int w = 0; skip_every_ == 0 && w < workers_; ++w) {
        for (int64_t s = 0; s < steps; ++s) {
          const std::vector<int64_t> ids = Ids(w, s);
          if (std::find(ids.begin(), ids.end(), r) != ids.end()) expected += weight_;
        }
      }
      ++checked_;
      const float used = params_.value(1)[static_cast<size_t>(r)];
      if (used != expected && mismatches_.size() < 5) {
        mismatches_.push_back(absl::StrCat("step ", computed_, " (values of ", steps,
                                           " steps): row ", r, " is ", used, ", not ", expected));
      }
    }
    params_.grad(0)[0] = -1;
    for (int64_t r : rows) params_.grad(1)[static_cast<size_t>(r)] = -1;
    params_.SetTouchedRows(1, rows);
    ++computed_;
    finite_ = skip_every_ == 0 || computed_ % skip_every_ != 0;
    if (finite_) pushed_.push_back(rows);
    return 0.0;
  }
  void SetLossScale(float) override {}
  bool last_step_finite() const override { return finite_; }
  void ResetState() override {}

  int64_t checked() const { return checked_; }
  const std::vector<std::string>& mismatches() const { return mismatches_; }

 private:
  static std::vector<int64_t> Rows(const nn::Batch& batch) {
    std::vector<int64_t> rows(batch.inputs, batch.inputs + batch.size);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
  }

  const int workers_;
  const float weight_;
  const int skip_every_;
  bool finite_ = true;
  std::vector<std::vector<int64_t>> pushed_;  // the rows of each pushed step (skip_every_ > 0)
  nn::ParameterSet params_;
  int64_t computed_ = 0;
  int64_t checked_ = 0;
  std::vector<std::string> mismatches_;
};

// Sums the bytes of the pulls it passes on.
class CountingSync final : public ParameterSync {
 public:
  explicit CountingSync(ParameterSync& sync) : sync_(sync) {}
  absl::Status Prepare(const nn::ParameterSet& p, bool chief) override {
    return sync_.Prepare(p, chief);
  }
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override {
    absl::StatusOr<SyncResult> r = sync_.Pull(params);
    if (r.ok()) {
      pulled_bytes += r->bytes;
      ++pulls;
    }
    return r;
  }
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& p, int64_t examples) override {
    return sync_.Push(p, examples);
  }
  absl::Status SetLearningRate(float rate) override { return sync_.SetLearningRate(rate); }
  absl::Status Leave() override { return sync_.Leave(); }

  std::atomic<int64_t> pulled_bytes{0};
  std::atomic<int64_t> pulls{0};

 private:
  ParameterSync& sync_;
};

enum class Mode { kSerial, kOverlapSwap, kOverlapCopy };

struct SparsePullOutcome {
  int64_t checked = 0;
  std::vector<std::string> mismatches;
  int64_t pulled_bytes = 0;
  int64_t pulls = 0;
  int64_t global_step = 0;
  int64_t recorded_pulled_bytes = 0;  // what the trainer saw (TrainResult)
};

SparsePullOutcome TrainWorker(Transport transport, const std::vector<std::string>& ps, int worker,
                              int workers, bool sync, Mode mode, int64_t steps,
                              int skip_every = 0) {
  RowCheckingTrainable model(workers, sync, skip_every);
  PsClient::Options o;
  o.transport = transport;
  o.ps_addresses = ps;
  o.connect_timeout = std::chrono::seconds(20);
  o.rpc_timeout = std::chrono::seconds(20);
  o.training.optimizer.set_name("sgd");
  o.training.optimizer.set_learning_rate(1);
  o.training.sync.set_total_workers(workers);
  o.training.sync.set_sync_replicas(sync);
  o.training.worker_index = worker;
  auto client = PsClient::Create(o, model.params());
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  CountingSync counting(**client);
  std::unique_ptr<OverlappedSync> overlapped;
  if (mode != Mode::kSerial) {
    overlapped = std::make_unique<OverlappedSync>(
        counting, model.params(), mode == Mode::kOverlapSwap ? HandOver::kSwap : HandOver::kCopy);
  }
  data::Prefetcher input(std::make_unique<ScriptedIds>(worker));
  TrainerOptions options;
  options.train_steps = steps;
  options.is_chief = worker == 0;
  options.log_every_steps = 0;
  options.learning_rate = 1;
  Trainer trainer(model, overlapped ? static_cast<ParameterSync&>(*overlapped) : counting, input,
                  options, nullptr);
  absl::StatusOr<TrainResult> result = trainer.Run();
  EXPECT_TRUE(result.ok()) << result.status();
  SparsePullOutcome out;
  out.checked = model.checked();
  out.mismatches = model.mismatches();
  out.pulled_bytes = counting.pulled_bytes;
  out.pulls = counting.pulls;
  if (result.ok()) {
    out.global_step = result->global_step + result->skipped_steps;
    out.recorded_pulled_bytes = result->pulled_bytes;
  }
  return out;
}

class SparsePullTraining : public ::testing::TestWithParam<Transport> {};

std::string SparsePullTransportName(const ::testing::TestParamInfo<Transport>& info) {
  return info.param == Transport::kBulk ? "Bulk" : "Grpc";
}

// A whole pull: the counter and every row, float32.
constexpr int64_t kWholeBytes = (1 + kVocab) * 4;

// The trainer counted every pull's bytes but the final one's (whole, after Leave; with overlap it
// also carries the last two exchanges', whose values no step used: the one the last Push
// finished and the one the final Flush did, each a counter and a batch's rows at most).
void ExpectRecorded(const SparsePullOutcome& out) {
  EXPECT_LE(out.recorded_pulled_bytes, out.pulled_bytes - kWholeBytes);
  EXPECT_GE(out.recorded_pulled_bytes, out.pulled_bytes - kWholeBytes - 2 * (1 + kBatch) * 4);
}

constexpr Mode kModes[] = {Mode::kSerial, Mode::kOverlapSwap, Mode::kOverlapCopy};
const char* ModeName(Mode mode) {
  return mode == Mode::kSerial ? "serial" : mode == Mode::kOverlapSwap ? "swap" : "copy";
}

// One asynchronous worker through two ps tasks of its own, across epoch boundaries.
constexpr int64_t kAsyncSteps = 3 * kBatchesPerEpoch + 2;
SparsePullOutcome TrainAsync(Transport transport, Mode mode, int skip_every = 0) {
  LoopbackPs ps0, ps1;
  EXPECT_TRUE(ps0.started() && ps1.started());
  return TrainWorker(transport, {ps0.address(), ps1.address()}, 0, 1, false, mode, kAsyncSteps,
                     skip_every);
}

TEST_P(SparsePullTraining, AsyncStepsReadTheirRowsFreshSerialAndOverlapped) {
  for (const Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    const int64_t steps = kAsyncSteps;
    const SparsePullOutcome out = TrainAsync(GetParam(), mode);
    EXPECT_EQ(out.checked, steps * kBatch) << "every step's rows were checked";
    EXPECT_TRUE(out.mismatches.empty()) << out.mismatches.front();
    EXPECT_EQ(out.global_step, steps);
    // Most pulls brought a batch's rows, not the table: well under a whole pull each.
    EXPECT_LT(out.pulled_bytes, out.pulls * kWholeBytes / 2) << out.pulls << " pulls";
    ExpectRecorded(out);
  }
}

// Steps whose gradients are not finite push nothing: the next step still reads its rows fresh
// (overlapped, the exchange in flight is flushed for it).
TEST_P(SparsePullTraining, AStepAfterASkippedOneReadsItsRowsFresh) {
  for (const Mode mode : kModes) {
    SCOPED_TRACE(ModeName(mode));
    const int64_t steps = kAsyncSteps;
    const SparsePullOutcome out = TrainAsync(GetParam(), mode, /*skip_every=*/4);
    EXPECT_EQ(out.checked, steps * kBatch);
    EXPECT_TRUE(out.mismatches.empty()) << out.mismatches.front();
    EXPECT_EQ(out.global_step, steps);  // the pushed steps and the skipped ones
  }
}

// Sync, two workers: a step reads the rows its batch shares with the other worker's batches as
// the aggregate of both left them.
TEST_P(SparsePullTraining, SyncStepsReadRowsTheOtherWorkerUpdated) {
  LoopbackPs ps0, ps1;
  ASSERT_TRUE(ps0.started() && ps1.started());
  const std::vector<std::string> ps = {ps0.address(), ps1.address()};
  const int64_t steps = 2 * kBatchesPerEpoch + 1;
  SparsePullOutcome outcomes[2];
  std::thread other(
      [&] { outcomes[1] = TrainWorker(GetParam(), ps, 1, 2, true, Mode::kSerial, steps); });
  outcomes[0] = TrainWorker(GetParam(), ps, 0, 2, true, Mode::kSerial, steps);
  other.join();
  for (const SparsePullOutcome& out : outcomes) {
    // Every step, the last too: a worker that finishes first still counts in the step it pushed
    // to (ps/sync_step_rules.h), so that step waits for the other's push.
    EXPECT_EQ(out.checked, steps * kBatch);
    EXPECT_TRUE(out.mismatches.empty()) << out.mismatches.front();
    EXPECT_EQ(out.global_step, steps);
    EXPECT_LT(out.pulled_bytes, out.pulls * kWholeBytes / 2) << out.pulls << " pulls";
    ExpectRecorded(out);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, SparsePullTraining,
                         ::testing::Values(Transport::kBulk, Transport::kGrpc),
                         SparsePullTransportName);

}  // namespace
}  // namespace psflow
