// The process's running job (run_job): one at a time; hpuTrainerCancelJob asks
// it to stop before its next batch.
#pragma once

namespace hpu::detail {

// Asks the job run_job is running to stop; false when none is running.
bool cancel_job();

}  // namespace hpu::detail
