// What gyre says on a real GPU when a program hands it bad input: a host or
// pinned pointer, NULL, a freed buffer, a count past the allocation, a
// misaligned pointer, calls that differ between ranks, a pointer that faults
// in the kernel. Ranks share GPU 0 (ncclCommInitAll with a repeated device).
//   gpu_bad_input          every case in order, each in a child process
//   gpu_bad_input CASE     one case in this process
// Prints `PASS <case>: <result> "<ncclGetLastError text>" [note]` or
// `FAIL <case>: <why>` per case and a summary; exit status 1 if any failed.
// A child per case, because gyre reads its environment once (kernel_fault
// alone needs NCCL_CHECK_POINTERS=0) and a broken CUDA context must not spoil
// the next case. Waits are bounded: GYRE_TIMEOUT defaults to 10 s, streams are
// polled, and a child still running at 2 * GYRE_TIMEOUT + 30 s is killed.
// With GYRE_FAKE_CUDA=2 (gyre's fake runtime, host memory as device memory)
// the cases that need no real device memory run and the others are skipped.
#include <cuda_runtime.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_ok.h"
#include "gyre.h"

extern char** environ;

namespace {

constexpr int kPass = 0, kFail = 1, kSkip = 3;  // a case's exit status, read by the parent

bool fake() {
  const char* v = std::getenv("GYRE_FAKE_CUDA");
  return v && std::strcmp(v, "2") == 0;
}
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double timeoutSeconds() { return std::max(1.0, std::atof(std::getenv("GYRE_TIMEOUT"))); }  // main sets it
const char* resultName(ncclResult_t r) {
  static const char* names[] = {"ncclSuccess",      "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
                                "ncclInvalidArgument", "ncclInvalidUsage",  "ncclRemoteError", "ncclInProgress",
                                "ncclTimeout"};
  return r >= 0 && r < ncclNumResults ? names[r] : "unknown result";
}
std::string said(ncclResult_t r, const std::string& text) { return resultName(r) + (" \"" + text + "\""); }
bool mentions(const std::string& text, const char* word) { return text.find(word) != std::string::npos; }

int verdict(int code, const char* name, const std::string& what) {
  std::printf("%s %s: %s\n", code == kPass ? "PASS" : code == kSkip ? "SKIP" : "FAIL", name, what.c_str());
  return code;
}
int pass(const char* name, ncclResult_t r, const std::string& text, const std::string& note) {
  return verdict(kPass, name, said(r, text) + " " + note);
}
int failed(const char* name, const std::string& why) { return verdict(kFail, name, why); }
int skip(const char* name, const char* why) { return verdict(kSkip, name, why); }

// Host memory on the fake, where CUDA calls are skipped (initall_check does the same).
float* floats(size_t n) {
  void* p = nullptr;
  if (fake()) p = std::malloc(n * sizeof(float));
  else CUDA_OK(cudaMalloc(&p, n * sizeof(float)));
  return static_cast<float*>(p);
}
void copyTo(void* dst, const void* src, size_t bytes) {
  if (fake()) std::memcpy(dst, src, bytes);
  else CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

struct Ranks {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  bool init(const char* name, int n) {
    std::vector<int> devs(n, 0);
    comms.resize(n);
    if (ncclCommInitAll(comms.data(), n, devs.data()) != ncclSuccess) {
      failed(name, std::string("ncclCommInitAll failed: ") + ncclGetLastError(nullptr));
      comms.clear();
      return false;
    }
    streams.resize(n);
    for (int r = 0; r < n; ++r) {
      if (fake()) streams[r] = reinterpret_cast<cudaStream_t>(uintptr_t(r + 1));
      else CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    }
    return true;
  }
  void abortAll() {
    for (ncclComm_t& c : comms) ncclCommAbort(std::exchange(c, nullptr));
  }
  ~Ranks() {
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
};

// Polls instead of cudaStreamSynchronize, which never returns from a hung
// kernel. A stream's CUDA error alone does not end the wait: the question is
// whether gyre reports it through ncclCommGetAsyncError.
struct Waited {
  enum How { GyreError, Done, CudaOnly, Hung } how;
  ncclResult_t code;
  std::string text;  // gyre's error text, or what happened instead
  std::string said() const { return how == GyreError ? ::said(code, text) : text; }
};
Waited waitAll(const Ranks& k) {
  const double limit = timeoutSeconds() + 5, end = now() + limit;
  std::string cudaText;
  for (;;) {
    bool idle = true;
    for (size_t r = 0; r < k.comms.size(); ++r) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(k.comms[r], &async);
      if (async != ncclSuccess && async != ncclInProgress)
        return {Waited::GyreError, async, ncclGetLastError(k.comms[r])};
      cudaError_t e = fake() ? cudaSuccess : cudaStreamQuery(k.streams[r]);
      idle &= e == cudaSuccess;
      if (e != cudaSuccess && e != cudaErrorNotReady) cudaText = cudaGetErrorString(e);
    }
    if (idle) return {Waited::Done, ncclSuccess, "completed"};
    const std::string after = "after " + std::to_string(int(limit)) + " s: ";
    if (now() > end && cudaText.empty()) return {Waited::Hung, ncclSuccess, after + "neither completed nor failed"};
    if (now() > end)
      return {Waited::CudaOnly, ncclSuccess,
              after + "the stream says \"" + cudaText + "\", ncclCommGetAsyncError ncclSuccess"};
    usleep(2000);
  }
}

// One rank's AllReduce of `count` floats from `send` into `out`. A refusal
// passes when "<result> <text>" mentions every word of `words`; acceptance
// fails if `mustRefuse`, else passes when `out` then equals `want` (or,
// without `want`, when the stream does not hang).
int oneRank(const char* name, const void* send, float* out, size_t count, bool mustRefuse,
            std::vector<const char*> words, const float* want) {
  Ranks k;
  if (!k.init(name, 1)) return kFail;
  ncclResult_t r = ncclAllReduce(send, out, count, ncclFloat, ncclSum, k.comms[0], k.streams[0]);
  if (r != ncclSuccess) {
    std::string text = ncclGetLastError(k.comms[0]);
    for (const char* w : words)
      if (!mentions(said(r, text), w)) return failed(name, said(r, text) + " does not mention " + w);
    return text.empty() ? failed(name, said(r, text) + ": no error text") : pass(name, r, text, "(refused)");
  }
  Waited w = waitAll(k);
  if (mustRefuse || w.how == Waited::Hung || (want && w.how != Waited::Done))
    return failed(name, "accepted, then " + w.said());
  if (!want) return pass(name, r, "", "(accepted; then " + w.said() + ")");
  std::vector<float> got(count);
  copyTo(got.data(), out, count * sizeof(float));
  if (std::memcmp(got.data(), want, count * sizeof(float)) != 0)
    return failed(name, "accepted, but the output differs from the host reference");
  return pass(name, r, "", "(accepted; output correct)");
}

int hostPointer(const char* name) {
  if (fake()) return skip(name, "the fake runtime counts all host memory as device memory");
  std::vector<float> host(1024, 1.0f);
  return oneRank(name, host.data(), floats(1024), 1024, true, {"sendbuff", "host"}, nullptr);
}

// NCCL takes pinned memory the device can map; refusing it clearly is fine too.
int pinnedPointer(const char* name) {
  if (fake()) return skip(name, "cudaMallocHost needs a CUDA device");
  float* pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, 1024 * sizeof(float)));
  for (int i = 0; i < 1024; ++i) pinned[i] = i + 0.5f;
  return oneRank(name, pinned, floats(1024), 1024, false, {}, pinned);
}

