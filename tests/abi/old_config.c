/* A program built against an older nccl.h passes a shorter ncclConfig_t whose
 * `version` says so. gyre must read only the fields that release had, as NCCL
 * does, and must refuse a config whose magic, version or size is wrong with a
 * message naming the field and the versions. Every byte after the old struct
 * holds 0x7f, which is an invalid value for every newer field (splitShare,
 * collnetEnable, CTAPolicy ... must be 0, 1 or 0..2), so reading any of them
 * would fail the init.
 *
 * Built against gyre's nccl.h, linked with gyre's libnccl.so.2; runs
 * one-rank communicators (host memory, and device memory on the fake CUDA
 * runtime: GYRE_FAKE_CUDA=1 in the test's environment). */
#include <nccl.h>
#include <nccl_device.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ncclConfig_t as NCCL 2.14 and NCCL 2.17 declared it. */
struct config_v21400 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};
struct config_v21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
};

/* The old struct at the start of memory long enough for today's struct and
 * more, the rest holding the guard pattern. */
union configMemory {
  struct config_v21400 v21400;
  struct config_v21700 v21700;
  ncclConfig_t current;
  unsigned char bytes[sizeof(ncclConfig_t) + 64];
};

static int failures = 0;
#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      fprintf(stderr, "FAIL line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);               \
      fprintf(stderr, "\n");                      \
      ++failures;                                 \
    }                                             \
  } while (0)

static void guarded(union configMemory* m) { memset(m->bytes, 0x7f, sizeof(m->bytes)); }

/* Creates a one-rank communicator through `config`, runs an AllReduce on it
 * (device communicators: on the fake runtime, which treats host memory as
 * device memory) and destroys it. Returns the init's result. */
static ncclResult_t runOneRank(ncclConfig_t* config, int device, const char* what) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return r;
  r = device ? ncclCommInitRankConfig(&comm, 1, id, 0, config) : gyreCommInitRankHost(&comm, 1, id, 0, config);
  if (r == ncclInProgress) {
    /* Nonblocking: poll, bounded, until the set-up finishes. */
    ncclResult_t state = ncclInProgress;
    for (int i = 0; i < 3000 && state == ncclInProgress; ++i) {
      ncclCommGetAsyncError(comm, &state);
      if (state == ncclInProgress) usleep(10000);
    }
    CHECK(state == ncclSuccess, "%s: nonblocking init ended in %d", what, (int)state);
    r = state;
  }
  if (r != ncclSuccess) {
    if (comm) ncclCommDestroy(comm);
    return r;
  }
  double in[5] = {1, 2, 3, 4, 5}, out[5] = {0};
  ncclResult_t c = ncclAllReduce(in, out, 5, ncclDouble, ncclSum, comm, NULL);
  CHECK(c == ncclSuccess, "%s: AllReduce returned %d (%s)", what, (int)c, ncclGetLastError(comm));
  CHECK(ncclCommDestroy(comm) == ncclSuccess, "%s: ncclCommDestroy failed", what);
  for (int i = 0; i < 5; ++i) CHECK(out[i] == in[i], "%s: out[%d] = %g, expected %g", what, i, out[i], in[i]);
  return ncclSuccess;
}

/* The init must fail with ncclInvalidArgument and a message holding each of
 * the given words. */
static void expectRefused(ncclConfig_t* config, const char* what, const char* word1, const char* word2) {
  ncclResult_t r = runOneRank(config, 0, what);
  const char* text = ncclGetLastError(NULL);
  CHECK(r == ncclInvalidArgument, "%s: init returned %d, expected ncclInvalidArgument", what, (int)r);
  CHECK(strstr(text, word1) != NULL, "%s: message '%s' does not name %s", what, text, word1);
  if (word2) CHECK(strstr(text, word2) != NULL, "%s: message '%s' does not name %s", what, text, word2);
  printf("refused %-40s: %s\n", what, text);
}

