/* facts.def under gyre's nccl.h (include/ comes first on this file's
 * include path). */
#include <nccl.h>

#define FACTS_FUNCTION gyreFacts
#include "facts_table.h"
