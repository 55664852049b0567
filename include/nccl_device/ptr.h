/* nccl_device/ptr.h — ncclSymPtr<T>: a typed place in a registered window,
 * named by the window and a byte offset instead of an address, so one value
 * means "element i of this buffer" on every rank. Device code turns it into
 * an address as this rank reaches it: its own (localPtr), an LSA peer's
 * (lsaPtr, by LSA rank), any peer's (peerPtr, by world rank or a team's
 * rank; NULL outside the LSA team). Arithmetic moves the offset by whole
 * elements, as on a T*.
 *
 * gyre has no multimem: multimemPtr and lsaMultimemPtr give NULL, as
 * ncclGetMultimemPointer does where multimem is not set up. */
#ifndef GYRE_NCCL_DEVICE_PTR_H_
#define GYRE_NCCL_DEVICE_PTR_H_

#include <stddef.h>
#include <stdint.h>

#include "core.h"

#ifdef __cplusplus

template <typename T>
struct ncclSymPtr {
  using ElementType = T;
  ncclWindow_t window;
  size_t offset;  // in bytes from the start of the window

  GYRE_DEVICE_FN constexpr ncclSymPtr(ncclWindow_t w = nullptr, size_t off = 0) : window(w), offset(off) {}

  /* The same place seen as another element type (as a pointer cast). */
  template <typename U>
  GYRE_DEVICE_FN operator ncclSymPtr<U>() const {
    return ncclSymPtr<U>(window, offset);
  }

  template <typename Int>
  GYRE_DEVICE_FN ncclSymPtr& operator+=(Int d) {
    offset = size_t(ptrdiff_t(offset) + ptrdiff_t(d) * ptrdiff_t(sizeof(T)));
    return *this;
  }
  template <typename Int>
  GYRE_DEVICE_FN ncclSymPtr& operator-=(Int d) {
    offset = size_t(ptrdiff_t(offset) - ptrdiff_t(d) * ptrdiff_t(sizeof(T)));
    return *this;
  }

  GYRE_DEVICE_FN T* localPtr() const { return static_cast<T*>(ncclGetLocalPointer(window, offset)); }
  GYRE_DEVICE_FN T* lsaPtr(int lsaPeer) const { return static_cast<T*>(ncclGetLsaPointer(window, offset, lsaPeer)); }
  GYRE_DEVICE_FN T* peerPtr(int worldPeer) const {
    return static_cast<T*>(ncclGetPeerPointer(window, offset, worldPeer));
  }
  GYRE_DEVICE_FN T* peerPtr(ncclTeam team, int peer) const {
    return static_cast<T*>(ncclGetPeerPointer(window, offset, team, peer));
  }
  GYRE_DEVICE_FN T* multimemPtr(ncclMultimemHandle mm) const {
    return static_cast<T*>(ncclGetMultimemPointer(window, offset, mm));
  }
  GYRE_DEVICE_FN T* lsaMultimemPtr(ncclDevComm const& comm) const {
    return static_cast<T*>(ncclGetLsaMultimemPointer(window, offset, comm));
  }
};

template <typename T, typename Int>
GYRE_DEVICE_FN ncclSymPtr<T> operator+(ncclSymPtr<T> p, Int d) {
  return p += d;
}
template <typename T, typename Int>
GYRE_DEVICE_FN ncclSymPtr<T> operator-(ncclSymPtr<T> p, Int d) {
  return p -= d;
}
/* Elements from b to a (both in one window). */
template <typename T>
GYRE_DEVICE_FN ptrdiff_t operator-(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return (ptrdiff_t(a.offset) - ptrdiff_t(b.offset)) / ptrdiff_t(sizeof(T));
}
template <typename T>
GYRE_DEVICE_FN bool operator==(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return a.window == b.window && a.offset == b.offset;
}
template <typename T>
GYRE_DEVICE_FN bool operator!=(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return !(a == b);
}

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_PTR_H_ */
