#include "ps/step_coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;
using Verdict = StepCoordinator::Verdict;
using std::chrono::milliseconds;

// A deadline no test reaches: a call parked with it is answered by a step, Stop or nothing.
constexpr auto kLongWait = std::chrono::hours(1);
// How long an answer that is due may take to arrive (generous, for sanitizer builds).
constexpr auto kPrompt = std::chrono::seconds(10);
// Long enough to see a call stay parked.
constexpr auto kShortWait = milliseconds(50);

// A parked call's answer: the future is set once, by whichever thread answers.
struct ParkedCall {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  std::future<bool> answer;
};

ParkedCall Park(StepCoordinator& c, int64_t min_step, Clock::time_point deadline) {
  auto promise = std::make_shared<std::promise<bool>>();
  ParkedCall call;
  call.answer = promise->get_future();
  c.Park(min_step, {}, deadline, [promise, calls = call.calls](bool reached) {
    if (calls->fetch_add(1) == 0) promise->set_value(reached);
  });
  return call;
}

bool Answered(const ParkedCall& call, Clock::duration wait = kShortWait) {
  return call.answer.wait_for(wait) == std::future_status::ready;
}

proto::SyncConfig AsyncWorkers(int workers) {
  proto::SyncConfig s;
  s.set_sync_replicas(false);
  s.set_total_workers(workers);
  return s;
}

proto::SyncConfig SyncWorkers(int workers, int aggregate) {
  proto::SyncConfig s;
  s.set_sync_replicas(true);
  s.set_total_workers(workers);
  s.set_replicas_to_aggregate(aggregate);
  return s;
}

proto::TransferHeader Push(int worker, int64_t step, uint32_t chunk = 0, uint32_t num_chunks = 1) {
  proto::TransferHeader h;
  h.set_kind(proto::TK_GRADIENT);
  h.set_worker(worker);
  h.set_step(step);
  h.set_chunk(chunk);
  h.set_num_chunks(num_chunks);
  return h;
}

// Admit, then wake what it made due (async: the calls parked for the step its push opened), as
// PsState does once it holds no lock.
absl::StatusOr<StepCoordinator::Admission> AdmitAndWake(StepCoordinator& c,
                                                        const proto::TransferHeader& h) {
  absl::StatusOr<StepCoordinator::Admission> a = c.Admit(h);
  if (a.ok()) StepCoordinator::Wake(std::move(a->wake));
  return a;
}

// --- Step watch (the checkpoint scheduler's wake-up) -------------------------------------------

TEST(StepCoordinatorTest, StepWatchFiresOnceAtItsTargetAndAtOnceWhenReached) {
  StepCoordinator c;
  int fired = 0;
  c.WatchStep(2, [&] { ++fired; });
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  EXPECT_EQ(fired, 0);
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0)).ok());
  EXPECT_EQ(fired, 0);
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 1)).ok());  // the step is 2
  EXPECT_EQ(fired, 1);
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 2)).ok());
  EXPECT_EQ(fired, 1);                   // once
  c.WatchStep(3, [&] { fired += 10; });  // reached already: on this thread, before returning
  EXPECT_EQ(fired, 11);
}

TEST(StepCoordinatorTest, StepWatchIsReplacedAndCleared) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  int first = 0, second = 0;
  c.WatchStep(1, [&] { ++first; });
  c.WatchStep(1, [&] { ++second; });
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0)).ok());
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  c.WatchStep(2, [&] { ++first; });
  c.ClearStepWatch();
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 1)).ok());
  EXPECT_EQ(first, 0);
}

TEST(StepCoordinatorTest, StepWatchFiresWhenStartRestoresPastItsTarget) {
  StepCoordinator c;
  int fired = 0;
  c.WatchStep(100, [&] { ++fired; });
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 1139).ok());
  EXPECT_EQ(fired, 1);
}

// --- Parking ---------------------------------------------------------------------------------

TEST(StepCoordinatorTest, NotReadyBeforeStart) {
  StepCoordinator c;
  EXPECT_FALSE(c.ready());
  EXPECT_EQ(c.step(), -1);
}

TEST(StepCoordinatorTest, ParkBeforeStartWaitsUntilStart) {
  StepCoordinator c;
  ParkedCall ready = Park(c, 0, Clock::now() + kLongWait);
  ParkedCall later = Park(c, 3, Clock::now() + kLongWait);
  EXPECT_FALSE(Answered(ready));
  EXPECT_EQ(ready.calls->load(), 0);

  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  EXPECT_TRUE(c.ready());
  EXPECT_EQ(c.step(), 0);
  ASSERT_TRUE(Answered(ready, kPrompt));
  EXPECT_TRUE(ready.answer.get());
  EXPECT_EQ(ready.calls->load(), 1);
  // Step 3 is not reached yet.
  EXPECT_FALSE(Answered(later));
  c.Stop();
  ASSERT_TRUE(Answered(later, kPrompt));
  EXPECT_FALSE(later.answer.get());
}

