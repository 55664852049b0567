/* Compares NCCL's nccl.h with gyre's and checks that gyre's libnccl.so.2
 * provides every function NCCL's header declares:
 *   - every fact of facts.def (enum values, macros, sizes, alignments,
 *     offsets, the initializers) that NCCL's header has is equal under
 *     gyre's (version numbers and growing sizes: at least as large where
 *     gyre's header is of a newer NCCL);
 *   - every function of NCCL's header (nccl* and pnccl*) resolved at link
 *     time (this program is linked with -Wl,--no-undefined and run with
 *     LD_BIND_NOW) and lives in the library named on the command line;
 *   - gyre's header declares each nccl* function with the same C++ type
 *     (where the headers are of different releases, up to the release tags
 *     of versioned structs, ncclConfig_v22800 against ncclConfig_v23100) and
 *     the two tables' addresses agree.
 * No GPU is needed: nothing here creates a communicator.
 *
 * usage: abi_check LIBNCCL_PATH */
#ifndef _GNU_SOURCE /* the build defines it for every file */
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_tables.h"

#define MAX_FACTS 1024

static int failures = 0;
/* Whether both headers are of one NCCL release (set by compareFacts). */
static int sameRelease = 1;

/* A type name with the release tags of versioned structs blanked
 * ("17ncclConfig_v22800" -> "17ncclConfig_v#####"): headers of different
 * releases name the same struct by different tags, which C never sees (no
 * mangling) and which do not change what a C++ caller passes. */
static void withoutReleaseTags(const char* type, char* out, size_t size) {
  size_t n = 0;
  for (const char* p = type; *p && n + 1 < size; ++p) {
    out[n++] = *p;
    if (p[0] == '_' && p[1] == 'v') {
      int digits = 0;
      while (digits < 5 && p[2 + digits] >= '0' && p[2 + digits] <= '9') ++digits;
      if (digits == 5 && n + 6 < size) {
        memcpy(out + n, "v#####", 6);
        n += 6;
        p += 6;
      }
    }
  }
  out[n] = 0;
}

