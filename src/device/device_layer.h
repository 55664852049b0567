// The device layer as the communicator sees it: a handful of entry points,
// each taking the communicator's DeviceComm (device_comm.h) or its calls as
// DeviceRequests. Behind them three executors share the work:
//   kernels (kernel_calls.h)  collectives as CUDA kernels over p2p FIFOs;
//   direct (direct_calls.h)   collectives of processes sharing one GPU, one
//                             pass over IPC-mapped buffers;
//   copies (copy/copy_calls.h) send/recv between ranks this process can
//                             address: copy-engine copies between streams;
//   staged (staging.h)        everything else, through pinned host memory and
//                             the host executor.
// Entry points that take a DeviceComm accept null (a host communicator) and
// then do nothing.
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/debug/deadline.h"
#include "src/device/device_comm.h"

namespace gyre {

// At init, before connections: which executor runs collectives (all ranks
// agree) and its state. `p2pToEveryPeer`: every edge from this rank may be a
// p2p connection.
ncclResult_t setupDeviceExecutors(DeviceComm* comm, bool p2pToEveryPeer, const Deadline& deadline);

// After init's connections exist (comm->initConnections): the kernels'
// watchdog starts watching the peers.
void startDeviceWatchdog(DeviceComm* comm);

// Enqueues the calls (of device communicators) on their streams: kernel
// collectives first, then direct ones, then everything staged, so every rank
// orders a mixed group alike. A broken CUDA context fails the communicators
// and tells their peers.
ncclResult_t launchDeviceCalls(const std::vector<DeviceRequest>& calls);

// Turns a failure the kernels reported since the last look into the
// communicator's async error; returns it, or ncclSuccess. With
// `queryStreams`, also asks CUDA whether the last calls' streams hold a
// sticky error (an event query per stream, ~1 µs on an H100). A launch
// passes false: a broken context fails the launch itself, and the watchdogs
// and ncclCommGetAsyncError ask between calls.
ncclResult_t pollDeviceStatus(DeviceComm* comm, bool queryStreams = true);

// Makes running and future kernels stop at their next wait (abort, shrink).
void abortDeviceWork(DeviceComm* comm);

// Destroy/abort: waits up to `seconds` for the work queued on streams (direct
// calls, staged jobs, kernels), then frees the device state. False if work
// was still queued (nothing is freed under it then).
bool drainDeviceWork(DeviceComm* comm, bool abort, double seconds);

// Teardown of the kernel and direct executors after destroy's drain (then
// a no-op) or after a failed init: stops them (abort) and frees their state.
void releaseDeviceExecutors(DeviceComm* comm, double seconds);

}  // namespace gyre