int nullSendbuff(const char* name) {
  return oneRank(name, nullptr, floats(1024), 1024, true, {"ncclInvalidArgument", "sendbuff", "NULL"}, nullptr);
}

int freedBuffer(const char* name) {
  if (fake()) return skip(name, "the fake runtime cannot tell a freed buffer");
  float* out = floats(1024);  // first, so it cannot take the freed one's address
  float* freed = floats(1024);
  CUDA_OK(cudaFree(freed));
  return oneRank(name, freed, out, 1024, true, {"sendbuff"}, nullptr);
}

// Telling an allocation's size takes a driver query per call, so gyre (like
// NCCL) may accept this; the case records what then happens.
int countOverrun(const char* name) {
  if (fake()) return skip(name, "reading past a host allocation is undefined");
  return oneRank(name, floats(1024), floats(1 << 20), 1 << 20, false, {}, nullptr);
}

int misaligned(const char* name) {
  std::vector<float> want(1024);
  for (int i = 0; i < 1024; ++i) want[i] = i + 0.25f;
  char* in = reinterpret_cast<char*>(floats(2048));
  copyTo(in + 1, want.data(), 4096);
  return oneRank(name, in + 1, floats(1024), 1024, false, {}, want.data());
}

// One group of AllReduces over two ranks, a bounded wait for an error that
// names the collective (at ncclGroupEnd only where `syncErrorPasses`), abort.
int twoRanks(const char* name, const void* send0, size_t count1, bool syncErrorPasses) {
  Ranks k;
  if (!k.init(name, 2)) return kFail;
  float* out[2] = {floats(2048), floats(2048)};
  ncclGroupStart();
  ncclAllReduce(send0 ? send0 : out[0], out[0], 1024, ncclFloat, ncclSum, k.comms[0], k.streams[0]);
  ncclAllReduce(out[1], out[1], count1, ncclFloat, ncclSum, k.comms[1], k.streams[1]);
  ncclResult_t r = ncclGroupEnd();
  Waited w = r == ncclSuccess ? waitAll(k) : Waited{Waited::GyreError, r, ncclGetLastError(nullptr)};
  const double abortStart = now();
  k.abortAll();
  char note[64];
  std::snprintf(note, sizeof note, "(%s; ncclCommAbort took %.1f s)", r == ncclSuccess ? "async" : "at ncclGroupEnd",
                now() - abortStart);
  if (r != ncclSuccess && !syncErrorPasses) return failed(name, "refused at the call: " + w.said());
  if (w.how != Waited::GyreError) return failed(name, "no error: " + w.said());
  if (!mentions(w.text, "AllReduce")) return failed(name, "the error names no collective: " + w.said());
  return pass(name, w.code, w.text, note);
}

