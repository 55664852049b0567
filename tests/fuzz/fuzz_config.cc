// The config file and every setting's value: the text of an nccl.conf
// parsed into NAME=VALUE entries; each value checked as validateAll checks
// it for its setting (and for one other setting in turn, so each value
// parser sees every kind of value); and each name asked of NCCL's parameter API
// (ncclParamBind, ncclParamGetParameter, ncclParamGetI64).
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/config/conf_file.h"
#include "src/config/env.h"
#include "src/config/setting_values.h"

using namespace gyre;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> problems;
  const std::vector<env::ConfEntry> entries = env::parseConfText(text, "fuzz.conf", &problems);
  const std::vector<env::VarSpec>& registry = env::registry();
  for (size_t i = 0; i < entries.size(); ++i) {
    const env::ConfEntry& e = entries[i];
    // The entry's own setting when it names one, and one more in turn, so
    // that every setting's parser sees the values.
    for (const env::VarSpec* spec : {env::find(e.name), &registry[i % registry.size()]}) {
      int64_t v = 0;
      if (spec && env::valueAllowed(*spec, e.value, &v) &&
          (spec->type == env::Type::Int || spec->type == env::Type::Bytes) && (v < spec->min || v > spec->max))
        __builtin_trap();
    }
    // NCCL's parameter API, for the first entries: for an unknown name it
    // suggests the nearest known one, an edit distance to each of the
    // registry's names that costs far more than the rest of this target.
    ncclParamHandle_t h = nullptr;
    if (i < 2 && e.name.size() <= 128 && ncclParamBind(&h, e.name.c_str()) == ncclSuccess) {
      const char* value = nullptr;
      int len = 0;
      if (ncclParamGetParameter(e.name.c_str(), &value, &len) != ncclSuccess) __builtin_trap();
      int64_t i64;
      (void)ncclParamGetI64(h, &i64);
    }
  }
  return 0;
}