TEST(StepCoordinatorTest, StartAtRestoredStepWakesCallsUpToIt) {
  StepCoordinator c;
  ParkedCall five = Park(c, 5, Clock::now() + kLongWait);
  ParkedCall six = Park(c, 6, Clock::now() + kLongWait);
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 5).ok());
  EXPECT_EQ(c.step(), 5);
  ASSERT_TRUE(Answered(five, kPrompt));
  EXPECT_TRUE(five.answer.get());
  EXPECT_FALSE(Answered(six));
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 5)).ok());
  EXPECT_EQ(c.step(), 6);
  ASSERT_TRUE(Answered(six, kPrompt));
  EXPECT_TRUE(six.answer.get());
}

TEST(StepCoordinatorTest, ParkAnswersAtOnceWhenTheStepIsReached) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 2).ok());
  int calls = 0;
  bool reached = false;
  // Answered on this thread, before Park returns.
  c.Park(2, {}, Clock::now() + kLongWait, [&](bool r) {
    ++calls;
    reached = r;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(reached);
  c.Park(0, {}, Clock::now() - std::chrono::seconds(1), [&](bool r) {
    ++calls;
    reached = r;
  });
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(reached);  // reached wins over an expired deadline
}

TEST(StepCoordinatorTest, ParkWithPastDeadlineAnswersFalse) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  ParkedCall call = Park(c, 1, Clock::now() - milliseconds(1));
  ASSERT_TRUE(Answered(call, kPrompt));
  EXPECT_FALSE(call.answer.get());
  EXPECT_EQ(c.step(), 0);
}

TEST(StepCoordinatorTest, ParkBeforeStartWithPastDeadlineAnswersFalse) {
  StepCoordinator c;
  ParkedCall call = Park(c, 0, Clock::now() - milliseconds(1));
  ASSERT_TRUE(Answered(call, kPrompt));
  EXPECT_FALSE(call.answer.get());
}

TEST(StepCoordinatorTest, ParkWithNearDeadlineAnswersFalseAfterIt) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  const auto start = Clock::now();
  const auto deadline = start + milliseconds(100);
  ParkedCall call = Park(c, 1, deadline);
  ASSERT_TRUE(Answered(call, kPrompt));
  EXPECT_GE(Clock::now(), deadline);
  EXPECT_FALSE(call.answer.get());
  EXPECT_EQ(call.calls->load(), 1);
}

TEST(StepCoordinatorTest, DeadlinesAreAnsweredInTheirOwnOrder) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  // Parked first with the later deadline: the timer must still wake for the earlier one.
  ParkedCall late = Park(c, 1, Clock::now() + kLongWait);
  ParkedCall early = Park(c, 1, Clock::now() + milliseconds(20));
  ASSERT_TRUE(Answered(early, kPrompt));
  EXPECT_FALSE(early.answer.get());
  EXPECT_FALSE(Answered(late, milliseconds(1)));
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0)).ok());
  ASSERT_TRUE(Answered(late, kPrompt));
  EXPECT_TRUE(late.answer.get());
}

TEST(StepCoordinatorTest, ReachedBeforeTheDeadlineIsAnsweredOnce) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  ParkedCall call = Park(c, 1, Clock::now() + milliseconds(300));
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0)).ok());
  // Answered by the Wake of the call that advanced the step, before it returned.
  EXPECT_EQ(call.calls->load(), 1);
  ASSERT_TRUE(Answered(call, milliseconds(0)));
  EXPECT_TRUE(call.answer.get());
  std::this_thread::sleep_for(milliseconds(400));  // past the deadline: no second answer
  EXPECT_EQ(call.calls->load(), 1);
}

TEST(StepCoordinatorTest, StopAnswersParkedCallsAndLaterParksWithFalse) {
  StepCoordinator c;
  ParkedCall before_start = Park(c, 0, Clock::now() + kLongWait);
  ParkedCall pending = Park(c, 7, Clock::now() + kLongWait);
  c.Stop();
  ASSERT_TRUE(Answered(before_start, kPrompt));
  ASSERT_TRUE(Answered(pending, kPrompt));
  EXPECT_FALSE(before_start.answer.get());
  EXPECT_FALSE(pending.answer.get());

  int calls = 0;
  bool reached = true;
  c.Park(0, {}, Clock::now() + kLongWait, [&](bool r) {
    ++calls;
    reached = r;
  });
  EXPECT_EQ(calls, 1);  // at once, on this thread
  EXPECT_FALSE(reached);
}

TEST(StepCoordinatorTest, StopAfterStartAnswersEvenReachableStepsWithFalse) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 4).ok());
  c.Stop();
  int calls = 0;
  bool reached = true;
  c.Park(1, {}, Clock::now() + kLongWait, [&](bool r) {
    ++calls;
    reached = r;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(reached);
}

TEST(StepCoordinatorTest, DestructorAnswersParkedCalls) {
  ParkedCall call;
  {
    StepCoordinator c;
    call = Park(c, 0, Clock::now() + kLongWait);
  }
  ASSERT_TRUE(Answered(call, milliseconds(0)));
  EXPECT_FALSE(call.answer.get());
}

TEST(StepCoordinatorTest, ManyThreadsParkWhileTheStepAdvances) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  constexpr int kCalls = 64;
  std::vector<ParkedCall> calls(kCalls);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kCalls; i += 4) calls[i] = Park(c, i % 16 + 1, Clock::now() + kLongWait);
    });
  }
  std::thread pusher([&] {
    for (int s = 0; s < 16; ++s) ASSERT_TRUE(AdmitAndWake(c, Push(0, s)).ok());
  });
  for (auto& t : threads) t.join();
  pusher.join();
  EXPECT_EQ(c.step(), 16);
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(Answered(calls[i], kPrompt)) << i;
    EXPECT_TRUE(calls[i].answer.get()) << i;
    EXPECT_EQ(calls[i].calls->load(), 1) << i;
  }
}

