/* nccl_device.h — NCCL's device-side API for ranks that reach each other's
 * memory by loads and stores (the LSA team): a program asks for a device
 * communicator (ncclDevCommCreate) and its kernels use teams, peers'
 * window pointers, symmetric pointers, LSA barriers, the low-latency
 * all-to-all and the reduce/copy building blocks. Network (GIN) device
 * operations and multimem are not provided: ncclDevCommCreate refuses
 * requirements that need them, naming what is missing, and their device
 * calls compile but stop the kernel.
 *
 *   nccl_device/core.h         device communicator, teams, window pointers
 *   nccl_device/coop.h         the thread groups device calls take
 *   nccl_device/ptr.h          ncclSymPtr: a typed place in a window
 *   nccl_device/reduce_copy.h  reduce/copy between LSA peers and local buffers
 *   nccl_device/lsa_barrier.h  ncclLsaBarrierSession, ncclLsaBarrierCreateRequirement
 *   nccl_device/ll_a2a.h       ncclLLA2ASession: small values straight into peers' slots
 *   nccl_device/gin.h          GIN's names only: gyre has no GIN (see there) */
#ifndef GYRE_NCCL_DEVICE_H_
#define GYRE_NCCL_DEVICE_H_

#include "nccl.h"
#include "nccl_device/core.h"
#include "nccl_device/coop.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/ll_a2a.h"
#include "nccl_device/ptr.h"
#include "nccl_device/reduce_copy.h"
#include "nccl_device/gin.h"

#endif /* GYRE_NCCL_DEVICE_H_ */
