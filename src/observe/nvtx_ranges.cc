#include "src/observe/nvtx_ranges.h"

#include <cstddef>
#include <string>

#include "src/call/datatypes.h"
#include "src/config/env.h"
#include "gyre_nvtx_config.h"  // GYRE_HAVE_NVTX, from meson.build

#if GYRE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#endif

namespace gyre::nvtx {

#if GYRE_HAVE_NVTX
namespace {

constexpr uint64_t kCallSchemaId = NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 0x6779;

struct Domain {
  nvtxDomainHandle_t handle = nullptr;
  nvtxStringHandle_t names[kApiFuncs] = {};
  nvtxStringHandle_t group = nullptr;

  Domain() {
    handle = nvtxDomainCreateA("NCCL");
    for (int f = 0; f < kApiFuncs; ++f)
      names[f] = nvtxDomainRegisterStringA(handle, apiFuncName(static_cast<ApiFunc>(f)));
    group = nvtxDomainRegisterStringA(handle, "ncclGroup");
    static const nvtxPayloadSchemaEntry_t entries[] = {
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "Communicator", "id shared by the communicator's ranks", 0,
         offsetof(CallPayload, comm), nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "Rank", nullptr, 0, offsetof(CallPayload, rank), nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "Ranks", nullptr, 0, offsetof(CallPayload, nranks), nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "Count", "elements", 0, offsetof(CallPayload, count), nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "Message size [bytes]", nullptr, 0, offsetof(CallPayload, bytes),
         nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_CSTRING, "Datatype", nullptr, 0, offsetof(CallPayload, datatype), nullptr,
         nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_CSTRING, "Reduction operation", nullptr, 0, offsetof(CallPayload, op), nullptr,
         nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "Root or peer", "-1: none", 0, offsetof(CallPayload, root), nullptr,
         nullptr},
    };
    nvtxPayloadSchemaAttr_t attr{};
    attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    attr.name = "gyre call";
    attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    attr.entries = entries;
    attr.numEntries = sizeof(entries) / sizeof(entries[0]);
    attr.payloadStaticSize = sizeof(CallPayload);
    attr.schemaId = kCallSchemaId;
    nvtxPayloadSchemaRegister(handle, &attr);
  }
};

Domain& domain() {
  static Domain d;
  return d;
}

}  // namespace

std::atomic<int> enabledState{0};

bool decideEnabled() {
  static const bool on = [] {
    if (env::getString("NCCL_NVTX_DISABLE") == "1") return false;
    // Without a tool NVTX's registration calls return null handles.
    Domain& d = domain();
    return d.handle != nullptr || d.group != nullptr;
  }();
  enabledState.store(on ? 1 : 2, std::memory_order_relaxed);
  return on;
}

namespace {

nvtxEventAttributes_t namedAttributes(nvtxStringHandle_t name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = name;
  return a;
}

bool hasOperator(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::Reduce || k == CollKind::ReduceScatter;
}

}  // namespace

void pushCall(ApiFunc func, const CollCall& call, uint64_t commId, int rank, int nranks) {
  Domain& d = domain();
  CallPayload p;
  p.comm = commId;
  p.rank = rank;
  p.nranks = nranks;
  p.count = call.count;
  p.bytes = call.count * datatypeSize(call.datatype);
  p.datatype = datatypeName(call.datatype);
  p.op = hasOperator(call.coll) ? redOpName(call.op) : "";
  p.root = call.coll == CollKind::SendRecv || call.coll == CollKind::Broadcast || call.coll == CollKind::Reduce
               ? call.root
               : -1;
  nvtxPayloadData_t data{kCallSchemaId, sizeof(p), &p};
  nvtxEventAttributes_t a = namedAttributes(d.names[static_cast<int>(func)]);
  a.payloadType = NVTX_PAYLOAD_TYPE_EXT;
  a.reserved0 = 1;  // one payload (the payload extension's convention)
  a.payload.ullValue = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&data));
  nvtxDomainRangePushEx(d.handle, &a);
}

void pushGroup() {
  Domain& d = domain();
  nvtxEventAttributes_t a = namedAttributes(d.group);
  nvtxDomainRangePushEx(d.handle, &a);
}

void pop() { nvtxDomainRangePop(domain().handle); }

#else

std::atomic<int> enabledState{2};
bool decideEnabled() { return false; }

void pushCall(ApiFunc, const CollCall&, uint64_t, int, int) {}
void pushGroup() {}
void pop() {}

#endif

}  // namespace gyre::nvtx