// --- Start ------------------------------------------------------------------------------------

TEST(StepCoordinatorTest, StartRejectsBadSyncConfigs) {
  StepCoordinator c;
  EXPECT_EQ(c.Start(AsyncWorkers(0), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Start(SyncWorkers(2, -1), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Start(SyncWorkers(2, 3), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(c.ready());
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  EXPECT_TRUE(c.ready());
  EXPECT_TRUE(c.sync().sync_replicas());
  EXPECT_EQ(c.sync().total_workers(), 2);
  EXPECT_EQ(c.sync().replicas_to_aggregate(), 2);
}

TEST(StepCoordinatorTest, AdmitBeforeStartIsFailedPrecondition) {
  StepCoordinator c;
  EXPECT_EQ(c.Admit(Push(0, 0)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.step(), -1);
}

// --- Async --------------------------------------------------------------------------------------

TEST(StepCoordinatorTest, AsyncPushCountsOnceWithTheStepItsFirstChunkFound) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(2), 0).ok());

  auto a = c.Admit(Push(0, 0, 0, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kApply);
  EXPECT_EQ(a->step, 0);
  EXPECT_EQ(a->staleness, 0);
  EXPECT_TRUE(a->opens_push);
  EXPECT_FALSE(a->closes_push);
  EXPECT_EQ(c.step(), 1);
  ASSERT_EQ(c.open_pushes().size(), 1u);
  EXPECT_EQ(c.open_pushes()[0].chunks_left, 1u);

  // Chunk 1 of the same push: no new step, applied with the push's step.
  a = c.Admit(Push(0, 0, 1, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kApply);
  EXPECT_EQ(a->step, 0);
  EXPECT_EQ(a->staleness, 0);
  EXPECT_FALSE(a->opens_push);
  EXPECT_TRUE(a->closes_push);
  EXPECT_EQ(c.step(), 1);
  EXPECT_TRUE(c.open_pushes().empty());

  // Chunks in any order: the first to arrive opens the push.
  a = c.Admit(Push(0, 1, 2, 3));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->opens_push);
  EXPECT_EQ(a->step, 1);
  EXPECT_EQ(c.step(), 2);
  a = c.Admit(Push(0, 1, 0, 3));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->opens_push);
  EXPECT_EQ(a->step, 1);
  // A chunk already in starts another push (the worker restarted): the step counts it.
  a = c.Admit(Push(0, 1, 0, 3));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->opens_push);
  EXPECT_EQ(a->step, 2);
  EXPECT_EQ(a->staleness, 1);
  EXPECT_EQ(c.step(), 3);

  a = c.Admit(Push(1, 0, 0, 2));  // worker 1, computed at step 0: three steps stale
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kApply);
  EXPECT_EQ(a->step, 3);
  EXPECT_EQ(a->staleness, 3);
  EXPECT_EQ(c.step(), 4);

  a = c.Admit(Push(0, 4));  // worker 0's half push ends as it is
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->step, 4);
  EXPECT_EQ(a->staleness, 0);
  EXPECT_EQ(c.step(), 5);

  a = c.Admit(Push(1, 0));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kApply);  // async never drops stale gradients
  EXPECT_EQ(a->step, 5);
  EXPECT_EQ(a->staleness, 5);
  EXPECT_EQ(c.step(), 6);
}

TEST(StepCoordinatorTest, AsyncChunkZeroWakesTheCallsParkedForTheNewStep) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  ParkedCall one = Park(c, 1, Clock::now() + kLongWait);
  ParkedCall two = Park(c, 2, Clock::now() + kLongWait);
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0, 0, 2)).ok());
  EXPECT_EQ(one.calls->load(), 1);  // answered before Admit returned
  ASSERT_TRUE(Answered(one, milliseconds(0)));
  EXPECT_TRUE(one.answer.get());
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0, 1, 2)).ok());  // chunk 1: no new step
  EXPECT_FALSE(Answered(two));
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 1)).ok());
  EXPECT_EQ(two.calls->load(), 1);
  ASSERT_TRUE(Answered(two, milliseconds(0)));
  EXPECT_TRUE(two.answer.get());
}

TEST(StepCoordinatorTest, AsyncStalenessFromARestoredStep) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 100).ok());
  auto a = c.Admit(Push(0, 97));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->step, 100);
  EXPECT_EQ(a->staleness, 3);
  EXPECT_EQ(c.step(), 101);
}

TEST(StepCoordinatorTest, AsyncRejectsBadHeadersWithoutMovingTheStep) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(2), 0).ok());
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0)).ok());
  ASSERT_EQ(c.step(), 1);

  const struct {
    const char* what;
    proto::TransferHeader header;
  } cases[] = {
      {"step from the future", Push(0, 2)}, {"worker past the end", Push(kMaxWorkers, 0)},
      {"negative worker", Push(-1, 0)},     {"chunk past num_chunks", Push(0, 0, 2, 2)},
      {"zero chunks", Push(0, 0, 0, 0)},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.what);
    auto a = c.Admit(bad.header);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.step(), 1);
  }
  auto a = c.Admit(Push(0, 2));
  EXPECT_NE(a.status().message().find("future"), std::string::npos) << a.status();
  a = c.Admit(Push(kMaxWorkers + 1, 0));
  EXPECT_NE(a.status().message().find("worker 4097"), std::string::npos) << a.status();
}

