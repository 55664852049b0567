#include "src/device/process_liveness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>

namespace gyre {

bool processGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  char state = 0;
  int fields = fscanf(f, "%*d (%*[^)]) %c", &state);
  fclose(f);
  return fields == 1 && (state == 'Z' || state == 'X');
}

}  // namespace gyre
