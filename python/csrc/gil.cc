#include "gil.h"

#include <Python.h>

namespace torch_gyre {

void withoutGil(const std::function<void()>& fn) {
  if (!Py_IsInitialized() || !PyGILState_Check()) {
    fn();
    return;
  }
  PyThreadState* state = PyEval_SaveThread();
  try {
    fn();
  } catch (...) {
    PyEval_RestoreThread(state);
    throw;
  }
  PyEval_RestoreThread(state);
}

}  // namespace torch_gyre