TEST(StepCoordinatorTest, AsyncLeaveNeverCompletesAStep) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(2), 0).ok());
  EXPECT_FALSE(c.Leave(0).completes_step);
  EXPECT_FALSE(c.Leave(1).completes_step);
  EXPECT_EQ(c.step(), 0);
  // Async pushes still go on.
  ASSERT_TRUE(AdmitAndWake(c, Push(0, 0)).ok());
  EXPECT_EQ(c.step(), 1);
}

// --- Sync ---------------------------------------------------------------------------------------

TEST(StepCoordinatorTest, SyncAdmitsTheFirstReplicasAndDropsTheBackup) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(3, 2), 0).ok());
  ParkedCall next = Park(c, 1, Clock::now() + kLongWait);

  // Chunk 0 of worker 0 and of worker 1: admitted, accumulated, the step is not complete.
  for (int w : {0, 1}) {
    auto a = c.Admit(Push(w, 0, 0, 2));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->verdict, Verdict::kAccumulate);
    EXPECT_EQ(a->step, 0);
    EXPECT_EQ(a->staleness, 0);
    EXPECT_FALSE(c.ChunkAccumulated(Push(w, 0, 0, 2)).completes_step);
  }
  // Worker 2 is the third for step 0: a backup, dropped.
  auto a = c.Admit(Push(2, 0, 0, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kDropBackup);
  EXPECT_EQ(a->step, 0);
  EXPECT_EQ(c.step(), 0);

  // Worker 0's last chunk: still waiting for worker 1.
  a = c.Admit(Push(0, 0, 1, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, 1, 2)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 2);  // admitted, one complete
  // Worker 1's last chunk completes the step.
  a = c.Admit(Push(1, 0, 1, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 0, 1, 2)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 2);

  // While the caller applies the average: the step is still 0 and nothing else is admitted.
  EXPECT_EQ(c.step(), 0);
  EXPECT_FALSE(Answered(next, milliseconds(10)));
  a = c.Admit(Push(2, 0, 0, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kDropBackup);

  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 1);
  EXPECT_EQ(c.workers_in_step(), 0);
  ASSERT_TRUE(Answered(next, kPrompt));
  EXPECT_TRUE(next.answer.get());

  // Step 0's gradients are stale now, from any worker.
  for (int w : {0, 2}) {
    a = c.Admit(Push(w, 0, 0, 2));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->verdict, Verdict::kDropStale);
    EXPECT_EQ(a->step, 1);
    EXPECT_EQ(a->staleness, 1);
  }
  // Step 1 starts afresh: the former backup can be among the first two.
  a = c.Admit(Push(2, 1, 0, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kAccumulate);
  EXPECT_EQ(a->step, 1);
  EXPECT_EQ(c.step(), 1);
}

TEST(StepCoordinatorTest, SyncStepNeedsEveryChunkOfEveryAdmittedWorker) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  // Worker 0 delivers both of its chunks first (in reverse order), worker 1 then its three.
  for (uint32_t chunk : {1u, 0u}) {
    ASSERT_EQ(c.Admit(Push(0, 0, chunk, 2))->verdict, Verdict::kAccumulate);
    EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, chunk, 2)).completes_step);
  }
  for (uint32_t chunk : {0u, 1u}) {
    ASSERT_EQ(c.Admit(Push(1, 0, chunk, 3))->verdict, Verdict::kAccumulate);
    EXPECT_FALSE(c.ChunkAccumulated(Push(1, 0, chunk, 3)).completes_step);
  }
  ASSERT_EQ(c.Admit(Push(1, 0, 2, 3))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 0, 2, 3)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 2);
  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 1);
}

TEST(StepCoordinatorTest, SyncReplicasToAggregateZeroMeansEveryWorker) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(3, 0), 0).ok());
  for (int w : {0, 1}) {
    ASSERT_EQ(c.Admit(Push(w, 0))->verdict, Verdict::kAccumulate);
    EXPECT_FALSE(c.ChunkAccumulated(Push(w, 0)).completes_step);
  }
  ASSERT_EQ(c.Admit(Push(2, 0))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(2, 0)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 3);
}

TEST(StepCoordinatorTest, SyncDropsAPushOfTheStepAgainWithAnotherChunkCount) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, 0, 2)).completes_step);
  // The same worker's push now claims three chunks (it restarted): dropped.
  EXPECT_EQ(c.Admit(Push(0, 0, 1, 3))->verdict, Verdict::kDropRepeated);
  ASSERT_EQ(c.Admit(Push(0, 0, 1, 2))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, 1, 2)).completes_step);
  // Every chunk is in: a further one for the same step is dropped, not a second gradient.
  EXPECT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, Verdict::kDropRepeated);
  // Future steps and worker indexes out of range are errors in sync mode too.
  EXPECT_EQ(c.Admit(Push(1, 1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Admit(Push(kMaxWorkers, 0)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.step(), 0);
  // The step still completes normally.
  ASSERT_EQ(c.Admit(Push(1, 0))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 0)).completes_step);
}

