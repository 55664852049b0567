// Runs `fn` with Python's GIL released when the calling thread holds it.
//
// A process group is often destroyed from Python (destroy_process_group, or
// DDP's Reducer going away), i.e. with the GIL held, and destruction joins
// the worker thread. That thread may at that moment be completing a future
// whose callbacks are Python functions (a DDP comm hook's .then()), which
// need the GIL: joining with it held would deadlock.
#pragma once

#include <functional>

namespace torch_gyre {

void withoutGil(const std::function<void()>& fn);

}  // namespace torch_gyre
