// The declaration of every variable gyre reads. Add new settings here only.
#include "src/config/env.h"

namespace gyre::env {

const std::vector<VarSpec>& registry() {
  static const std::vector<VarSpec> vars = {
      {"NCCL_DEBUG", Type::Choice, "", "VERSION,WARN,INFO,TRACE",
       "log level; lines go to stderr or NCCL_DEBUG_FILE"},
      {"NCCL_DEBUG_FILE", Type::String, "", "file name; %h = host, %p = pid",
       "write log lines to this file instead of stderr"},
      {"NCCL_DEBUG_SUBSYS", Type::String, "", "comma list of INIT,NET,COLL,ALL",
       "subsystems whose INFO lines are shown (all by default)"},
      {"NCCL_COMM_ID", Type::String, "", "host:port or [ipv6]:port",
       "fixed rendezvous address; rank 0 hosts it and ncclGetUniqueId needs no root thread"},
      {"NCCL_SOCKET_IFNAME", Type::String, "", "prefix list; ^ excludes; = exact names",
       "which network interfaces the bootstrap and socket transport use"},
      {"NCCL_SOCKET_FAMILY", Type::Choice, "", "AF_INET,AF_INET6",
       "restrict interface selection to IPv4 or IPv6"},
      {"NCCL_BUFFSIZE", Type::Bytes, "4194304", "4096..1073741824",
       "bytes of buffering per connection; one pipeline step is BUFFSIZE/8", 4096, int64_t{1} << 30},
      {"NCCL_ALGO", Type::String, "", "Ring (more with later algorithms); ^ excludes",
       "force the collective algorithm"},
      {"NCCL_PROTO", Type::String, "", "Simple; ^ excludes", "force the protocol"},
      {"GYRE_INIT_TIMEOUT", Type::Int, "120", "1..86400",
       "seconds a rank waits for all ranks to join at communicator init", 1, 86400},
      {"GYRE_TIMEOUT", Type::Int, "300", "1..86400",
       "seconds any wait on a peer inside a collective may last before it fails", 1, 86400},
  };
  return vars;
}

}  // namespace gyre::env