TEST(StepCoordinatorTest, ChunkAccumulatedForAWorkerNotAdmittedIsFalse) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 1), 0).ok());
  EXPECT_FALSE(c.ChunkAccumulated(Push(1, 0)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 0);
}

TEST(StepCoordinatorTest, SyncLeaveCompletesTheStep) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  ParkedCall next = Park(c, 1, Clock::now() + kLongWait);
  ASSERT_EQ(c.Admit(Push(0, 0))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0)).completes_step);
  // Worker 1 leaves: the step needs only worker 0's push, which is in.
  EXPECT_TRUE(c.Leave(1).completes_step);
  EXPECT_EQ(c.workers_in_step(), 1);
  EXPECT_EQ(c.step(), 0);
  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 1);
  ASSERT_TRUE(Answered(next, kPrompt));
  EXPECT_TRUE(next.answer.get());

  EXPECT_FALSE(c.Leave(1).completes_step);  // a second Leave changes nothing
  // From now on each push of worker 0 completes a step on its own.
  ASSERT_EQ(c.Admit(Push(0, 1))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(0, 1)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 1);
  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 2);
}

TEST(StepCoordinatorTest, SyncLeaveBeforeAnyPushCompletesNothing) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  EXPECT_FALSE(c.Leave(0).completes_step);
  EXPECT_FALSE(c.Leave(7).completes_step);   // outside the job
  EXPECT_FALSE(c.Leave(-1).completes_step);  // outside the job
  EXPECT_EQ(c.step(), 0);
  // One live worker left: its push alone completes the step.
  ASSERT_EQ(c.Admit(Push(1, 0))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 0)).completes_step);
  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 1);
}

TEST(StepCoordinatorTest, SyncLeaveAboveTheAggregateCountChangesNothing) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(3, 2), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0)).completes_step);
  // Two workers are still in the job: the step still needs two pushes.
  EXPECT_FALSE(c.Leave(2).completes_step);
  ASSERT_EQ(c.Admit(Push(1, 0))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 0)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 2);
}

TEST(StepCoordinatorTest, SyncLeaveWhileApplyingDoesNotCompleteTwice) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 1), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(0, 0)).completes_step);
  // The caller is applying step 0; a Leave now must not hand out a second completion.
  EXPECT_FALSE(c.Leave(1).completes_step);
  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 1);
}

TEST(StepCoordinatorTest, SyncConcurrentWorkersCompleteEachStepOnce) {
  StepCoordinator c;
  constexpr int kWorkers = 4;
  constexpr int kSteps = 50;
  ASSERT_TRUE(c.Start(SyncWorkers(kWorkers, 3), 0).ok());
  std::atomic<int> completions{0};
  std::atomic<int> backups{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int64_t s = 0; s < kSteps; ++s) {
        // Wait for step s, as a worker's pull would.
        ParkedCall reached = Park(c, s, Clock::now() + kLongWait);
        ASSERT_TRUE(reached.answer.get());
        auto a = c.Admit(Push(w, s, 0, 2));
        ASSERT_TRUE(a.ok()) << a.status();
        if (a->verdict == Verdict::kDropBackup || a->verdict == Verdict::kDropStale) {
          ++backups;
          continue;
        }
        ASSERT_EQ(a->verdict, Verdict::kAccumulate);
        EXPECT_FALSE(c.ChunkAccumulated(Push(w, s, 0, 2)).completes_step);
        a = c.Admit(Push(w, s, 1, 2));
        ASSERT_TRUE(a.ok()) << a.status();
        ASSERT_EQ(a->verdict, Verdict::kAccumulate);
        if (c.ChunkAccumulated(Push(w, s, 1, 2)).completes_step) {
          EXPECT_EQ(c.workers_in_step(), 3);
          ++completions;
          StepCoordinator::Wake(c.PartitionsApplied({}));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.step(), kSteps);
  EXPECT_EQ(completions.load(), kSteps);
  EXPECT_EQ(backups.load(), kSteps * (kWorkers - 3));
}

}  // namespace
}  // namespace psflow

