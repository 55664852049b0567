// Whether a text is a value a setting allows: its syntax and range for a
// number (Int, or Bytes with a K/M/G suffix), one of its choices for a
// Choice. What validateAll decides for each setting that is set, as one
// function of the text alone, so the value parsers can be tested on bytes.
#pragma once

#include <cstdint>
#include <string>

#include "src/config/env.h"

namespace gyre::env {

// *number gets a numeric setting's value when it is allowed.
bool valueAllowed(const VarSpec& spec, const std::string& value, int64_t* number);

}  // namespace gyre::env