// Rank 0 reduces 1024 floats, rank 1 2048: an error, never a hang.
int mismatchedCounts(const char* name) { return twoRanks(name, nullptr, 2048, true); }

// Rank 0 sends from address 0x10, so its kernel faults and the context breaks.
int kernelFault(const char* name) {
  if (fake()) return skip(name, "needs a real kernel to fault");
  setenv("NCCL_CHECK_POINTERS", "0", 1);  // before gyre's first (and only) env read in this process
  return twoRanks(name, reinterpret_cast<const void*>(uintptr_t(0x10)), 1024, false);
}

struct Case {
  const char* name;
  int (*run)(const char*);
};
// kernel_fault breaks the CUDA context: last.
const Case kCases[] = {{"host_pointer", hostPointer},   {"pinned_pointer", pinnedPointer},
                       {"null_sendbuff", nullSendbuff}, {"freed_buffer", freedBuffer},
                       {"count_overrun", countOverrun}, {"misaligned", misaligned},
                       {"mismatched_counts", mismatchedCounts}, {"kernel_fault", kernelFault}};

int runAll(char* self) {
  const double limit = 2 * timeoutSeconds() + 30;
  int passed = 0, failures = 0, skipped = 0;
  for (const Case& c : kCases) {
    std::fflush(stdout);
    char* argv[] = {self, const_cast<char*>(c.name), nullptr};
    pid_t pid = 0;
    if (int e = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, environ)) {
      std::printf("FAIL %s: could not start a child process: %s\n", c.name, std::strerror(e));
      ++failures;
      continue;
    }
    int status = 0;
    const double end = now() + limit;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (now() > end) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(10000);
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    passed += code == kPass;
    skipped += code == kSkip;
    failures += code != kPass && code != kSkip;
    if (WIFSIGNALED(status) && now() > end)
      std::printf("FAIL %s: still running after %.0f s (a hang; killed)\n", c.name, limit);
    else if (WIFSIGNALED(status)) std::printf("FAIL %s: died of %s\n", c.name, strsignal(WTERMSIG(status)));
    else if (code != kPass && code != kFail && code != kSkip)
      std::printf("FAIL %s: exit status %d (a CUDA call failed; see stderr)\n", c.name, code);
  }
  std::printf("gpu_bad_input: %d passed, %d failed", passed, failures);
  if (skipped) std::printf(", %d skipped (fake runtime)", skipped);
  std::printf("\n");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("GYRE_TIMEOUT", "10", 0);
  if (argc < 2) return runAll(argv[0]);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // the line survives a kill by the parent
  for (const Case& c : kCases)
    if (std::strcmp(argv[1], c.name) == 0) return c.run(c.name);
  std::fprintf(stderr, "gpu_bad_input: no case %s (see kCases)\n", argv[1]);
  return 2;
}