int main(void) {
  union configMemory m;
  ncclResult_t r;

  int version = 0;
  CHECK(ncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE, "ncclGetVersion gave %d", version);

  for (int device = 0; device <= 1; ++device) {
    const char* kind = device ? "device" : "host";
    /* NCCL 2.14's struct: only `blocking` after the header. */
    guarded(&m);
    m.v21400.size = sizeof(m.v21400);
    m.v21400.magic = NCCL_CONFIG_MAGIC;
    m.v21400.version = NCCL_VERSION(2, 14, 0);
    m.v21400.blocking = 1;
    r = runOneRank(&m.current, device, "2.14 config");
    CHECK(r == ncclSuccess, "%s: a 2.14 config was refused: %s", kind, ncclGetLastError(NULL));

    /* NCCL 2.17's struct, nonblocking: the one field gyre acts on is read. */
    guarded(&m);
    m.v21700.size = sizeof(m.v21700);
    m.v21700.magic = NCCL_CONFIG_MAGIC;
    m.v21700.version = NCCL_VERSION(2, 17, 0);
    m.v21700.blocking = 0;
    m.v21700.cgaClusterSize = NCCL_CONFIG_UNDEF_INT;
    m.v21700.minCTAs = 1;
    m.v21700.maxCTAs = 4;
    m.v21700.netName = NULL;
    r = runOneRank(&m.current, device, "2.17 config, nonblocking");
    CHECK(r == ncclSuccess, "%s: a 2.17 config was refused: %s", kind, ncclGetLastError(NULL));
  }

  /* Today's size but version 2.17: the newer fields hold the guard pattern and
   * are not read, because that release did not have them (NCCL reads by
   * version, too). */
  guarded(&m);
  m.current.size = sizeof(ncclConfig_t);
  m.current.magic = NCCL_CONFIG_MAGIC;
  m.current.version = NCCL_VERSION(2, 17, 0);
  m.current.blocking = 1;
  m.current.cgaClusterSize = NCCL_CONFIG_UNDEF_INT;
  m.current.minCTAs = NCCL_CONFIG_UNDEF_INT;
  m.current.maxCTAs = NCCL_CONFIG_UNDEF_INT;
  m.current.netName = NULL;
  r = runOneRank(&m.current, 0, "full-size 2.17 config");
  CHECK(r == ncclSuccess, "a full-size config of version 2.17 was refused: %s", ncclGetLastError(NULL));

  /* The same memory claiming today's version: now the pattern is read, and
   * refused by name. This is what makes the cases above meaningful. */
  m.current.version = NCCL_VERSION_CODE;
  expectRefused(&m.current, "current version, guard bytes as fields", "config.splitShare", NULL);

  /* A current config is accepted, and a bad value in its newest field named. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  r = runOneRank(&config, 0, "current config");
  CHECK(r == ncclSuccess, "NCCL_CONFIG_INITIALIZER's config was refused: %s", ncclGetLastError(NULL));
  config.nvlinkCentricSched = 7;
  expectRefused(&config, "nvlinkCentricSched = 7", "config.nvlinkCentricSched", NULL);

  /* Wrong header fields. */
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.magic = 0x12345678;
  expectRefused(&config, "wrong magic", "config.magic", "NCCL_CONFIG_INITIALIZER");
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.version = NCCL_VERSION(2, 13, 0);
  expectRefused(&config, "version before ncclConfig_t existed", "config.version", "2.13.0");
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.size = 8;
  expectRefused(&config, "size 8", "config.size", NULL);
  guarded(&m);
  m.v21700.size = sizeof(m.v21700);
  m.v21700.magic = NCCL_CONFIG_MAGIC;
  m.v21700.version = NCCL_VERSION_CODE;
  m.v21700.blocking = 1;
  expectRefused(&m.current, "2.17 size claiming the current version", "config.size", "2.31.0");

  /* NCCL 2.28's struct (ends at nvlinkCentricSched, 80 bytes) and 2.29's
   * (numRmaCtx, 88 bytes) are read as they are; a 2.28-sized struct that
   * claims 2.29 is refused naming the size. */
  guarded(&m);
  m.current = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  memset((char*)&m.current + offsetof(ncclConfig_t, graphUsageMode), 0x7f,
         sizeof(m.bytes) - offsetof(ncclConfig_t, graphUsageMode));
  m.current.size = offsetof(ncclConfig_t, graphUsageMode);
  m.current.version = NCCL_VERSION(2, 28, 9);
  CHECK(m.current.size == 80, "NCCL 2.28's ncclConfig_t is %zu bytes here, not 80", m.current.size);
  r = runOneRank(&m.current, 0, "2.28 config");
  CHECK(r == ncclSuccess, "a 2.28 config was refused: %s", ncclGetLastError(NULL));
  m.current.version = NCCL_VERSION(2, 29, 2);
  expectRefused(&m.current, "2.28 size claiming 2.29.2", "config.size=80", "2.29.2");
  m.current.graphUsageMode = NCCL_CONFIG_UNDEF_INT;
  m.current.numRmaCtx = NCCL_CONFIG_UNDEF_INT;
  m.current.size = offsetof(ncclConfig_t, maxP2pPeers);
  CHECK(m.current.size == 88, "NCCL 2.29's ncclConfig_t is %zu bytes here, not 88", m.current.size);
  r = runOneRank(&m.current, 1, "2.29 config");
  CHECK(r == ncclSuccess, "a 2.29 config was refused: %s", ncclGetLastError(NULL));

  /* The newest fields are checked where gyre knows their values. */
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.hostCftMode = 9;
  expectRefused(&config, "hostCftMode = 9", "config.hostCftMode", NULL);
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.rmaEagerInit = 2;
  expectRefused(&config, "rmaEagerInit = 2", "config.rmaEagerInit", NULL);
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.nvlsHostMode = ncclNvlsHostModeDisableTransport | ncclNvlsHostModeDisableSymmetricMultimem;
  config.graphUsageMode = 1;
  config.numRmaCtx = 2;
  r = runOneRank(&config, 0, "current config with the 2.29-2.31 fields set");
  CHECK(r == ncclSuccess, "a config setting the newest fields was refused: %s", ncclGetLastError(NULL));

  /* The device API on a host-memory communicator (which has no GPU):
   * refused by name, no crash; and missing arguments are named too. */
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  if (ncclGetUniqueId(&id) == ncclSuccess && gyreCommInitRankHost(&comm, 1, id, 0, NULL) == ncclSuccess) {
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevComm_t dev;
    r = ncclDevCommCreate(comm, &reqs, &dev);
    CHECK(r == ncclInvalidUsage, "ncclDevCommCreate returned %d, expected ncclInvalidUsage", (int)r);
    CHECK(strstr(ncclGetLastError(comm), "ncclDevCommCreate") != NULL &&
              strstr(ncclGetLastError(comm), "host-memory") != NULL,
          "the message '%s' does not name the function and why", ncclGetLastError(comm));
    r = ncclDevCommCreate(comm, NULL, NULL);
    CHECK(r == ncclInvalidArgument && strstr(ncclGetLastError(comm), "reqs") != NULL,
          "ncclDevCommCreate without requirements returned %d: %s", (int)r, ncclGetLastError(comm));
    ncclCommDestroy(comm);
  } else {
    CHECK(0, "a plain one-rank host communicator failed: %s", ncclGetLastError(NULL));
  }

  printf(failures ? "FAILED: %d checks\n" : "PASSED\n", failures);
  return failures ? 1 : 0;
}
