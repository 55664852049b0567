// What the direct executor's two flavours (direct_calls.cc: processes
// sharing a GPU; direct_inprocess.cc: ranks of one process) share: what each
// rank says of a call (CallInfo), the agreement check, and the share of the
// call each rank runs (src/kernels/direct_work.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/kernels/direct_work.h"
#include "src/device/device_comm.h"
#include "src/device/flag_ops.h"
#include "src/device/runtime/ipc_registry.h"

namespace gyre {

// What each rank says of a call before any rank runs it directly.
struct CallInfo {
  uint64_t callSeq = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint8_t coll = 0, datatype = 0, redop = 0;
  uint8_t usable = 0;  // this rank can run it directly
  uint8_t captured = 0;       // the call is captured into a CUDA graph (every rank's must be)
  uint32_t capturedSlot = 0;  // processes: its slot of captured-call flags + 1 (direct_calls.h)
  SharedAllocation input, output;  // the allocations holding the buffers (processes sharing a GPU)
  uint64_t inputOffset = 0, outputOffset = 0;  // in the allocation, or in the window
  // Processes: the registered window holding the buffer, as its serial + 1
  // (src/device/peer_windows.h; the peers mapped it at registration, so no
  // allocation is described), 0 for none.
  uint64_t inputWindow = 0, outputWindow = 0;
  const void* inputPtr = nullptr;  // the buffers themselves (ranks of one process)
  void* outputPtr = nullptr;
  // A PreMulSum's scalar, which applies to this rank's input only: its value,
  // or its device pointer (ncclScalarDevice; ranks of one process only).
  unsigned char scalar[8] = {};
  const void* scalarPtr = nullptr;
};

// Bytes of a rank's input and output for call `c`.
size_t inputBytes(const DeviceRequest& c);
size_t outputBytes(const DeviceRequest& c);

// This rank's CallInfo of `c` (its next call sequence number); `usable`
// says whether it can run the call directly.
CallInfo describeCall(const DeviceRequest& c, bool capturing);

// "ncclAllReduce #3 (count 1024, datatype 7, op 0, root 0)": a call in errors.
std::string describeInfo(const CallInfo& i);

// A peer's allocation (of another process) as this process addresses it,
// mapped through the IPC registry and held by the communicator.
ncclResult_t peerPointer(DeviceComm* comm, int peer, const SharedAllocation& a, uint64_t offset, void** out);

// What this rank runs of call `c`, given every rank's CallInfo: its own
// share, or, where one rank runs every share (DirectState::leaderRunsAll),
// every share on rank 0 and nothing on the others.
ncclResult_t buildDirectCalls(const DeviceRequest& c, const std::vector<CallInfo>& infos,
                              std::vector<DirectCall>* out);

// Profiler events of an eager direct call (launch_events.h), when
// `observed`: its Coll event, started before its first stream work
// (nChannels: the kernels this rank launches for it, 1 when it launches
// none; `seq`: its number on the direct path); then launchShares.
void* startDirectCallEvent(const DeviceRequest& c, uint64_t seq, const std::vector<DirectCall>& calls,
                           bool observed);

// The call's direct kernels (the shares this rank runs) on its stream; when
// `observed`, per kernel a KernelLaunch event and a KernelCh event numbered
// by share under `callEvent`, ended once the kernel has finished.
ncclResult_t launchShares(const DeviceRequest& c, const std::vector<DirectCall>& calls, bool observed,
                          void* callEvent);

// The flags of captured calls each rank owns: kCapturedDirectCalls slots
// of [phase][peer] words.
size_t capturedCallFlagWords(int nranks);

// A call captured into graphs (its `slot` > 0): this rank's share between
// two meetings on the call's own flags. Each meeting writes 1 into every
// peer's flag for this rank and waits for, then clears, every peer's flag
// in this rank's own (src/device/flag_ops.h), so each launch of the ranks'
// graphs meets afresh; `runner` is how (processes: stream memory
// operations; ranks of one process: the flag kernel, as a memory wait could
// hold a hardware queue the peer's stream shares).
ncclResult_t enqueueCapturedCall(DeviceComm* comm, const std::vector<DirectCall>& calls, uint32_t slot,
                                 StreamHandle stream, FlagRunner runner);

// What a captured call's flag wait stands for, as a timeout reports it
// (src/kernels/flag_work.h): its capture slot and meeting (0: the peers'
// "ready" before the share, 1: their "done" after it).
inline uint32_t capturedSignalStep(uint32_t slot, int phase) { return slot * 2 + static_cast<uint32_t>(phase); }
inline uint32_t capturedSignalSlot(uint32_t step) { return step / 2; }
inline const char* capturedSignalName(uint32_t step) { return step % 2 ? "done" : "ready"; }

// Every rank sees the same table, so every rank reaches the same verdict: a
// mismatch fails the communicator naming both calls.
ncclResult_t checkAgreement(DeviceComm* comm, const std::vector<CallInfo>& infos);

// Fails the communicator of `c`: some rank did not reach the call in time
// (`timedOut`), or the meeting broke before that (a peer process closed its
// connections: it died or aborted).
ncclResult_t missedMeeting(const DeviceRequest& c, ncclResult_t r, const std::string& why, bool timedOut = true);

}  // namespace gyre
