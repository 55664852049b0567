/* Compares NCCL's nccl.h with gyre's and checks that gyre's libnccl.so.2
 * provides every function NCCL's header declares:
 *   - every fact of facts.def (enum values, macros, sizes, alignments,
 *     offsets, the initializers) is equal under both headers;
 *   - every function of NCCL's header (nccl* and pnccl*) resolved at link
 *     time (this program is linked with -Wl,--no-undefined and run with
 *     LD_BIND_NOW) and lives in the library named on the command line;
 *   - gyre's header declares each nccl* function with the same C++ type and
 *     the two tables' addresses agree.
 * No GPU is needed: nothing here creates a communicator.
 *
 * usage: abi_check LIBNCCL_PATH */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_tables.h"

#define MAX_FACTS 512

static int failures = 0;

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

static int compareFacts(void) {
  static struct gyreAbiFact theirs[MAX_FACTS], ours[MAX_FACTS];
  int nTheirs = toolkitFacts(theirs, MAX_FACTS), nOurs = gyreFacts(ours, MAX_FACTS);
  if (nTheirs != nOurs || nTheirs > MAX_FACTS || nTheirs < 100) {
    fprintf(stderr, "FAIL: fact tables have %d and %d entries\n", nTheirs, nOurs);
    return ++failures;
  }
  for (int i = 0; i < nTheirs; ++i) {
    if (theirs[i].value != ours[i].value) {
      fprintf(stderr, "FAIL: %s is %lld in NCCL's nccl.h, %lld in gyre's\n", theirs[i].name, theirs[i].value,
              ours[i].value);
      ++failures;
    }
  }
  printf("%d facts compared\n", nTheirs);
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
    if (strcmp(ours->type, f->type) != 0) {
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
