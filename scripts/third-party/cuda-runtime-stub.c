/* A stand-in libcudart.so for loading GPU-aware net plugins (aws-ofi-nccl)
 * on machines without a GPU: it reports a CUDA 12.0 runtime and hands out
 * driver entry points of which only cuDriverGetVersion succeeds; every other
 * driver call fails with CUDA_ERROR_NOT_SUPPORTED, so the plugin sees no
 * GPU and works on host memory, which is all gyre's host communicators
 * register. Not a CUDA runtime: nothing else is defined. */
#include <string.h>

enum { kSuccess = 0, kNotSupported = 801 /* CUDA_ERROR_NOT_SUPPORTED */ };

int cudaRuntimeGetVersion(int* version) {
  *version = 12000;
  return kSuccess;
}

static int driverGetVersion(int* version) {
  *version = 12000;
  return kSuccess;
}

/* Called with the real functions' arguments, which it ignores: returning
 * an error without touching them is safe under the C calling convention. */
static int notSupported(void) { return kNotSupported; }

static int entryPoint(const char* symbol, void** fn, int* status) {
  *fn = strcmp(symbol, "cuDriverGetVersion") == 0 ? (void*)driverGetVersion : (void*)notSupported;
  if (status) *status = 0; /* cudaDriverEntryPointSuccess */
  return kSuccess;
}

int cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags, int* status) {
  (void)flags;
  return entryPoint(symbol, fn, status);
}

int cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version, unsigned long long flags,
                                     int* status) {
  (void)version;
  (void)flags;
  return entryPoint(symbol, fn, status);
}