static void failure(const char* fmt, const char* a, const char* b) {
  fprintf(stderr, "FAIL: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  ++failures;
}

static const struct gyreAbiFunction* findFunction(const struct gyreAbiFunction* table, int count,
                                                  const char* name) {
  for (int i = 0; i < count; ++i)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

static const struct gyreAbiFact* findFact(const struct gyreAbiFact* table, int count, const char* name) {
  for (int i = 0; i < count; ++i)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

/* The facts that name an API level or grow with it: equal when both headers
 * are of one NCCL release; where gyre's header is newer, gyre's value is at
 * least the reference's (structs and result codes only grow) and its patch
 * level is free. */
static int versionedFact(const char* name, int* patchOnly) {
  static const char* const grows[] = {"NCCL_MINOR", "NCCL_VERSION_CODE", "ncclNumResults", "sizeof(ncclConfig_t)",
                                      "NCCL_CONFIG_INITIALIZER.size", "NCCL_CONFIG_INITIALIZER.version",
                                      "NCCL_SIM_INFO_INITIALIZER.version"};
  *patchOnly = strcmp(name, "NCCL_PATCH") == 0;
  if (*patchOnly) return 1;
  for (size_t i = 0; i < sizeof(grows) / sizeof(grows[0]); ++i)
    if (strcmp(grows[i], name) == 0) return 1;
  return 0;
}

static int compareFacts(void) {
  static struct gyreAbiFact theirs[MAX_FACTS], ours[MAX_FACTS];
  int nTheirs = toolkitFacts(theirs, MAX_FACTS), nOurs = gyreFacts(ours, MAX_FACTS);
  if (nTheirs > MAX_FACTS || nOurs > MAX_FACTS || nTheirs < 100 || nOurs < nTheirs) {
    fprintf(stderr, "FAIL: fact tables have %d and %d entries\n", nTheirs, nOurs);
    return ++failures;
  }
  const struct gyreAbiFact* theirVersion = findFact(theirs, nTheirs, "NCCL_VERSION_CODE");
  const struct gyreAbiFact* ourVersion = findFact(ours, nOurs, "NCCL_VERSION_CODE");
  sameRelease = theirVersion && ourVersion && theirVersion->value == ourVersion->value;
  int compared = 0;
  for (int i = 0; i < nTheirs; ++i) {
    const struct gyreAbiFact* o = findFact(ours, nOurs, theirs[i].name);
    if (!o) {
      fprintf(stderr, "FAIL: %s is in NCCL's nccl.h, not in gyre's\n", theirs[i].name);
      ++failures;
      continue;
    }
    ++compared;
    int patchOnly = 0;
    if (!sameRelease && versionedFact(theirs[i].name, &patchOnly)) {
      if (!patchOnly && o->value < theirs[i].value) {
        fprintf(stderr, "FAIL: %s is %lld in NCCL's nccl.h, %lld in gyre's (newer, so at least as large)\n",
                theirs[i].name, theirs[i].value, o->value);
        ++failures;
      }
      continue;
    }
    if (theirs[i].value != o->value) {
      fprintf(stderr, "FAIL: %s is %lld in NCCL's nccl.h, %lld in gyre's\n", theirs[i].name, theirs[i].value,
              o->value);
      ++failures;
    }
  }
  printf("%d facts compared (NCCL's header %lld, gyre's %lld); %d more in gyre's newer header\n", compared,
         theirVersion ? theirVersion->value : -1, ourVersion ? ourVersion->value : -1, nOurs - compared);
  return 0;
}

static void compareFunctions(const char* libnccl) {
  char expected[4096];
  if (!realpath(libnccl, expected)) {
    failure("cannot resolve %s%s", libnccl, "");
    return;
  }
  for (int i = 0; i < toolkitFunctions_count; ++i) {
    const struct gyreAbiFunction* f = &toolkitFunctions[i];
    Dl_info info;
    char loaded[4096];
    if (!f->address || !dladdr(f->address, &info) || !info.dli_fname || !realpath(info.dli_fname, loaded)) {
      failure("%s has no address in a loaded library%s", f->name, "");
      continue;
    }
    if (strcmp(loaded, expected) != 0) failure("%s resolves into %s, not gyre's library", f->name, loaded);
    if (strncmp(f->name, "pnccl", 5) == 0) {
      /* The profiling name is an alias: the same code as the nccl* name. */
      const struct gyreAbiFunction* base = findFunction(toolkitFunctions, toolkitFunctions_count, f->name + 1);
      if (!base || base->address != f->address) failure("%s is not an alias of %s", f->name, f->name + 1);
      continue;
    }
    const struct gyreAbiFunction* ours = findFunction(gyreFunctions, gyreFunctions_count, f->name);
    if (!ours) {
      failure("gyre's nccl.h does not declare %s%s", f->name, "");
      continue;
    }
    char theirType[1024], ourType[1024];
    withoutReleaseTags(f->type, theirType, sizeof theirType);
    withoutReleaseTags(ours->type, ourType, sizeof ourType);
    if (strcmp(sameRelease ? ours->type : ourType, sameRelease ? f->type : theirType) != 0) {
      fprintf(stderr, "FAIL: %s: type %s in NCCL's nccl.h, %s in gyre's\n", f->name, f->type, ours->type);
      ++failures;
    }
    if (ours->address != f->address) failure("%s resolves to two addresses%s", f->name, "");
  }
  printf("%d functions of NCCL's nccl.h resolved in %s\n", toolkitFunctions_count, expected);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBNCCL_PATH\n", argv[0]);
    return 2;
  }
  compareFacts();
  compareFunctions(argv[1]);
  if (toolkitFunctions_count < 80) failure("only a few functions were found in NCCL's nccl.h%s%s", "", "");
  printf(failures ? "FAILED: %d differences\n" : "PASSED (%d differences)\n", failures);
  return failures ? 1 : 0;
}
