/* gyre's libnccl.so.2 and NVIDIA's in one process. Both are opened by full
 * path (a second copy of a soname is loaded only that way), NVIDIA's first
 * and into the global scope, which is the order where gyre's own calls of
 * its API (ncclAlltoAll sends with ncclSend) would be bound to NVIDIA's
 * functions unless gyre binds them to itself. Checks that:
 *   - the two are separate copies (their ncclGetErrorString differ);
 *   - gyre still runs collectives that call its API internally, correctly;
 *   - gyre refuses a pointer that is not one of its communicators.
 * No nccl.h: the few types are declared here (ncclUniqueId is 128 bytes,
 * enums are int, a communicator is a pointer). No GPU is needed: NVIDIA's
 * library is only loaded, never asked to make a communicator.
 *
 * usage: mixing GYRE_LIBNCCL NVIDIA_LIBNCCL (exit 77 = skipped: NVIDIA's
 * library cannot be loaded here) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } UniqueId;
typedef int (*GetUniqueIdFn)(UniqueId*);
typedef int (*InitHostFn)(void**, int, UniqueId, int, void*);
typedef int (*AlltoAllFn)(const void*, void*, size_t, int, void*, void*);
typedef int (*BcastFn)(void*, size_t, int, int, void*, void*);
typedef int (*CountFn)(void*, int*);
typedef int (*DestroyFn)(void*);
typedef const char* (*ErrorStringFn)(int);
typedef const char* (*LastErrorFn)(void*);

enum { kSuccess = 0, kInvalidArgument = 4, kInt32 = 2 };

static void* need(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "FAIL: %s: %s\n", name, dlerror());
    exit(1);
  }
  return f;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s GYRE_LIBNCCL NVIDIA_LIBNCCL\n", argv[0]);
    return 2;
  }
  void* nvidia = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
  if (!nvidia) {
    printf("SKIP: NVIDIA's library does not load here: %s\n", dlerror());
    return 77;
  }
  void* gyre = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!gyre) {
    fprintf(stderr, "FAIL: gyre's library does not load next to NVIDIA's: %s\n", dlerror());
    return 1;
  }
  int failures = 0;
  if (need(gyre, "ncclGetErrorString") == need(nvidia, "ncclGetErrorString")) {
    fprintf(stderr, "FAIL: both handles give one ncclGetErrorString: only one library was loaded\n");
    ++failures;
  }

  UniqueId id;
  void* comm = NULL;
  LastErrorFn lastError = (LastErrorFn)need(gyre, "ncclGetLastError");
  if (((GetUniqueIdFn)need(gyre, "ncclGetUniqueId"))(&id) != kSuccess ||
      ((InitHostFn)need(gyre, "gyreCommInitRankHost"))(&comm, 1, id, 0, NULL) != kSuccess) {
    fprintf(stderr, "FAIL: gyre host communicator: %s\n", lastError(NULL));
    return 1;
  }
  int in[4] = {1, 2, 3, 4}, out[4] = {0}, b[4] = {5, 6, 7, 8};
  int r1 = ((AlltoAllFn)need(gyre, "ncclAlltoAll"))(in, out, 4, kInt32, comm, NULL);
  int r2 = ((BcastFn)need(gyre, "ncclBcast"))(b, 4, kInt32, 0, comm, NULL);
  if (r1 != kSuccess || r2 != kSuccess || memcmp(in, out, sizeof(in)) != 0 || b[3] != 8) {
    fprintf(stderr, "FAIL: gyre's AlltoAll/Bcast next to NVIDIA's library: %d %d (%s)\n", r1, r2, lastError(comm));
    ++failures;
  }

  /* Something that is not a gyre communicator (as a communicator of the
   * other library would be) is refused, not used. */
  static long long foreign[4096];
  memset(foreign, 0x5a, sizeof(foreign));
  int count = -1;
  int r = ((CountFn)need(gyre, "ncclCommCount"))(foreign, &count);
  if (r != kInvalidArgument) {
    fprintf(stderr, "FAIL: gyre accepted a foreign communicator (result %d)\n", r);
    ++failures;
  } else {
    printf("foreign communicator refused: %s\n", lastError(NULL));
  }
  ((DestroyFn)need(gyre, "ncclCommDestroy"))(comm);
  printf(failures ? "FAILED\n" : "PASSED: gyre and NVIDIA's libnccl.so.2 side by side\n");
  return failures ? 1 : 0;
}
