// Shared by the device tests of a blocked queue and of teardown: one send
// from comms[0] to comms[1] (two ranks of one process) captured on two
// streams, rank 1's stream held shut by `gate` before its graph, both graphs
// launched. Rank 0's kernel then spins for a receiver that cannot start,
// until the test opens the gate, aborts or destroys.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

#include "../support/fork_ranks.h"
#include "../support/stream_gate.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace gyre::test {

// 0 once both graphs run; 1 (the rank's failure recorded) if a call failed.
inline int launchHeldCapturedPair(ncclComm_t comms[2], cudaStream_t streams[2], const int32_t* send, int32_t* recv,
                                  size_t count, StreamGate* gate) {
  gyre::FakeGraph graphs[2];
  for (int r = 0; r < 2; ++r) gyre::fakeBeginCapture(streams[r], &graphs[r]);
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  RANK_CHECK(ncclSend(send, count, ncclInt32, 1, comms[0], streams[0]) == ncclSuccess &&
                 ncclRecv(recv, count, ncclInt32, 0, comms[1], streams[1]) == ncclSuccess,
             "captured pair: %s", lastError().c_str());
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  for (int r = 0; r < 2; ++r) gyre::fakeEndCapture(streams[r]);
  gyre::deviceRuntime()->hostFunc(streams[1], &StreamGate::wait, gate);
  gyre::fakeLaunchGraph(graphs[0], streams[0]);
  gyre::fakeLaunchGraph(graphs[1], streams[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}

}  // namespace gyre::test
