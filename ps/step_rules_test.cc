// The step rules (async_step_rules.h, sync_step_rules.h) row by row: each row is a sequence of
// events on one fresh state machine and what each must return, written as text so a row reads as
// the scenario it is. Events:
//   push W S C/N [pP:COUNT | pP:sparse]...   a chunk: Admit, and when admitted (sync) Staged
//   admit W S C/N ...                        Admit alone (sync: the payload is not staged yet)
//   stage W S C/N ...                        Staged alone (sync)
//   applied                                  sync: Applied(the oldest progress with partitions
//                                            not yet applied; one without is Applied at once)
//   leave W | expire T | time T              Leave; Expire at T s with a 30 s timeout; the clock
//   open                                     async: the open pushes
//   workers                                  the workers counted ("workers=N"; sync also
//                                            "needs=M": the contributions the step waits for)
// and what they return:
//   accumulate | stale | backup | given-up | joining   a sync verdict; "; " and the progress after
//   Staged apply@K stale=X [opens] [closes]         an async verdict (K: the step the push counts
//   at) apply[P,..] by[W,..] given_up[W,..] completes   a progress ("-": nothing) step=N
//   [completed]                       after Applied (" => step=N completed": a progress
//                                            with nothing to apply completed the step)
//   error: MESSAGE-PREFIX                    INVALID_ARGUMENT (nothing changed)
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "ps/async_step_rules.h"
#include "ps/sync_step_rules.h"

