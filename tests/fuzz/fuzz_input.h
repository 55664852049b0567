// Reading a fuzzer's bytes as the fixed-size records and text a parser
// receives: a record short of bytes is zero-filled, as the input ran out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace gyre::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t left() const { return size_ - at_; }

  template <typename T>
  T take() {
    T out{};
    const size_t n = left() < sizeof(T) ? left() : sizeof(T);
    memcpy(&out, data_ + at_, n);
    at_ += n;
    return out;
  }

  // Up to `max` bytes as text.
  std::string text(size_t max) {
    const size_t n = left() < max ? left() : max;
    std::string out(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return out;
  }

  std::string rest() { return text(left()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace gyre::fuzz
