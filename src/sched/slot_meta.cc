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
  auto type = [](uint8_t t) { return datatypeName(t); };
  auto op = [](uint8_t o) { return redOpName(o); };
  // Rooted calls also say the root each rank passed.
  auto root = [](const SlotMeta& m) { return m.root >= 0 ? ", root " + std::to_string(m.root) : std::string(); };
  const char* rootsDiffer = sent.root != own.root && sent.coll == own.coll ? " (the ranks passed different roots)" : "";
  return fail(ncclInvalidUsage,
              "mismatched calls: rank %d sent data for %s #%llu (count %llu, datatype %s, op %s%s) while rank %d "
              "(this rank) is in %s #%llu (count %llu, datatype %s, op %s%s)%s%s",
              sender, collName(static_cast<CollKind>(sent.coll)), static_cast<unsigned long long>(sent.opCount),
              static_cast<unsigned long long>(sent.count), type(sent.datatype), op(sent.redop), root(sent).c_str(),
              self, collName(static_cast<CollKind>(own.coll)), static_cast<unsigned long long>(own.opCount),
              static_cast<unsigned long long>(own.count), type(own.datatype), op(own.redop), root(own).c_str(),
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
