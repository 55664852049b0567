// An NVTX injection library for the tests: NVTX loads it from
// NVTX_INJECTION64_PATH and calls InitializeInjectionNvtx2 (the core API)
// and InitializeInjectionNvtxExtension (the payload extension). It records
// every domain range push and pop as a line of text, decoding payloads
// through the schema the program registered, so a test checks both the
// values and that the schema describes them. gyretest_nvtx_log() returns
// the lines so far.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Domain {
  std::string name;
};

struct Schema {
  std::vector<nvtxPayloadSchemaEntry_t> entries;
  std::vector<std::string> names;  // the entries' names, copied
};

std::mutex mu;
std::string logText;
std::map<uint64_t, Schema> schemas;  // by schema id (ids are unique within this test's one domain)

std::string domainName(nvtxDomainHandle_t d) {
  return d ? reinterpret_cast<Domain*>(d)->name : std::string("(default)");
}

std::string messageOf(const nvtxEventAttributes_t* a) {
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
    return *reinterpret_cast<const std::string*>(a->message.registered);
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
  return "?";
}

std::string decode(const nvtxPayloadData_t& data) {
  auto it = schemas.find(data.schemaId);
  if (it == schemas.end()) return " payload=unknown-schema";
  std::string out;
  const auto* base = static_cast<const unsigned char*>(data.payload);
  for (size_t i = 0; i < it->second.entries.size(); ++i) {
    const nvtxPayloadSchemaEntry_t& e = it->second.entries[i];
    const unsigned char* p = base + e.offset;
    std::string value;
    switch (e.type) {
      case NVTX_PAYLOAD_ENTRY_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        value = std::to_string(v);
        break;
      }
      case NVTX_PAYLOAD_ENTRY_TYPE_INT32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        value = std::to_string(v);
        break;
      }
      case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING: {
        const char* s;
        memcpy(&s, p, sizeof s);
        value = s ? s : "(null)";
        break;
      }
      default: value = "type" + std::to_string(e.type);
    }
    out += " " + it->second.names[i] + "=" + value + ";";
  }
  return out;
}

nvtxDomainHandle_t domainCreate(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name});
}

nvtxStringHandle_t registerString(nvtxDomainHandle_t, const char* s) {
  return reinterpret_cast<nvtxStringHandle_t>(new std::string(s));
}

int rangePush(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> lock(mu);
  std::string line = "push " + domainName(d) + " " + messageOf(a);
  if (a->payloadType == NVTX_PAYLOAD_TYPE_EXT) {
    const auto* data = reinterpret_cast<const nvtxPayloadData_t*>(static_cast<uintptr_t>(a->payload.ullValue));
    for (int32_t i = 0; i < a->reserved0; ++i) line += decode(data[i]);
  }
  logText += line + "\n";
  return 0;
}

int rangePop(nvtxDomainHandle_t d) {
  std::lock_guard<std::mutex> lock(mu);
  logText += "pop " + domainName(d) + "\n";
  return 0;
}

uint64_t schemaRegister(nvtxDomainHandle_t, const nvtxPayloadSchemaAttr_t* attr) {
  std::lock_guard<std::mutex> lock(mu);
  Schema s;
  for (size_t i = 0; i < attr->numEntries; ++i) {
    s.entries.push_back(attr->entries[i]);
    s.names.push_back(attr->entries[i].name ? attr->entries[i].name : "?");
  }
  const uint64_t id = attr->schemaId;
  schemas[id] = s;
  logText += "schema " + std::string(attr->name ? attr->name : "?") + " " + std::to_string(attr->numEntries) +
             " entries, static size " + std::to_string(attr->payloadStaticSize) + "\n";
  return id;
}

template <typename Fn>
void setSlot(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) {
  if (id < size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getTable) {
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(getTable(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  setSlot(table, size, NVTX_CBID_CORE2_DomainCreateA, domainCreate);
  setSlot(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, registerString);
  setSlot(table, size, NVTX_CBID_CORE2_DomainRangePushEx, rangePush);
  setSlot(table, size, NVTX_CBID_CORE2_DomainRangePop, rangePop);
  return 1;
}

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  if (!info || info->segmentsCount < 1) return 0;
  nvtxExtModuleSegment_t& seg = info->segments[0];
  if (seg.slotCount > NVTX3EXT_CBID_nvtxPayloadSchemaRegister)
    seg.functionSlots[NVTX3EXT_CBID_nvtxPayloadSchemaRegister] = reinterpret_cast<intptr_t>(schemaRegister);
  return 1;
}

extern "C" __attribute__((visibility("default"))) const char* gyretest_nvtx_log() {
  std::lock_guard<std::mutex> lock(mu);
  static std::string copy;
  copy = logText;
  return copy.c_str();
}
