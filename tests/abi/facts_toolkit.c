/* facts.def under NVIDIA's nccl.h (the CUDA toolkit's include folder comes
 * first on this file's include path). */
#include <nccl.h>

#define FACTS_FUNCTION toolkitFacts
#include "facts_table.h"
