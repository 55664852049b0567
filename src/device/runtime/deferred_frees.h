// Frees that wait for the device off the caller's thread. cudaFree and
// cudaFreeHost synchronise with the device: they return only once the work
// queued on it has finished, so behind a kernel spinning for a peer, a
// stream wait nobody has released yet, or any other work of the
// application, they block. ncclCommAbort and ncclCommDestroy must return
// within GYRE_TIMEOUT whatever the device runs, so a communicator's
// teardown hands its frees here: one thread of gyre's own per process makes
// them in the order given, each with its device current and in relaxed
// capture mode, as soon as the device lets them through. The memory is
// therefore never freed while device work queued before the teardown may
// still use it. The thread runs only while frees are pending.
#pragma once

#include <functional>

namespace gyre {

enum class DeferredFree {
  kDevice,  // deviceAlloc'd (cudaFree)
  kHost,    // allocHost'd (cudaFreeHost)
  kMapped,  // allocMapped's host address (cudaFreeHost)
};

// Frees `p` once the device lets a free through, with `device` current (-1:
// the device current on the calling thread now). Nothing for a null `p`.
void freeAfterDeviceWork(DeferredFree kind, void* p, int device = -1);

// Runs `release` (an unregistration, then an unmapping, say) on that
// thread, after the frees handed over before it, with `device` current.
void releaseAfterDeviceWork(std::function<void()> release, int device = -1);

// Until every free handed over so far has been made and the thread has
// ended, or `seconds` pass: whether they all were. Destroy waits here,
// bounded, so a destroyed communicator normally leaves nothing behind. At
// exit the thread stops after the free it is making (waited for 2 s at most).
bool waitForDeferredFrees(double seconds);

}  // namespace gyre
