// A socket address (IPv4 or IPv6) and its fixed-size wire form, which travels
// inside the unique id and the peer-info table.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace gyre {

// Fixed 24-byte layout so it can live inside ncclUniqueId and wire structs.
struct WireAddress {
  uint16_t family;  // AF_INET or AF_INET6
  uint16_t port;    // host byte order
  uint32_t scopeId;
  uint8_t addr[16];
};
static_assert(sizeof(WireAddress) == 24);

class NetAddress {
 public:
  NetAddress() = default;
  explicit NetAddress(const sockaddr* sa);
  static NetAddress fromWire(const WireAddress& w);

  // Resolves "host:port", "[v6addr]:port" or "v6addr" forms. Returns false and
  // sets *why on failure.
  static bool parse(const std::string& hostPort, NetAddress* out, std::string* why);

  WireAddress toWire() const;
  std::string toString() const;  // "10.0.0.1:5000" or "[::1]:5000"
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  bool isLoopback() const;
  bool isLinkLocalV6() const;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const;
  bool valid() const { return family() == AF_INET || family() == AF_INET6; }

 private:
  sockaddr_storage storage_{};
};

}  // namespace gyre
