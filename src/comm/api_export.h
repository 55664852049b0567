// Marks the functions libgyre.so exports; everything else is hidden.
#pragma once

#define GYRE_EXPORT extern "C" __attribute__((visibility("default")))
