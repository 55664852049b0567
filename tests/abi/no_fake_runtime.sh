#!/usr/bin/env bash
# The shipped libraries carry no fake device: the fake CUDA runtime
# (tests/support/fake_cuda) is a test library that gyre loads only under
# GYRE_FAKE_CUDA. Fails if a library
#   - exports a dynamic symbol named fake (nm -D),
#   - defines any symbol named fake in its symbol table (the fake runtime's
#     classes and its kernel emulation, linked in by mistake; skipped for a
#     stripped library), or
#   - holds the fake's own text (its memfd name, its IPC handle tag, its
#     "fake CUDA:" error messages), which survives stripping.
#
# usage: no_fake_runtime.sh LIBRARY...
set -uo pipefail
failures=0
for lib in "$@"; do
  if [ ! -f "$lib" ]; then echo "FAIL: $lib does not exist"; failures=$((failures + 1)); continue; fi
  exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -i fake)
  if [ -n "$exported" ]; then
    echo "FAIL: $lib exports fake symbols:"; echo "$exported" | sed 's/^/  /'; failures=$((failures + 1))
  fi
  if nm --defined-only "$lib" >/dev/null 2>&1 && [ -n "$(nm --defined-only "$lib" 2>/dev/null | head -1)" ]; then
    defined=$(nm -C --defined-only "$lib" | cut -d' ' -f3- | grep -i fake)
    if [ -n "$defined" ]; then
      echo "FAIL: $lib defines fake symbols (fake runtime sources linked in):"; echo "$defined" | sed 's/^/  /' | head -20
      failures=$((failures + 1))
    fi
  else
    echo "note: $lib has no symbol table (stripped); checking its text only"
  fi
  for text in gyre-fake-device GYREFIPC "fake CUDA:"; do
    if grep -qaF -- "$text" "$lib"; then
      echo "FAIL: $lib contains the fake runtime's text '$text'"; failures=$((failures + 1))
    fi
  done
  [ $failures -eq 0 ] && echo "PASS: $lib: $(nm -D --defined-only "$lib" | wc -l) dynamic symbols, no fake runtime"
done
exit $(( failures > 0 ))