namespace psflow {
namespace {

TEST(StepCoordinatorTest, SyncDropsAChunkSentTwice) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, StepCoordinator::Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, 0, 2)).completes_step);
  // Chunk 0 again (its worker restarted) would count as the second chunk and complete the push:
  // dropped.
  EXPECT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, StepCoordinator::Verdict::kDropRepeated);
  EXPECT_EQ(c.Admit(Push(0, 0, 1, 2))->verdict, StepCoordinator::Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, 1, 2)).completes_step);  // worker 1 still missing
  EXPECT_EQ(c.Admit(Push(1, 0, 0, StepCoordinator::kMaxChunks + 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The expiry handler calls ExpirePushes, as PsState does, and hands what it returned to the test.
struct Expiries {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<StepCoordinator::Progress> given ABSL_GUARDED_BY(mu);

  void Attach(StepCoordinator& c) {
    c.SetExpiryHandler([this, &c] {
      StepCoordinator::Progress p = c.ExpirePushes();
      std::lock_guard lock(mu);
      given.push_back(p);
      cv.notify_all();
    });
  }
  // The first expiry that gave a push up, waiting up to kPrompt for it.
  std::optional<StepCoordinator::Progress> First() {
    std::unique_lock lock(mu);
    cv.wait_for(lock, kPrompt, [this] {
      for (const auto& p : given) {
        if (!p.given_up.empty()) return true;
      }
      return false;
    });
    for (const auto& p : given) {
      if (!p.given_up.empty()) return p;
    }
    return std::nullopt;
  }
};

TEST(StepCoordinatorTest, SyncPushIncompleteForTheTimeoutIsGivenUpAndTheStepGoesOn) {
  Expiries expiries;  // before c: its handler must outlive c's timer thread
  StepCoordinator c(milliseconds(50));
  expiries.Attach(c);
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 0, 0, 2)).completes_step);
  const auto given = expiries.First();
  ASSERT_TRUE(given.has_value());
  EXPECT_EQ(given->given_up, (absl::InlinedVector<int, 2>{0}));
  EXPECT_FALSE(given->completes_step);  // nobody else has pushed
  EXPECT_EQ(c.workers_in_step(), 0);
  // Worker 0 no longer counts: worker 1's push alone completes the step.
  ASSERT_EQ(c.Admit(Push(1, 0))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 0)).completes_step);
  StepCoordinator::Wake(c.PartitionsApplied({}));
  EXPECT_EQ(c.step(), 1);
  // Worker 0 comes back: both are needed again.
  ASSERT_EQ(c.Admit(Push(0, 1))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(0, 1)).completes_step);
  ASSERT_EQ(c.Admit(Push(1, 1))->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(1, 1)).completes_step);
}

TEST(StepCoordinatorTest, AsyncPushIncompleteForTheTimeoutEndsAsItIs) {
  Expiries expiries;  // before c: its handler must outlive c's timer thread
  StepCoordinator c(milliseconds(50));
  expiries.Attach(c);
  ASSERT_TRUE(c.Start(AsyncWorkers(2), 0).ok());
  ASSERT_TRUE(c.Admit(Push(1, 0, 1, 3)).ok());
  EXPECT_EQ(c.open_pushes().size(), 1u);
  const auto given = expiries.First();
  ASSERT_TRUE(given.has_value());
  EXPECT_EQ(given->given_up, (absl::InlinedVector<int, 2>{1}));
  EXPECT_TRUE(c.open_pushes().empty());
  EXPECT_EQ(c.step(), 1);
  // Its missing chunk, should it come after all, is dropped: a push of it alone could never
  // complete (it would stay open, a checkpoint waiting on it, for another timeout).
  auto a = c.Admit(Push(1, 0, 0, 3));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->verdict, Verdict::kDropGivenUp);
  EXPECT_FALSE(a->opens_push);
  EXPECT_TRUE(c.open_pushes().empty());
  EXPECT_EQ(c.step(), 1);
}

// Async: Admit answers no parked call itself (its caller holds the ps's update lock, which a
// parked pull's answer takes again: a recursive shared lock); it returns them to be woken.
TEST(StepCoordinatorTest, AsyncAdmitHandsTheCallsItMadeDueToItsCaller) {
  int calls = 0;  // before c: c's Stop answers a call still parked
  StepCoordinator c;
  ASSERT_TRUE(c.Start(AsyncWorkers(1), 0).ok());
  c.Park(1, {}, Clock::now() + kLongWait, [&](bool reached) {
    EXPECT_TRUE(reached);
    ++calls;
  });
  auto a = c.Admit(Push(0, 0, 0, 2));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->opens_push);
  EXPECT_EQ(calls, 0) << "answered inside Admit";
  ASSERT_EQ(a->wake.size(), 1u);
  StepCoordinator::Wake(std::move(a->wake));
  EXPECT_EQ(calls, 1);
  // The push's second chunk opens nothing and makes nothing due.
  a = c.Admit(Push(0, 0, 1, 2));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->wake.empty());
}

// Sync: once a push is given up, the rest of it (chunks of the same push arriving late, after a
// network partition) is dropped instead of opening a push that can never complete and holds the
// step until it expires too; the step completes with the others. So is the whole step pushed again
// by the worker restarted: the given-up push stands for the step.
TEST(StepCoordinatorTest, SyncLateChunksOfAGivenUpPushAreDroppedAndTheStepGoesOn) {
  Expiries expiries;  // before c: its handler must outlive c's timer thread
  StepCoordinator c(milliseconds(50));
  expiries.Attach(c);
  ASSERT_TRUE(c.Start(SyncWorkers(3, 3), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, Verdict::kAccumulate);
  c.ChunkAccumulated(Push(0, 0, 0, 2));
  ASSERT_EQ(c.Admit(Push(1, 0))->verdict, Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(1, 0)).completes_step);
  const auto given = expiries.First();
  ASSERT_TRUE(given.has_value());
  EXPECT_EQ(given->given_up, (absl::InlinedVector<int, 2>{0}));
  // Worker 0's chunk 1 arrives after all: dropped, and worker 0 stays out of the step.
  EXPECT_EQ(c.Admit(Push(0, 0, 1, 2))->verdict, Verdict::kDropGivenUp);
  EXPECT_EQ(c.workers_in_step(), 1);
  // Worker 2's push completes the step with workers 1 and 2.
  ASSERT_EQ(c.Admit(Push(2, 0))->verdict, Verdict::kAccumulate);
  const StepCoordinator::Progress done = c.ChunkAccumulated(Push(2, 0));
  EXPECT_TRUE(done.completes_step);
  EXPECT_EQ(done.workers, (absl::InlinedVector<int, 8>{1, 2}));
  StepCoordinator::Wake(c.PartitionsApplied(done));
  EXPECT_EQ(c.step(), 1);
  // From the next step worker 0 counts again.
  ASSERT_EQ(c.Admit(Push(0, 1))->verdict, Verdict::kAccumulate);
  EXPECT_EQ(c.workers_in_step(), 1);
}

