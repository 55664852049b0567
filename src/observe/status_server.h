// The live status of this process's communicators, served on a unix socket
// for `gyre-info status` (tools/info_status.cc): while a communicator
// exists, a thread listens on <dir>/<pid>.sock, where <dir> is
// GYRE_STATUS_DIR, else $XDG_RUNTIME_DIR/gyre, else /tmp/gyre-<uid>
// (made 0700), and with GYRE_STATUS_ADDR also on a TCP port. On the
// socket a client of the same user (SO_PEERCRED; the folder's mode keeps
// others out too) may send the request line "GYRE-STATUS 1"; on either, a
// client may send "GYRE-STATUS 2 <communicator id>" and prove that
// communicator's secret (status_auth.h), getting its lines only. Anything
// else gets one line "error: ..." and the connection is closed, with no
// effect on the job; a client has half a second in all. The answer is one
// line per communicator:
//
//   comm <id> rank <r> nranks <n> pid <pid> host <name> state <idle|ncclAllReduce|...|ncclGroupEnd>
//       seq <k> for_ms <t> peers <pid>@<host>,...   (one line; peers by rank)
//
// where seq counts the API calls (and group ends) the rank has begun on the
// communicator and for_ms is how long the current one has run; each
// followed by its counters (call_counters.h), one line per API function:
//
//   counters <id> rank <r> ncclAllReduce: 12 calls, 48 B, 0.153 ms; ran as ...
//
// The last line is
// "end". The thread stops and the socket goes when the last
// communicator is destroyed. GYRE_STATUS=0 turns it off.
#pragma once

#include <string>

namespace gyre {

struct CommObserver;

void statusRegister(CommObserver* o);
void statusUnregister(CommObserver* o);

// The folder the sockets live in (created on demand when `create`).
std::string statusDir(bool create);

// Serves one connected client on `fd` as the status thread does (`local`:
// the unix socket), reading its request from the socket and answering.
void statusServeClient(int fd, bool local);

// The request a client sends, and the answer's last line.
constexpr const char* kStatusRequest = "GYRE-STATUS 1";

}  // namespace gyre
