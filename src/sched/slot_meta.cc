#include "src/sched/slot_meta.h"

#include <string>

#include "src/call/datatypes.h"
#include "src/debug/error.h"

namespace gyre {

SlotMeta makeSlotMeta(const LaneSpec& spec, uint32_t bytes) {
  SlotMeta m{};
  m.opCount = static_cast<uint32_t>(spec.opCount);
  m.root = spec.root;
  m.count = spec.count;
  m.bytes = bytes;
  m.coll = static_cast<uint8_t>(spec.coll);
  m.datatype = static_cast<uint8_t>(spec.datatype);
  m.redop = static_cast<uint8_t>(spec.op < ncclNumOps ? spec.op : 0xff);
  return m;
}

ncclResult_t failMismatchedCalls(int sender, const SlotMeta& sent, int self, const SlotMeta& own,
                                 const char* note) {
  // Both ranks by number: the error is read on one rank's log, next to the
  // other rank's, and "this rank" alone does not say which of them it is.
  // A byte outside its enum is shown as the number it is: a peer that sent
  // one is corrupt or lying, and a name would hide that.
  auto type = [](uint8_t t) {
    return t < ncclNumTypes ? std::string(datatypeName(t)) : std::to_string(t) + " (not a datatype)";
  };
  auto op = [](uint8_t o) {
    if (o < ncclNumOps) return std::string(redOpName(o));
    return o == 0xff ? std::string("custom") : std::to_string(o) + " (not an operator)";
  };
  auto coll = [](uint8_t c) {
    return c <= static_cast<uint8_t>(CollKind::SendRecv) ? std::string(collName(static_cast<CollKind>(c)))
                                                          : "collective " + std::to_string(c) + " (not a collective)";
  };
  // Rooted calls also say the root each rank passed.
  auto root = [](const SlotMeta& m) { return m.root >= 0 ? ", root " + std::to_string(m.root) : std::string(); };
  const char* rootsDiffer = sent.root != own.root && sent.coll == own.coll ? " (the ranks passed different roots)" : "";
  return fail(ncclInvalidUsage,
              "mismatched calls: rank %d sent data for %s #%llu (count %llu, datatype %s, op %s%s) while rank %d "
              "(this rank) is in %s #%llu (count %llu, datatype %s, op %s%s)%s%s",
              sender, coll(sent.coll).c_str(), static_cast<unsigned long long>(sent.opCount),
              static_cast<unsigned long long>(sent.count), type(sent.datatype).c_str(), op(sent.redop).c_str(),
              root(sent).c_str(), self, coll(own.coll).c_str(), static_cast<unsigned long long>(own.opCount),
              static_cast<unsigned long long>(own.count), type(own.datatype).c_str(), op(own.redop).c_str(),
              root(own).c_str(),
              rootsDiffer, note);
}

ncclResult_t checkPeerSlotMeta(int sender, const SlotMeta& got, int self, const SlotMeta& want, CollKind coll) {
  if (got.opCount != want.opCount || got.coll != want.coll || got.count != want.count ||
      got.datatype != want.datatype || got.redop != want.redop || got.root != want.root)
    return failMismatchedCalls(sender, got, self, want);
  if (got.bytes != want.bytes)
    return fail(ncclInternalError, "%s #%llu: rank %d sent %u bytes for a %u-byte step", collName(coll),
                static_cast<unsigned long long>(want.opCount), sender, got.bytes, want.bytes);
  return ncclSuccess;
}

}  // namespace gyre
