/* nccl_device.h — NCCL's device-side API for ranks that reach each other's
 * memory by loads and stores (the LSA team): a program asks for a device
 * communicator (ncclDevCommCreate) and its kernels use teams, peers'
 * window pointers and LSA barriers. Network (GIN) device operations and
 * multimem are not provided: ncclDevCommCreate refuses requirements that
 * need them, naming what is missing.
 *
 *   nccl_device/core.h         device communicator, teams, window pointers
 *   nccl_device/coop.h         the thread groups device calls take
 *   nccl_device/lsa_barrier.h  ncclLsaBarrierSession
 *   nccl_device/gin.h          GIN's names only: gyre has no GIN (see there) */
#ifndef GYRE_NCCL_DEVICE_H_
#define GYRE_NCCL_DEVICE_H_

#include "nccl.h"
#include "nccl_device/core.h"
#include "nccl_device/coop.h"
#include "nccl_device/lsa_barrier.h"
#include "nccl_device/gin.h"

#endif /* GYRE_NCCL_DEVICE_H_ */
