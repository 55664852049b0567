// One object per thread, reached with a single TLS load. A thread_local of
// class type with a destructor is reached through a wrapper that tests an
// init guard (two TLS lookups in a shared library); hot per-call state (a
// small host collective is ~0.1 us) keeps only a plain pointer thread-local
// and makes the object on the thread's first use.
#pragma once

#include <memory>

namespace gyre {

// `slot` must be a `static __thread T*` (trivial, no guard) of the caller.
template <typename T>
T& threadOwned(T*& slot) {
  if (__builtin_expect(slot != nullptr, 1)) return *slot;
  thread_local std::unique_ptr<T> owner;  // frees it when the thread exits
  owner = std::make_unique<T>();
  slot = owner.get();
  return *slot;
}

}  // namespace gyre
