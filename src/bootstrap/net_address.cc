#include "src/bootstrap/net_address.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

namespace gyre {

NetAddress::NetAddress(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) memcpy(&storage_, sa, sizeof(sockaddr_in));
  else if (sa->sa_family == AF_INET6) memcpy(&storage_, sa, sizeof(sockaddr_in6));
}

NetAddress NetAddress::fromWire(const WireAddress& w) {
  NetAddress a;
  if (w.family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage_);
    in->sin_family = AF_INET;
    in->sin_port = htons(w.port);
    memcpy(&in->sin_addr, w.addr, 4);
  } else if (w.family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage_);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(w.port);
    in6->sin6_scope_id = w.scopeId;
    memcpy(&in6->sin6_addr, w.addr, 16);
  }
  return a;
}

WireAddress NetAddress::toWire() const {
  WireAddress w{};
  w.family = static_cast<uint16_t>(family());
  w.port = port();
  if (family() == AF_INET) {
    memcpy(w.addr, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, 4);
  } else if (family() == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    memcpy(w.addr, &in6->sin6_addr, 16);
    w.scopeId = in6->sin6_scope_id;
  }
  return w;
}

bool NetAddress::parse(const std::string& hostPort, NetAddress* out, std::string* why) {
  std::string host, port;
  if (!hostPort.empty() && hostPort[0] == '[') {
    size_t close = hostPort.find(']');
    if (close == std::string::npos || close + 1 >= hostPort.size() || hostPort[close + 1] != ':') {
      *why = "expected [ipv6]:port";
      return false;
    }
    host = hostPort.substr(1, close - 1);
    port = hostPort.substr(close + 2);
  } else {
    size_t colon = hostPort.rfind(':');
    if (colon == std::string::npos || hostPort.find(':') != colon) {
      *why = "expected host:port or [ipv6]:port";
      return false;
    }
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p <= 0 || p > 65535) {
    *why = "port \"" + port + "\" is not in 1..65535";
    return false;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res) {
    *why = "cannot resolve host \"" + host + "\": " + gai_strerror(rc);
    return false;
  }
  *out = NetAddress(res->ai_addr);
  freeaddrinfo(res);
  out->setPort(static_cast<uint16_t>(p));
  return true;
}

std::string NetAddress::toString() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, buf, sizeof(buf));
    std::string out(buf);
    out += ':';
    out += std::to_string(port());
    return out;
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr, buf, sizeof(buf));
    std::string out = "[";
    out += buf;
    out += "]:";
    out += std::to_string(port());
    return out;
  }
  return "<no address>";
}

uint16_t NetAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void NetAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  else if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

bool NetAddress::isLoopback() const {
  if (family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr) >> 24) == 127;
  if (family() == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  return false;
}

bool NetAddress::isLinkLocalV6() const {
  return family() == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
}

socklen_t NetAddress::length() const {
  return family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace gyre