namespace psflow {
namespace {

using step_rules::Clock;
using step_rules::Progress;
using step_rules::Verdict;

constexpr auto kTimeout = std::chrono::seconds(30);

struct Event {
  std::string event;
  std::string expect;
};

struct SyncRow {
  std::string name;
  int total_workers;
  int replicas_to_aggregate;  // 0: all
  std::vector<int64_t> partitions;
  std::vector<Event> events;
  bool workers_known = true;  // false: nobody counted from the start (a re-created task)
};

struct AsyncRow {
  std::string name;
  int total_workers;
  std::vector<Event> events;
};

// "W S C/N pP:COUNT pP:sparse ..." (after the event's word).
proto::TransferHeader Header(const std::vector<std::string>& words) {
  proto::TransferHeader h;
  h.set_kind(proto::TK_GRADIENT);
  int worker = 0;
  int64_t step = 0;
  EXPECT_TRUE(absl::SimpleAtoi(words.at(1), &worker) && absl::SimpleAtoi(words.at(2), &step));
  h.set_worker(worker);
  h.set_step(step);
  std::vector<std::string> chunk = absl::StrSplit(words.at(3), '/');
  uint32_t c = 0, n = 0;
  EXPECT_TRUE(absl::SimpleAtoi(chunk.at(0), &c) && absl::SimpleAtoi(chunk.at(1), &n));
  h.set_chunk(c);
  h.set_num_chunks(n);
  for (size_t i = 4; i < words.size(); ++i) {
    std::vector<std::string> seg = absl::StrSplit(words[i].substr(1), ':');
    proto::Segment* s = h.add_segments();
    uint32_t p = 0;
    EXPECT_TRUE(absl::SimpleAtoi(seg.at(0), &p));
    s->set_partition(p);
    if (seg.at(1) == "sparse") {
      s->add_rows(0);
      s->set_count(1);
    } else {
      int64_t count = 0;
      EXPECT_TRUE(absl::SimpleAtoi(seg.at(1), &count));
      s->set_count(count);
    }
  }
  return h;
}

std::string Describe(const Progress& p) {
  if (p.empty() && p.workers.empty()) return "-";
  std::vector<std::string> parts;
  if (!p.apply.empty()) parts.push_back(absl::StrCat("apply[", absl::StrJoin(p.apply, ","), "]"));
  if (!p.apply.empty() || p.completes_step) {
    parts.push_back(absl::StrCat("by[", absl::StrJoin(p.workers, ","), "]"));
  }
  if (!p.given_up.empty()) {
    parts.push_back(absl::StrCat("given_up[", absl::StrJoin(p.given_up, ","), "]"));
  }
  if (p.completes_step) parts.push_back("completes");
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

std::string Describe(Verdict v) {
  switch (v) {
    case Verdict::kApply:
      return "apply";
    case Verdict::kAccumulate:
      return "accumulate";
    case Verdict::kDropStale:
      return "stale";
    case Verdict::kDropBackup:
      return "backup";
    case Verdict::kDropGivenUp:
      return "given-up";
    case Verdict::kDropJoining:
      return "joining";
    case Verdict::kDropRepeated:
      return "repeated";
  }
  return "?";
}

std::string ErrorPrefix(const absl::Status& s, const std::string& expect) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // The row names the message's beginning: compare that much.
  constexpr absl::string_view kError = "error: ";
  const std::string message(s.message());
  if (!absl::StartsWith(expect, kError)) return absl::StrCat(kError, message);
  return absl::StrCat(kError, message.substr(0, expect.size() - kError.size()));
}

Clock::time_point At(double seconds) {
  return Clock::time_point() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void RunSync(const SyncRow& row) {
  proto::SyncConfig config;
  config.set_sync_replicas(true);
  config.set_total_workers(row.total_workers);
  config.set_replicas_to_aggregate(row.replicas_to_aggregate);
  SyncStepRules rules(config, 0, row.partitions,
                      WorkerMembership(row.workers_known ? row.total_workers : 0));
  std::vector<Progress> pending;  // handed out, not yet Applied
  // A progress with partitions to apply waits for its "applied" event; one without is Applied
  // at once, as the caller does (it may complete the step: then " => step=N completed").
  const auto hand_out = [&](Progress p) {
    std::string said = Describe(p);
    if (!p.apply.empty()) {
      pending.push_back(std::move(p));
    } else if (rules.Applied(p)) {
      absl::StrAppend(&said, " => step=", rules.step(), " completed");
    }
    return said;
  };
  double now = 0;
  for (size_t i = 0; i < row.events.size(); ++i) {
    const Event& e = row.events[i];
    const std::vector<std::string> words = absl::StrSplit(e.event, ' ', absl::SkipEmpty());
    std::string got;
    if (words[0] == "push" || words[0] == "admit") {
      const proto::TransferHeader h = Header(words);
      auto a = rules.Admit(h, At(now));
      if (!a.ok()) {
        got = ErrorPrefix(a.status(), e.expect);
      } else {
        got = Describe(a->verdict);
        EXPECT_EQ(a->step, rules.step()) << row.name << ", event " << i;
        if (words[0] == "push" && a->verdict == Verdict::kAccumulate) {
          absl::StrAppend(&got, "; ", hand_out(rules.Staged(h)));
        }
      }
    } else if (words[0] == "stage") {
      got = hand_out(rules.Staged(Header(words)));
    } else if (words[0] == "applied") {
      ASSERT_FALSE(pending.empty()) << row.name << ", event " << i << ": nothing handed out";
      const bool completed = rules.Applied(pending.front());
      pending.erase(pending.begin());
      got = absl::StrCat("step=", rules.step(), completed ? " completed" : "");
    } else if (words[0] == "leave") {
      int w = 0;
      ASSERT_TRUE(absl::SimpleAtoi(words.at(1), &w));
      got = hand_out(rules.Leave(w));
    } else if (words[0] == "expire") {
      ASSERT_TRUE(absl::SimpleAtod(words.at(1), &now));
      got = hand_out(rules.Expire(At(now), kTimeout));
    } else if (words[0] == "time") {
      ASSERT_TRUE(absl::SimpleAtod(words.at(1), &now));
      got = e.expect;
    } else if (words[0] == "workers") {
      got = absl::StrCat("workers=", rules.workers(), " needs=", rules.contributions_needed());
    } else {
      FAIL() << "unknown event " << e.event;
    }
    EXPECT_EQ(got, e.expect) << row.name << ", event " << i << ": " << e.event;
  }
}

void RunAsync(const AsyncRow& row) {
  AsyncStepRules rules(WorkerMembership(row.total_workers), 0);
  double now = 0;
  for (size_t i = 0; i < row.events.size(); ++i) {
    const Event& e = row.events[i];
    const std::vector<std::string> words = absl::StrSplit(e.event, ' ', absl::SkipEmpty());
    std::string got;
    if (words[0] == "push") {
      auto a = rules.Admit(Header(words), At(now));
      if (!a.ok()) {
        got = ErrorPrefix(a.status(), e.expect);
      } else {
        got = a->verdict != Verdict::kApply
                  ? absl::StrCat(Describe(a->verdict), " step=", rules.step())
                  : absl::StrCat("apply@", a->step, " stale=", a->staleness,
                                 a->opens_push ? " opens" : "", a->closes_push ? " closes" : "",
                                 " step=", rules.step());
      }
    } else if (words[0] == "leave") {
      int w = 0;
      ASSERT_TRUE(absl::SimpleAtoi(words.at(1), &w));
      got = Describe(rules.Leave(w));
    } else if (words[0] == "expire") {
      ASSERT_TRUE(absl::SimpleAtod(words.at(1), &now));
      got = Describe(rules.Expire(At(now), kTimeout));
    } else if (words[0] == "time") {
      ASSERT_TRUE(absl::SimpleAtod(words.at(1), &now));
      got = e.expect;
    } else if (words[0] == "open") {
      std::vector<std::string> open;
      for (const auto& p : rules.open_pushes()) {
        open.push_back(absl::StrCat("w", p.worker, "@", p.counted_at, " left=", p.chunks_left));
      }
      got = open.empty() ? "-" : absl::StrJoin(open, "; ");
    } else if (words[0] == "workers") {
      got = absl::StrCat("workers=", rules.workers());
    } else {
      FAIL() << "unknown event " << e.event;
    }
    EXPECT_EQ(got, e.expect) << row.name << ", event " << i << ": " << e.event;
  }
}

TEST(SyncStepRules, Table) {
  const std::vector<SyncRow> rows = {
      {"two of two workers: the partition goes out once both delivered it",
       2,
       0,
       {4},
       {{"push 0 0 0/1 p0:4", "accumulate; -"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"},
        {"applied", "step=1 completed"},
        {"push 0 0 0/1 p0:4", "stale"},
        {"push 0 1 0/1 p0:4", "accumulate; -"}}},

      {"one of two (replicas_to_aggregate 1): the second is a backup, then stale",
       2,
       1,
       {4},
       {{"push 1 0 0/1 p0:4", "accumulate; apply[0] by[1] completes"},
        {"push 0 0 0/1 p0:4", "backup"},
        {"applied", "step=1 completed"},
        {"push 0 0 0/1 p0:4", "stale"}}},

      {"partition by partition: the first goes out before the second chunk comes",
       2,
       0,
       {4, 6},
       {{"push 0 0 0/2 p0:4", "accumulate; -"},
        {"push 1 0 0/2 p0:4", "accumulate; apply[0] by[0,1]"},
        {"applied", "step=0"},
        {"push 1 0 1/2 p1:6", "accumulate; -"},
        {"push 0 0 1/2 p1:6", "accumulate; apply[1] by[0,1] completes"},
        {"applied", "step=1 completed"}}},

      {"a dense partition is delivered by its elements, split across chunks",
       1,
       0,
       {10, 2},
       {{"push 0 0 0/3 p0:6", "accumulate; -"},
        {"push 0 0 1/3 p0:4", "accumulate; apply[0] by[0]"},
        {"push 0 0 2/3 p1:2", "accumulate; apply[1] by[0]"},  // p0 is still being applied
        {"applied", "step=0"},
        {"applied", "step=1 completed"}}},

      {"sparse rows are delivered only by the whole push",
       1,
       0,
       {4, 8},
       {{"push 0 0 0/2 p1:sparse", "accumulate; -"},
        {"push 0 0 1/2 p0:4", "accumulate; apply[0,1] by[0] completes"},
        {"applied", "step=1 completed"}}},

      {"two partitions applied at once: exactly one Applied completes the step (defect 8)",
       2,
       0,
       {4, 4},
       {{"push 0 0 0/2 p0:4", "accumulate; -"},
        {"push 1 0 0/2 p0:4", "accumulate; apply[0] by[0,1]"},
        {"push 0 0 1/2 p1:4", "accumulate; -"},
        {"push 1 0 1/2 p1:4", "accumulate; apply[1] by[0,1]"},
        {"applied", "step=0"},
        {"applied", "step=1 completed"}}},

      {"admitted before staged: the partition goes out with the last piece staged",
       3,
       2,
       {4},
       {{"admit 0 0 0/1 p0:4", "accumulate"},
        {"admit 1 0 0/1 p0:4", "accumulate"},
        {"stage 1 0 0/1 p0:4", "-"},
        {"stage 0 0 0/1 p0:4", "apply[0] by[0,1] completes"},
        {"push 2 0 0/1 p0:4", "backup"},
        {"applied", "step=1 completed"}}},

      {"a worker leaving mid-push loses its place; the step completes with the other",
       2,
       0,
       {4, 4},
       {{"push 0 0 0/2 p0:4", "accumulate; -"},
        {"push 1 0 0/2 p0:4", "accumulate; apply[0] by[0,1]"},
        {"applied", "step=0"},
        {"push 1 0 1/2 p1:4", "accumulate; -"},
        {"leave 0", "apply[1] by[1] given_up[0] completes"},
        {"applied", "step=1 completed"},
        {"leave 0", "-"},
        {"push 1 1 0/2 p0:4", "accumulate; apply[0] by[1]"}}},

      {"a push incomplete for the timeout is given up; its late chunks stay out (defect 4)",
       2,
       0,
       {4, 4},
       {{"push 0 0 0/2 p0:4", "accumulate; -"},
        {"time 10", "time 10"},
        {"push 1 0 0/2 p0:4", "accumulate; apply[0] by[0,1]"},
        {"applied", "step=0"},
        {"push 1 0 1/2 p1:4", "accumulate; -"},
        {"expire 29.9", "-"},
        {"expire 30", "apply[1] by[1] given_up[0] completes"},
        {"push 0 0 1/2 p1:4", "given-up"},
        {"applied", "step=1 completed"},
        {"push 0 1 0/2 p0:4", "accumulate; -"},
        {"push 1 1 0/2 p0:4", "accumulate; apply[0] by[0,1]"}}},

      {"a given-up worker does not count until it pushes again: the other completes alone",
       2,
       0,
       {4},
       {{"push 0 0 0/2 p0:2", "accumulate; -"},
        {"expire 30", "given_up[0]"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[1] completes"},
        {"applied", "step=1 completed"},
        {"push 0 1 0/1 p0:4", "accumulate; -"}}},

      {"every admitted worker gone mid-step: the rest goes out with no update",
       2,
       0,
       {4, 4},
       {{"push 0 0 0/2 p0:4", "accumulate; -"},
        {"push 1 0 0/2 p0:4", "accumulate; apply[0] by[0,1]"},
        {"applied", "step=0"},
        {"leave 0", "given_up[0]"},
        {"leave 1", "apply[1] by[] given_up[1] completes"},
        {"applied", "step=1 completed"}}},

      {"a worker that leaves after its push is whole still counts in that step (the last step "
       "waits for the slower worker)",
       2,
       0,
       {4},
       {{"push 0 0 0/1 p0:4", "accumulate; -"},
        {"leave 0", "-"},
        {"workers", "workers=1 needs=2"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"},
        {"applied", "step=1 completed"},
        {"workers", "workers=1 needs=1"},
        {"push 1 1 0/1 p0:4", "accumulate; apply[0] by[1] completes"}}},

      {"elastic: a new worker pushing between steps joins at once and the step waits for it",
       2,
       0,
       {4},
       {{"push 2 0 0/1 p0:4", "accumulate; -"},
        {"workers", "workers=3 needs=3"},
        {"push 0 0 0/1 p0:4", "accumulate; -"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[0,1,2] completes"},
        {"applied", "step=1 completed"}}},

      {"elastic: a new worker pushing mid-step is dropped and counts from the next step",
       2,
       0,
       {4},
       {{"push 0 0 0/1 p0:4", "accumulate; -"},
        {"push 3 0 0/1 p0:4", "joining"},
        {"push 3 0 0/1 p0:4", "joining"},
        {"workers", "workers=2 needs=2"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"},
        {"applied", "step=1 completed"},
        {"workers", "workers=3 needs=3"},
        {"push 0 1 0/1 p0:4", "accumulate; -"},
        {"push 1 1 0/1 p0:4", "accumulate; -"},
        {"push 3 1 0/1 p0:4", "accumulate; apply[0] by[0,1,3] completes"},
        {"applied", "step=2 completed"}}},

      {"elastic: a worker that left (scaled down) and pushes again (scaled up) rejoins",
       2,
       0,
       {4},
       {{"leave 1", "-"},
        {"workers", "workers=1 needs=1"},
        {"push 0 0 0/1 p0:4", "accumulate; apply[0] by[0] completes"},
        {"applied", "step=1 completed"},
        {"push 1 1 0/1 p0:4", "accumulate; -"},
        {"workers", "workers=2 needs=2"},
        {"push 0 1 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"},
        {"applied", "step=2 completed"}}},

      {"elastic: replicas_to_aggregate stays as given when workers join",
       2,
       1,
       {4},
       {{"push 2 0 0/1 p0:4", "accumulate; apply[0] by[2] completes"},
        {"workers", "workers=3 needs=1"},
        {"push 0 0 0/1 p0:4", "backup"},
        {"applied", "step=1 completed"}}},

      {"a stale chunk changes nothing: a late chunk of a given-up push does not bring its worker "
       "back",
       2,
       0,
       {4},
       {{"push 0 0 0/2 p0:2", "accumulate; -"},
        {"expire 30", "given_up[0]"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[1] completes"},
        {"applied", "step=1 completed"},
        {"push 0 0 1/2 p0:2", "stale"},
        {"workers", "workers=1 needs=1"},
        {"push 1 1 0/1 p0:4", "accumulate; apply[0] by[1] completes"}}},

      {"a stale chunk does not forget the given-up push of the current step: its rest stays out",
       2,
       0,
       {4},
       {{"push 0 0 0/1 p0:4", "accumulate; -"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"},
        {"applied", "step=1 completed"},
        {"push 0 1 0/2 p0:2", "accumulate; -"},
        {"expire 30", "given_up[0]"},
        {"push 0 0 0/1 p0:4", "stale"},
        {"push 0 1 1/2 p0:2", "given-up"},
        {"workers", "workers=1 needs=1"}}},

      {"a refused chunk changes nothing: a given-up worker's malformed push does not bring it "
       "back, its next whole one does",
       2,
       0,
       {4},
       {{"push 0 0 0/2 p0:2", "accumulate; -"},
        {"expire 30", "given_up[0]"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[1] completes"},
        {"applied", "step=1 completed"},
        {"push 0 1 0/1 p0:5", "error: worker 0 sent elements of partition 0 twice"},
        {"workers", "workers=1 needs=1"},
        {"push 0 1 0/1 p0:4", "accumulate; -"},
        {"workers", "workers=2 needs=2"}}},

      {"elastic: a joiner's chunks stay out for the whole step, even once every admitted push is "
       "gone; with nobody counted the step then completes with no update",
       1,
       0,
       {4, 4},
       {{"push 0 0 0/2 p0:2", "accumulate; -"},
        {"push 2 0 0/2 p0:4", "joining"},
        {"leave 0", "apply[0,1] by[] given_up[0] completes"},
        {"push 2 0 1/2 p1:4", "joining"},
        {"applied", "step=1 completed"},
        {"workers", "workers=1 needs=1"},
        {"push 2 0 1/2 p1:4", "stale"},
        {"push 2 1 0/1 p0:4", "accumulate; apply[0,1] by[2] completes"}}},

      {"a task the chief re-created counts nobody: each worker counts from its first push of the "
       "current step",
       2,
       0,
       {4},
       {{"workers", "workers=0 needs=0"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[1] completes"},
        {"applied", "step=1 completed"},
        {"push 0 0 0/1 p0:4", "stale"},
        {"workers", "workers=1 needs=1"},
        {"push 0 1 0/1 p0:4", "accumulate; -"},
        {"push 1 1 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"}},
       /*workers_known=*/false},

      {"a worker restarted mid-step pushes the step again: a chunk its push already has, or of "
       "another count, is dropped and changes nothing; one not seen before completes the push",
       2,
       0,
       {4, 4},
       {{"push 0 0 0/2 p0:4", "accumulate; -"},
        {"push 0 0 0/2 p0:4", "repeated"},
        {"push 0 0 1/3 p1:4", "repeated"},
        {"push 1 0 0/1 p0:4 p1:4", "accumulate; apply[0] by[0,1]"},
        {"workers", "workers=2 needs=2"},
        {"push 0 0 1/2 p1:4", "accumulate; apply[1] by[0,1]"},
        {"push 0 0 1/2 p1:4", "repeated"}}},

      {"bad chunks change nothing",
       2,
       0,
       {4},
       {{"push 0 1 0/1 p0:4", "error: gradients computed at step 1, a step from the future"},
        {"push 4096 0 0/1 p0:4", "error: push from worker 4096; worker indexes go from 0 to 4095"},
        {"push 0 0 1/1 p0:4", "error: push chunk 1 of 1"},
        {"push 0 0 0/0 p0:4", "error: push chunk 0 of 0"},
        {"push 0 0 0/2 p0:4", "accumulate; -"},
        {"push 0 0 1/2 p0:1", "error: worker 0 sent elements of partition 0 twice"},
        {"push 0 0 1/2", "accumulate; -"},
        {"push 1 0 0/1 p0:4", "accumulate; apply[0] by[0,1] completes"},
        {"applied", "step=1 completed"}}},
  };
  for (const SyncRow& row : rows) RunSync(row);
}

TEST(AsyncStepRules, Table) {
  const std::vector<AsyncRow> rows = {
      {"a push's first chunk opens it and advances the step; all its chunks count there",
       2,
       {{"push 0 0 1/2", "apply@0 stale=0 opens step=1"},
        {"open", "w0@0 left=1"},
        {"push 1 0 0/1", "apply@1 stale=1 opens closes step=2"},
        {"push 0 0 0/2", "apply@0 stale=0 closes step=2"},
        {"open", "-"}}},

      {"a chunk seen before (the worker restarted) opens a new push",
       1,
       {{"push 0 0 0/2", "apply@0 stale=0 opens step=1"},
        {"push 0 0 0/2", "apply@1 stale=1 opens step=2"},
        {"push 0 0 1/2", "apply@1 stale=1 closes step=2"}}},

      {"another step or chunk count opens a new push too",
       1,
       {{"push 0 0 0/2", "apply@0 stale=0 opens step=1"},
        {"push 0 1 0/3", "apply@1 stale=0 opens step=2"},
        {"push 0 1 0/2", "apply@2 stale=1 opens step=3"}}},

      {"leave gives the open push up, once",
       2,
       {{"push 0 0 0/2", "apply@0 stale=0 opens step=1"},
        {"leave 0", "given_up[0]"},
        {"leave 0", "-"},
        {"leave 1", "-"},
        {"open", "-"}}},

      {"a late chunk of a push given up is dropped: it opens no push, moves no step and does not "
       "bring back a worker that left; a chunk seen before (a restart) or the next push does",
       2,
       {{"push 0 0 0/3", "apply@0 stale=0 opens step=1"},
        {"expire 30", "given_up[0]"},
        {"push 0 0 1/3", "given-up step=1"},
        {"open", "-"},
        {"push 0 0 0/3", "apply@1 stale=1 opens step=2"},
        {"push 1 0 0/2", "apply@2 stale=2 opens step=3"},
        {"leave 1", "given_up[1]"},
        {"push 1 0 1/2", "given-up step=3"},
        {"workers", "workers=1"},
        {"push 1 3 0/1", "apply@3 stale=0 opens closes step=4"},
        {"workers", "workers=2"}}},

      {"a push open for the timeout is given up",
       2,
       {{"time 5", "time 5"},
        {"push 0 0 0/2", "apply@0 stale=0 opens step=1"},
        {"push 1 0 0/2", "apply@1 stale=1 opens step=2"},
        {"expire 34.9", "-"},
        {"expire 35", "given_up[0,1]"},
        {"open", "-"}}},

      {"elastic: a new worker joins with its first chunk, at once; it leaves and comes back",
       2,
       {{"push 3 0 0/1", "apply@0 stale=0 opens closes step=1"},
        {"workers", "workers=3"},
        {"leave 3", "-"},
        {"workers", "workers=2"},
        {"push 3 1 0/1", "apply@1 stale=0 opens closes step=2"},
        {"workers", "workers=3"}}},

      {"bad chunks change nothing",
       2,
       {{"push 0 1 0/1", "error: gradients computed at step 1, a step from the future"},
        {"push -1 0 0/1", "error: push from worker -1; worker indexes go from 0 to 4095"},
        {"push 0 0 2/2", "error: push chunk 2 of 2"},
        {"push 0 0 0/1", "apply@0 stale=0 opens closes step=1"}}},
  };
  for (const AsyncRow& row : rows) RunAsync(row);
}

}  // namespace
}  // namespace psflow
