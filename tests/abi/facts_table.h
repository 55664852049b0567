/* Expands facts.def under whichever nccl.h the including file included
 * first, into the function FACTS_FUNCTION (abi_tables.h). Values are taken
 * at run time so the initializers can be read as a program sees them. */
#include <stddef.h>
#include <stdint.h>

#include "abi_tables.h"

int FACTS_FUNCTION(struct gyreAbiFact* out, int max) {
  int n = 0;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
#if NCCL_VERSION_CODE >= 23100
  ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;
#endif
#define PUT(text, v)                                          \
  do {                                                        \
    if (n < max) {                                            \
      out[n].name = text;                                     \
      out[n].value = (long long)(v);                          \
    }                                                         \
    ++n;                                                      \
  } while (0);
#define FACT(e) PUT(#e, (e))
#define LAYOUT(T) PUT("sizeof(" #T ")", sizeof(T)) PUT("alignof(" #T ")", _Alignof(T))
#define FIELD(T, f) PUT("offsetof(" #T ", " #f ")", offsetof(T, f)) PUT("sizeof(" #T "." #f ")", sizeof(((T*)0)->f))
#define INIT(f) PUT("NCCL_CONFIG_INITIALIZER." #f, (intptr_t)(config.f))
#define SIM_INIT(f) PUT("NCCL_SIM_INFO_INITIALIZER." #f, (sim.f))
#define COLL_INIT(f) PUT("NCCL_COLLCONFIG_INITIALIZER." #f, (intptr_t)(coll.f))
#include "facts.def"
#undef PUT
#undef FACT
#undef LAYOUT
#undef FIELD
#undef INIT
#undef SIM_INIT
#undef COLL_INIT
  return n;
}
