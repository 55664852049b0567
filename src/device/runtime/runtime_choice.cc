// Which DeviceRuntime this process uses (runtime.h): chosen once, since every
// collective asks several times and a settings lookup each time was most of a
// one-rank call's host cost (the settings come from an environment snapshot
// that does not change).
#include <dlfcn.h>

#include <string>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

constexpr const char* kFakeLibraryDefault = "libgyre_fakecuda.so";

ncclResult_t recordAsGyreFailure(ncclResult_t code, const char* text) { return fail(code, "%s", text); }

struct Choice {
  DeviceRuntime* runtime = nullptr;
  std::string whyNone;
};

// GYRE_FAKE_CUDA names a test library, not code of gyre's: load it, or say why not.
Choice loadTestRuntime(int64_t mode) {
  Choice c;
  std::string library = env::getString("GYRE_FAKE_CUDA_LIB");
  if (library.empty()) library = kFakeLibraryDefault;
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    c.whyNone = "GYRE_FAKE_CUDA=" + std::to_string(mode) + " but the fake CUDA runtime (GYRE_FAKE_CUDA_LIB=" +
                library + ") does not load: " + (why ? why : "unknown dlopen error");
    return c;
  }
  auto entry = reinterpret_cast<FakeRuntimeEntry>(dlsym(handle, "gyreFakeCudaRuntime"));
  int64_t threads = 1;
  FakeRuntimeOptions options;
  options.synchronous = mode == 2;
  options.blockThreads = env::getInt("GYRE_FAKE_BLOCK_THREADS", &threads) == ncclSuccess ? int(threads) : 1;
  options.recordFailure = recordAsGyreFailure;
  c.runtime = entry ? entry(&options) : nullptr;
  if (!c.runtime)
    c.whyNone = "GYRE_FAKE_CUDA: " + library + (entry ? " is another version of the fake CUDA runtime"
                                                      : " has no gyreFakeCudaRuntime (not the fake CUDA runtime)");
  return c;
}

const Choice& choice() {
  static const Choice chosen = [] {
    int64_t fake = 0;
    if (env::getInt("GYRE_FAKE_CUDA", &fake) == ncclSuccess && fake != 0) return loadTestRuntime(fake);
    Choice c;
    c.runtime = cudaDeviceRuntime();
    if (!c.runtime) c.whyNone = "this gyre build has no CUDA runtime";
    return c;
  }();
  return chosen;
}

}  // namespace

DeviceRuntime* deviceRuntime() { return choice().runtime; }

const char* whyNoDeviceRuntime() { return choice().whyNone.c_str(); }

}  // namespace gyre
