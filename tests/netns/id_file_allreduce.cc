// One rank of a 2-rank host-memory AllReduce whose unique id travels through
// a file (rank 0 makes it with ncclGetUniqueId, rank 1 waits up to 10 s for
// it), as a launcher that passes ids would: the id then carries its random
// secret, unlike NCCL_COMM_ID's. Exits 0 when every element is the exact sum.
//
// usage: id_file_allreduce RANK FILE
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "gyre.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int rank = atoi(argv[1]);
  const std::string file = argv[2];
  ncclUniqueId id{};
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    std::ofstream(file + ".tmp", std::ios::binary).write(id.internal, sizeof(id.internal));
    std::rename((file + ".tmp").c_str(), file.c_str());
  } else {
    bool read = false;
    for (int i = 0; i < 200 && !read; ++i) {
      std::ifstream f(file, std::ios::binary);
      read = static_cast<bool>(f.read(id.internal, sizeof(id.internal)));
      if (!read) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!read) return fprintf(stderr, "rank 1: no id in %s\n", file.c_str()), 1;
  }
  ncclComm_t comm = nullptr;
  if (gyreCommInitRankHost(&comm, 2, id, rank, nullptr) != ncclSuccess)
    return fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(nullptr)), 1;
  std::vector<int> in(1 << 18), out(in.size(), -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i % 1000) + rank;
  size_t wrong = 0;
  for (int round = 0; round < 3; ++round) {
    if (ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, comm, nullptr) != ncclSuccess)
      return fprintf(stderr, "rank %d: AllReduce: %s\n", rank, ncclGetLastError(nullptr)), 1;
    for (size_t i = 0; i < in.size(); ++i) wrong += out[i] != 2 * static_cast<int>(i % 1000) + 1;
  }
  printf("rank %d: %zu wrong\n", rank, wrong);
  ncclCommDestroy(comm);
  return wrong == 0 ? 0 : 1;
}
