// Which ranks each root of a several-root rendezvous serves: root i takes
// the contiguous block [firstRankOfRoot(i), firstRankOfRoot(i + 1)), so the
// blocks differ in size by at most one and every root has a rank when
// nRoots <= nranks.
#pragma once

#include <cstdint>

namespace gyre {

inline int firstRankOfRoot(int root, int nranks, int nRoots) {
  return static_cast<int>(static_cast<int64_t>(root) * nranks / nRoots);
}

// The largest i with firstRankOfRoot(i) <= rank.
inline int rootOfRank(int rank, int nranks, int nRoots) {
  return static_cast<int>((static_cast<int64_t>(rank + 1) * nRoots - 1) / nranks);
}

inline int blockSizeOfRoot(int root, int nranks, int nRoots) {
  return firstRankOfRoot(root + 1, nranks, nRoots) - firstRankOfRoot(root, nranks, nRoots);
}

}  // namespace gyre
