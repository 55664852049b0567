// Buffers a communicator reuses by size: staging's page-locked host buffers
// (staging.h) and the copy paths' device scratch (copy/copy_calls.h). A
// buffer goes back when the work using it is done, and a request takes the
// smallest free one that fits. Not locked: each owner guards its pool with
// a mutex of its own.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace gyre {

struct BufferPool {
  std::vector<std::pair<size_t, void*>> free;  // (capacity, pointer)
  std::vector<void*> all;                      // every buffer, freed at destroy

  // Takes the smallest free buffer of at least `bytes`; false if none fits.
  bool takeFree(size_t bytes, void** out, size_t* capacity) {
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->first >= bytes && (best == free.end() || it->first < best->first)) best = it;
    if (best == free.end()) return false;
    *capacity = best->first;
    *out = best->second;
    free.erase(best);
    return true;
  }
  void giveBack(void* p, size_t capacity) { free.push_back({capacity, p}); }

  // Frees every buffer with `release` and empties the pool.
  template <typename Release>
  void releaseAll(Release release) {
    for (void* p : all) release(p);
    all.clear();
    free.clear();
  }
};

}  // namespace gyre