// A worker restarted after its push was given up pushes the step again, its chunks in any order:
// none of them is admitted (before, a chunk the given-up push had sent opened a new push, and the
// chunks dropped before it never came again: that push held the step for another timeout).
TEST(StepCoordinatorTest, SyncTheRestartedWorkersRepushOfAGivenUpStepIsDroppedInAnyOrder) {
  for (const bool chunk_one_first : {false, true}) {
    SCOPED_TRACE(chunk_one_first ? "chunk 1 first" : "chunk 0 first");
    Expiries expiries;  // before c: its handler must outlive c's timer thread
    StepCoordinator c(milliseconds(50));
    expiries.Attach(c);
    ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0).ok());
    ASSERT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, Verdict::kAccumulate);
    c.ChunkAccumulated(Push(0, 0, 0, 2));
    ASSERT_TRUE(expiries.First().has_value());
    const uint32_t first = chunk_one_first ? 1 : 0;
    EXPECT_EQ(c.Admit(Push(0, 0, first, 2))->verdict, Verdict::kDropGivenUp);
    EXPECT_EQ(c.Admit(Push(0, 0, 1 - first, 2))->verdict, Verdict::kDropGivenUp);
    EXPECT_EQ(c.workers_in_step(), 0);
    // Worker 1 alone completes the step; both count from the next one.
    ASSERT_EQ(c.Admit(Push(1, 0))->verdict, Verdict::kAccumulate);
    const StepCoordinator::Progress done = c.ChunkAccumulated(Push(1, 0));
    EXPECT_TRUE(done.completes_step);
    EXPECT_EQ(done.workers, (absl::InlinedVector<int, 8>{1}));
    StepCoordinator::Wake(c.PartitionsApplied(done));
    ASSERT_EQ(c.step(), 1);
    ASSERT_EQ(c.Admit(Push(0, 1))->verdict, Verdict::kAccumulate);
    EXPECT_FALSE(c.ChunkAccumulated(Push(0, 1)).completes_step);
    ASSERT_EQ(c.Admit(Push(1, 1))->verdict, Verdict::kAccumulate);
    EXPECT_TRUE(c.ChunkAccumulated(Push(1, 1)).completes_step);
  }
}

TEST(StepCoordinatorTest, SyncWorkerLeavingMidPushGivesItsPlaceBack) {
  // 3 workers, 2 per step: worker 0 sends 1 of its 2 chunks and leaves; worker 2, a backup
  // before, now gets the place and the step completes with workers 1 and 2.
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(3, 2), 0).ok());
  ASSERT_EQ(c.Admit(Push(0, 0, 0, 2))->verdict, StepCoordinator::Verdict::kAccumulate);
  c.ChunkAccumulated(Push(0, 0, 0, 2));
  ASSERT_EQ(c.Admit(Push(1, 0))->verdict, StepCoordinator::Verdict::kAccumulate);
  EXPECT_FALSE(c.ChunkAccumulated(Push(1, 0)).completes_step);
  EXPECT_FALSE(c.Leave(0).completes_step);
  ASSERT_EQ(c.Admit(Push(2, 0))->verdict, StepCoordinator::Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(Push(2, 0)).completes_step);
  EXPECT_EQ(c.workers_in_step(), 2);
}

}  // namespace
}  // namespace psflow

// --- Sync, per partition ---------------------------------------------------------------------

