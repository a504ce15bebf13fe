// A trainer's time budget (--train_seconds) as a number of steps: what `psflow run`'s progress
// bar, the progress lines and the psflow_worker_train_steps gauge count against when the budget,
// not the step count, is what ends training.
#ifndef PSFLOW_WORKER_TIME_BUDGET_H_
#define PSFLOW_WORKER_TIME_BUDGET_H_

#include <cstdint>

namespace psflow {

// The steps a trainer will have run when it ends: `total` without a budget (budget_s <= 0) or
// before its first step; with one, `done` plus the steps its rate so far (done / elapsed_s) fits
// in the seconds left of `budget_s`, rounded down, and never more than `total` nor fewer than
// `done`.
int64_t StepsWithinBudget(int64_t total, int64_t done, double elapsed_s, double budget_s);

}  // namespace psflow

#endif  // PSFLOW_WORKER_TIME_BUDGET_H_
