// lying_run.h — how the lying-peer tests run one lie: rank 1 of a 2-rank
// communicator joins it honestly, then, instead of taking its part in a
// Broadcast, writes forged steps (forged_steps.h) into its ring connection to
// rank 0, which runs the call honestly: steps 0..atStep-1 of the Broadcast it
// roots as they are, then step `atStep` with the lie (a header whose size,
// count, sequence number, root, collective, datatype or operator lies, a
// payload of another length, a single-copy announcement past the buffer), or
// an abort notice naming a rank past the communicator. For a lie in the
// acknowledgements, the roles turn: rank 0 roots the Broadcast and rank 1,
// instead of receiving, acknowledges steps never sent.
//
// On shared memory, on sockets and on IB (the fake verbs provider of
// tests/net, where the build has verbs.h and GYRE_IBVERBS_LIB names it: there
// is no RDMA hardware) rank 0's call must fail, before GYRE_TIMEOUT plus a
// margin, with an error naming rank 1 and the lie; nothing outside its
// buffer may be written (guard elements on both sides); the honest steps
// before the lie must have arrived; and after ncclCommAbort both ranks are
// back to the fds and threads they had before init (IB: no MRs or QPs), with
// no /dev/shm entry left. An honest forgery (every field true) must be taken
// as the call's data, which shows that each failure comes from its lie alone.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "forged_steps.h"

namespace gyre::test {

constexpr int kLieTimeout_s = 3;  // leaves a loaded machine time to deliver the forged steps
constexpr size_t kLieCount = 64;  // 256 bytes: one step, in a slot line's payload block on shared memory

enum class Path { kShm, kSocket, kIb };

// The paths this build can run: IB only with the fake verbs provider.
std::vector<Path> everyPath();

using EnvList = std::vector<std::pair<std::string, std::optional<std::string>>>;

// What the liar does, and what rank 0's error must say.
struct Lie {
  std::string name;
  std::function<void(ForgedStep*)> forge;  // applied to step `atStep`; null: that step is honest
  std::vector<std::string> said;           // phrases rank 0's error contains (besides "rank 1"); none: it succeeds
  bool notice = false;                     // send an abort notice naming rank 7 instead of a step
  bool waitsForTimeout = false;            // detected only by GYRE_TIMEOUT (the data never comes)
  EnvList env = {};                        // more settings for both ranks
  size_t count = kLieCount;                // int32 elements of the Broadcast
  size_t atStep = 0;                       // the forged step; the liar sends the ones before it honestly
  size_t honestAfter = 0;                  // and this many after it
  // What step k of this call is, for a call whose steps are not ring steps
  // (single-copy announcements); applied to every step before `forge`.
  std::function<void(size_t, ForgedStep*)> every = nullptr;
  // The liar acknowledges, once rank 0 has filled its FIFO, the steps sent
  // plus this many more (the roles turn: see above).
  std::optional<uint64_t> acknowledgesAhead = std::nullopt;
};

// The Broadcast's data: element i is 1000 + i.
std::vector<char> payloadOf(size_t count);

// Runs `lie` on `path` and checks what the header says (Catch2 CHECKs).
void runLie(Path path, const Lie& lie);
void runOnEveryPath(const std::vector<Lie>& lies);

}  // namespace gyre::test