namespace psflow {
namespace {

proto::TransferHeader Dense(proto::TransferHeader h, uint32_t partition, int64_t offset,
                            int64_t count) {
  proto::Segment* s = h.add_segments();
  s->set_partition(partition);
  s->set_offset(offset);
  s->set_count(count);
  return h;
}

TEST(StepCoordinatorTest, SyncHandsOutEachPartitionOnceEveryAdmittedWorkerDeliveredIt) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0, {4, 3}).ok());
  ParkedCall first = [&] {
    auto promise = std::make_shared<std::promise<bool>>();
    ParkedCall call;
    call.answer = promise->get_future();
    c.Park(1, {0}, Clock::now() + kLongWait, [promise](bool r) { promise->set_value(r); });
    return call;
  }();
  ParkedCall whole = Park(c, 1, Clock::now() + kLongWait);
  for (int w : {0, 1}) {
    const proto::TransferHeader h = Dense(Push(w, 0, 0, 2), 0, 0, 4);
    ASSERT_EQ(c.Admit(h)->verdict, Verdict::kAccumulate);
    const StepCoordinator::Progress p = c.ChunkAccumulated(h);
    EXPECT_FALSE(p.completes_step);
    if (w == 0) {
      EXPECT_TRUE(p.apply.empty());  // worker 1 has not delivered partition 0 yet
      StepCoordinator::Wake(c.PartitionsApplied(p));
      continue;
    }
    ASSERT_EQ(p.apply.size(), 1u);
    EXPECT_EQ(p.apply[0], 0u);
    EXPECT_EQ(std::vector<int>(p.workers.begin(), p.workers.end()), (std::vector<int>{0, 1}));
    EXPECT_FALSE(Answered(first, milliseconds(0)));
    StepCoordinator::Wake(c.PartitionsApplied(p));
  }
  ASSERT_TRUE(Answered(first, milliseconds(0)));
  EXPECT_TRUE(first.answer.get());
  EXPECT_FALSE(Answered(whole, milliseconds(0)));
  EXPECT_EQ(c.step(), 0);
  const uint32_t p0 = 0, p1 = 1;
  EXPECT_EQ(c.step_of({&p0, 1}), 1);
  EXPECT_EQ(c.step_of({&p1, 1}), 0);
  EXPECT_TRUE(c.mid_step());
  // Partition 1: worker 1 completes its push first, worker 0's delivery finishes the step.
  for (int w : {1, 0}) {
    const proto::TransferHeader h = Dense(Push(w, 0, 1, 2), 1, 0, 3);
    ASSERT_EQ(c.Admit(h)->verdict, Verdict::kAccumulate);
    const StepCoordinator::Progress p = c.ChunkAccumulated(h);
    EXPECT_EQ(p.completes_step, w == 0);
    EXPECT_EQ(p.apply.size(), w == 0 ? 1u : 0u);
    StepCoordinator::Wake(c.PartitionsApplied(p));
  }
  EXPECT_EQ(c.step(), 1);
  EXPECT_FALSE(c.mid_step());
  ASSERT_TRUE(Answered(whole, milliseconds(0)));
  EXPECT_EQ(c.step_of({&p0, 1}), 1);
}

TEST(StepCoordinatorTest, SyncLeaveMidPushHandsOutThePartitionsWithoutTheLeaver) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(3, 3), 0, {4}).ok());
  const proto::TransferHeader half = Dense(Push(0, 0, 0, 2), 0, 0, 2);
  ASSERT_EQ(c.Admit(half)->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(half).apply.empty());
  for (int w : {1, 2}) {
    const proto::TransferHeader h = Dense(Push(w, 0), 0, 0, 4);
    ASSERT_EQ(c.Admit(h)->verdict, Verdict::kAccumulate);
    EXPECT_TRUE(c.ChunkAccumulated(h).apply.empty());
  }
  const StepCoordinator::Progress p = c.Leave(0);
  ASSERT_EQ(p.apply.size(), 1u);
  EXPECT_TRUE(p.completes_step);
  EXPECT_EQ(std::vector<int>(p.workers.begin(), p.workers.end()), (std::vector<int>{1, 2}));
  StepCoordinator::Wake(c.PartitionsApplied(p));
  EXPECT_EQ(c.step(), 1);
}

TEST(StepCoordinatorTest, SyncDenseElementsSentTwiceAreInvalid) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(1, 1), 0, {4}).ok());
  ASSERT_TRUE(c.Admit(Dense(Push(0, 0, 0, 2), 0, 0, 3)).ok());
  EXPECT_EQ(c.Admit(Dense(Push(0, 0, 1, 2), 0, 2, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Two threads applying the last two partitions of a step at once: only the call that completes
// the step says so (PsState counts psflow_ps_updates_applied_total by it; reading the step before
// and after counted one step twice when the other thread moved it in between).
TEST(StepCoordinatorTest, SyncOnlyTheCallThatCompletesTheStepSaysSo) {
  StepCoordinator c;
  ASSERT_TRUE(c.Start(SyncWorkers(2, 2), 0, {10, 10}).ok());
  proto::TransferHeader whole = Dense(Dense(Push(0, 0), 0, 0, 10), 1, 0, 10);
  ASSERT_EQ(c.Admit(whole)->verdict, Verdict::kAccumulate);
  EXPECT_TRUE(c.ChunkAccumulated(whole).apply.empty());
  const proto::TransferHeader first = Dense(Push(1, 0, 0, 2), 0, 0, 10);
  const proto::TransferHeader second = Dense(Push(1, 0, 1, 2), 1, 0, 10);
  ASSERT_EQ(c.Admit(first)->verdict, Verdict::kAccumulate);
  const StepCoordinator::Progress a = c.ChunkAccumulated(first);
  ASSERT_EQ(a.apply, (absl::InlinedVector<uint32_t, 8>{0}));
  ASSERT_EQ(c.Admit(second)->verdict, Verdict::kAccumulate);
  const StepCoordinator::Progress b = c.ChunkAccumulated(second);
  ASSERT_EQ(b.apply, (absl::InlinedVector<uint32_t, 8>{1}));
  // Partition 1's thread finishes first, while partition 0 is still being applied.
  bool completed = true;
  StepCoordinator::Wake(c.PartitionsApplied(b, &completed));
  EXPECT_FALSE(completed);
  EXPECT_EQ(c.step(), 0);
  StepCoordinator::Wake(c.PartitionsApplied(a, &completed));
  EXPECT_TRUE(completed);
  EXPECT_EQ(c.step(), 1);
}

}  // namespace
}  // namespace psflow
