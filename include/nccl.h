/* nccl.h — NCCL's header name, so programs written for NCCL build against gyre
 * unchanged. Everything lives in gyre.h. */
#ifndef GYRE_NCCL_H_
#define GYRE_NCCL_H_
#include "gyre.h"
#endif
