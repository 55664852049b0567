// The declaration of every variable gyre reads. Add new settings here only.
#include "src/config/env.h"

namespace gyre::env {

// Every host planner threshold (GYRE_*_BYTES below) takes the same values
// and, unset, falls back the same way; a macro so that the sentence joins
// each description's literal.
#define GYRE_THRESHOLD_UNSET \
  "unset: chosen from the CPU or measured (gyre-info shows the value and why; same value on every rank)"
constexpr const char* kThresholdValues = "bytes (K, M, G suffixes), or never (a size no call reaches)";

const std::vector<VarSpec>& registry() {
  static const std::vector<VarSpec> vars = {
      {"NCCL_DEBUG", Type::Choice, "", "VERSION,WARN,INFO,TRACE",
       "log level; lines go to stderr or NCCL_DEBUG_FILE"},
      {"NCCL_DEBUG_FILE", Type::String, "", "file name; %h = host, %p = pid",
       "write log lines to this file instead of stderr"},
      {"NCCL_DEBUG_SUBSYS", Type::String, "", "comma list of INIT,NET,COLL,GRAPH,TUNING,ENV,ALL; ^ excludes",
       "subsystems whose INFO lines are shown (all by default)"},
      {"NCCL_CONF_FILE", Type::String, "", "file path",
       "config file read instead of ~/.nccl.conf (environment only; /etc/nccl.conf is read first)"},
      {"NCCL_COMM_ID", Type::String, "", "host:port or [ipv6]:port",
       "fixed rendezvous address; rank 0 hosts it and ncclGetUniqueId needs no root thread"},
      {"NCCL_SOCKET_IFNAME", Type::String, "", "prefix list; ^ excludes; = exact names",
       "which network interfaces the bootstrap and socket transport use"},
      {"NCCL_SOCKET_FAMILY", Type::Choice, "", "AF_INET,AF_INET6",
       "restrict interface selection to IPv4 or IPv6"},
      {"NCCL_BUFFSIZE", Type::Bytes, "4194304", "4096..1073741824",
       "bytes of buffering per connection; one pipeline step is BUFFSIZE/8. Unset: 4 MiB, but a host-memory "
       "communicator with 3+ ranks on a host takes 2 x the CPU's L2 within 1..4 MiB (gyre-info shows it)", 4096, int64_t{1} << 30},
      {"NCCL_ALGO", Type::String, "", "Ring,Tree,Direct; ^ excludes",
       "restrict the algorithms the cost model may pick (Tree applies to AllReduce; Direct to Broadcast, "
       "AllGather, AllReduce and ReduceScatter on 3..8 host ranks of one host)"},
      {"GYRE_SINGLE_COPY", Type::Choice, "auto", "auto,off,always",
       "host collectives on one host read peers' buffers in place (one copy): auto where the owner's buffer came "
       "from gyreMemAllocHost (Broadcast/AllGather from 8 KiB, ReduceScatter from 256 KiB, 2-rank AllReduce from "
       "1 MiB; heap buffers then go through the FIFO, or from GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES through "
       "process_vm_readv; gyre-info shows the thresholds this CPU gets), always at every size and for heap buffers too "
       "(process_vm_readv), off never"},
      {"GYRE_SINGLE_COPY_ALLREDUCE_MIN_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: 2-rank host AllReduce reduces from the peer's buffer (single copy) from this size; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_SINGLE_COPY_REDUCE_SCATTER_MIN_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: host ReduceScatter runs single copy from this size; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_SINGLE_COPY_MESH_MAX_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: host ReduceScatter on 3..8 ranks runs single copy only up to "
       "this size (default: 4 x the CPU's L2); "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_SINGLE_COPY_MIN_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: host Broadcast/AllGather run single copy from this size; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: host Broadcast/AllGather of heap buffers read them with "
       "process_vm_readv from this size instead of sending them through the FIFO (default: 64 KiB on Intel, never "
       "elsewhere); "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_TWO_CHANNEL_MIN_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: AllReduce on 3+ host ranks uses two ring channels from this size; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_CHANNEL_MIN_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: host ring collectives add one channel per this many bytes; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_DOUBLING_MAX_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: largest AllReduce run by recursive doubling; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_ONE_SHOT_MAX_BYTES", Type::String, "", kThresholdValues,
       "planner threshold: 4 and 8 ranks: largest AllReduce run one-shot (Direct) rather than by doubling; "
       GYRE_THRESHOLD_UNSET},
      {"GYRE_STREAMING_STORES_MIN_BYTES", Type::String, "", kThresholdValues,
       "host collectives copy received elements into the output with streaming (non-temporal) stores, which skip "
       "the caches, from this call size (x86-64; the output is then not left in the caches); "
       GYRE_THRESHOLD_UNSET},
      {"NCCL_PROTO", Type::String, "", "Simple,LL; ^ excludes", "force the protocol"},
      {"NCCL_MIN_NCHANNELS", Type::Int, "1", "1..64", "fewest channels the planner may use", 1, 64},
      {"NCCL_MAX_NCHANNELS", Type::Int, "32", "1..64", "most channels the planner may use", 1, 64},
      {"NCCL_SOCKET_NTHREADS", Type::Int, "1", "1..16", "helper threads per socket connection", 1, 16},
      {"NCCL_NSOCKS_PERTHREAD", Type::Int, "1", "1..64", "sockets each socket helper thread drives", 1, 64},
      {"NCCL_CHECKS_DISABLE", Type::Int, "0", "0..1", "skip argument checks on collective calls", 0, 1},
      {"NCCL_CHECK_POINTERS", Type::Int, "1", "0..1",
       "check on every call that buffers are device memory on device communicators (on by default: a host pointer "
       "would crash the kernel) and, when set to 1 explicitly, host memory on host communicators", 0, 1},
      {"NCCL_HOSTID", Type::String, "", "any text",
       "identity of this host: ranks with equal ids are planned as one host (default: hostname + boot id)"},
      {"NCCL_TOPO_FILE", Type::String, "", "file path (topology XML)",
       "load the topology from this file instead of detecting it"},
      {"NCCL_TOPO_DUMP_FILE", Type::String, "", "file path",
       "write the topology (detected or loaded) to this file as XML"},
      {"NCCL_P2P_LEVEL", Type::Choice, "", "LOC,NVL,PIX,PXB,PHB,SYS",
       "farthest path type over which GPUs use direct peer-to-peer (default PXB)"},
      {"NCCL_P2P_DISABLE", Type::Int, "0", "0..1", "never use peer-to-peer between GPUs", 0, 1},
      {"NCCL_SHM_DISABLE", Type::Int, "0", "0..1", "never use shared memory between processes of a host", 0, 1},
      {"NCCL_NET_GDR_LEVEL", Type::Choice, "", "LOC,PIX,PXB,PHB,SYS",
       "farthest GPU-NIC path type over which the NIC reads GPU memory directly (default PXB)"},
      {"NCCL_IB_HCA", Type::String, "", "prefix list of HCA[:port]; ^ excludes; = exact names",
       "which InfiniBand/RoCE devices the ib transport uses"},
      {"NCCL_NET", Type::String, "", "IB, Socket, or a plugin's network name",
       "force the network between hosts (default: a plugin's, else IB when a usable HCA port exists, else Socket)"},
      {"NCCL_PROFILER_PLUGIN", Type::String, "", "NAME (loads NAME, then libnccl-profiler-NAME.so), a path, or none",
       "NCCL profiler plugin (ncclProfiler_v6 or _v5) that receives group, collective, send/recv and step events; "
       "unset: "
       "libnccl-profiler.so if it can be loaded (docs/OBSERVABILITY.md)"},
      {"NCCL_TUNER_PLUGIN", Type::String, "", "NAME (loads NAME, then libnccl-tuner-NAME.so), a path, or none",
       "NCCL tuner plugin (ncclTunerPlugin_v6 down to _v2) whose cost table steers the planner's algorithm, "
       "protocol and channels per call; unset: libnccl-tuner.so if it can be loaded, else the net plugin's "
       "library if it exports a tuner (docs/COMPATIBILITY.md)"},
      {"GYRE_STATUS", Type::Int, "1", "0..1",
       "1: each process with a communicator answers `gyre-info status` on a unix socket of its user "
       "(docs/OBSERVABILITY.md); 0: no socket and no thread", 0, 1},
      {"GYRE_STATUS_DIR", Type::String, "", "folder path",
       "where the status sockets live (default $XDG_RUNTIME_DIR/gyre, else /tmp/gyre-<uid>)"},
      {"GYRE_STATUS_ADDR", Type::String, "", "PORT or HOST:PORT (HOST numeric IPv4, localhost, or * for all)",
       "also answer `gyre-info status --addr` on TCP, on the first free port of PORT..PORT+63 (HOST default "
       "127.0.0.1: this host only); queries must prove a communicator's secret. Unset: no TCP port"},
      {"GYRE_STATUS_KEY_DIR", Type::String, "", "folder path",
       "rank 0 of each communicator writes <id>.key there (mode 0600), the secret `gyre-info status --key` "
       "needs to ask a status port; removed at ncclCommDestroy"},
      {"NCCL_NVTX_DISABLE", Type::Int, "0", "0..1",
       "1: no NVTX ranges for API calls (they are emitted when gyre was built with NVTX; docs/OBSERVABILITY.md)",
       0, 1},
      {"NCCL_NET_PLUGIN", Type::String, "", "NAME (loads NAME, then libnccl-net-NAME.so), a path, or none",
       "external NCCL net plugin to load (its newest table gyre supports: ncclNetPlugin_v12 down to _v8); unset: "
       "libnccl-net.so if it can be loaded and works"},
      {"NCCL_ENV_PLUGIN", Type::String, "", "NAME (loads NAME, then libnccl-env-NAME.so), a path, or none",
       "NCCL env plugin (ncclEnvPlugin_v2 or _v1) whose getEnv answers every NCCL_* and GYRE_* setting in place "
       "of the environment; unset: libnccl-env.so if it can be loaded"},
      {"NCCL_IB_DISABLE", Type::Int, "0", "0..1", "do not use the InfiniBand/RoCE verbs network", 0, 1},
      {"NCCL_IB_QPS_PER_CONNECTION", Type::Int, "1", "1..128",
       "RC queue pairs per IB connection; each message is striped over them", 1, 128},
      {"NCCL_IB_GID_INDEX", Type::Int, "-1", "-1..1023",
       "GID index of RoCE ports (-1: the first RoCE v2 IPv4 GID)", -1, 1023},
      {"NCCL_IB_TIMEOUT", Type::Int, "20", "1..31", "IB QP ack timeout exponent (4.096 us x 2^value)", 1, 31},
      {"NCCL_IB_RETRY_CNT", Type::Int, "7", "0..7", "IB QP retry count", 0, 7},
      {"NCCL_IB_SL", Type::Int, "0", "0..15", "IB service level of the QPs", 0, 15},
      {"NCCL_IB_TC", Type::Int, "0", "0..255", "IB traffic class of the QPs (RoCE: DSCP << 2)", 0, 255},
      {"GYRE_IBVERBS_LIB", Type::String, "", "library file name or path",
       "load this verbs library instead of libibverbs.so.1 (tests use a fake provider)"},
      {"NCCL_IGNORE_CPU_AFFINITY", Type::Int, "0", "0..1",
       "bind helper threads to every CPU of the NUMA node nearest their device or NIC, ignoring the process's affinity mask", 0, 1},
      {"GYRE_FAKE_CUDA", Type::Int, "0", "0..2",
       "tests only: device communicators run on a fake CUDA runtime (host memory as device memory, a thread per "
       "stream; 2: each collective call also waits for its streams)", 0, 2},
      {"GYRE_FAKE_CUDA_LIB", Type::String, "libgyre_fakecuda.so", "library file name or path",
       "tests only: the fake CUDA runtime that GYRE_FAKE_CUDA loads (built with the tests, not installed)"},
      {"GYRE_FAKE_BLOCK_THREADS", Type::Int, "1", "1..8",
       "tests only: host threads per block of the fake runtime's collective kernel (more than one exercises the "
       "kernel loop's barriers and how a block shares each step)", 1, 8},
      {"GYRE_DEVICE_PATH", Type::Choice, "auto", "auto,kernels,staged,direct",
       "device communicators: collective kernels over p2p connections (kernels), staging through host memory over "
       "shm/socket (staged), or (auto) kernels whenever every rank pair can use p2p, except that ranks sharing "
       "one GPU, all in one process or each in its own, run collectives directly (one pass over each other's "
       "buffers, mapped by CUDA IPC across processes; in one process from GYRE_DIRECT_MIN_BYTES up); direct "
       "forces that for such ranks"},
      {"GYRE_DIRECT_MIN_BYTES", Type::Bytes, "0", "0..1099511627776",
       "ranks of one process sharing one GPU under GYRE_DEVICE_PATH=auto: collectives of at least this many bytes "
       "(the larger of a rank's input and output) run as one pass over each other's buffers instead of kernels "
       "over FIFOs; 0 (all) measured fastest on an H100 but at 2 ranks below 8 KiB (same value on every rank)"},
      {"GYRE_DIRECT_BLOCKS", Type::Int, "0", "0..65535",
       "the direct path's kernel: at most this many blocks of 512 threads per launch (0: every SM for the "
       "leader's launches, half the SMs per rank under GYRE_DIRECT_LEADER=0, which measured fastest on an H100 "
       "at 2 and 4 ranks; a tuning knob for other GPUs)", 0, 65535},
      {"GYRE_IPC_CACHE_ENTRIES", Type::Int, "64", "1..65536",
       "device send/recv between processes on one host: at most this many senders' buffers stay mapped by CUDA "
       "IPC per receiving communicator; past that the least recently used is closed once the copies queued from "
       "it have run (buffers a CUDA graph captured a copy from stay until destroy), so a freed send buffer is not "
       "held mapped for the communicator's life", 1, 65536},
      {"GYRE_DIRECT_LEADER", Type::Int, "1", "0..1",
       "ranks sharing one GPU on the direct path: 1 = rank 0 runs every rank's share with the whole GPU (the "
       "others launch no kernels, only signal; fastest measured on an H100, in one process and across "
       "processes), 0 = each rank runs its own share (same value on every rank)", 0, 1},
      {"GYRE_DEVICE_API_SHARED_GPU", Type::Int, "0", "0..1",
       "ncclDevCommCreate: 1 accepts LSA teams with ranks of other processes on the same GPU (under MPS, which "
       "runs their kernels together); 0 refuses them, as without MPS their kernels take turns on the GPU and "
       "every LSA barrier between them waits for a time slice", 0, 1},
      {"GYRE_STAGING_PIECE_BYTES", Type::Int, "1048576", "1..1073741824",
       "staged device collectives: bytes of a rank's block per pipeline piece (larger calls overlap their host "
       "copies with the transfer; at most 64 pieces per call; same value on every rank)", 1, 1073741824},
      {"GYRE_JOB_ID", Type::String, "", "any text, the same on every rank of one job",
       "with NCCL_COMM_ID: mixed into the rendezvous secret (with SLURM/Open MPI/PMIx/torchrun job ids) so "
       "ranks of another job at the same address are refused"},
      {"GYRE_ENCRYPT", Type::Choice, "auto", "auto,on,off",
       "socket connections gyre owns (rendezvous, bootstrap, socket/net transport control and data): auto encrypts "
       "and authenticates those between hosts (AES-256-GCM records, keys from the unique id's secret or a key) and "
       "leaves same-host ones clear; on encrypts every one (fails without OpenSSL or a key); off sends all in the clear"},
      {"GYRE_ENCRYPT_KEY_FILE", Type::String, "", "file path (16..4096 bytes, the same on every rank)",
       "a pre-shared key for encrypted connections, mixed with the unique id's secret (needed with NCCL_COMM_ID, "
       "whose id has no random secret); gyreSetEncryptionKey sets one from the program instead"},
      {"GYRE_INIT_TIMEOUT", Type::Int, "120", "1..86400",
       "seconds a rank waits for all ranks to join at communicator init", 1, 86400},
      {"GYRE_TORCH_ALLOCATOR", Type::Int, "1", "0..1",
       "torch_gyre replaces torch's CPU allocator on import: tensors from GYRE_TORCH_ALLOCATOR_MIN_BYTES live in "
       "memory the other ranks of the host map (as gyreMemAllocHost's), so host collectives read them in place; "
       "0 leaves torch's allocator alone", 0, 1},
      {"GYRE_TORCH_ALLOCATOR_MIN_BYTES", Type::Bytes, "1048576", "1..1099511627776",
       "CPU tensors from this size come from gyre's shareable memory (smaller ones from torch's own allocator)", 1,
       int64_t{1} << 40},
      {"GYRE_TORCH_ALLOCATOR_MAX_ALLOCATIONS", Type::Int, "0", "0..1048576",
       "most shareable tensor allocations held at once, live or kept for reuse (each holds a file descriptor); beyond it torch's own "
       "allocator serves them. 0: a quarter of RLIMIT_NOFILE's soft limit", 0, 1 << 20},
      {"GYRE_TORCH_ALLOCATOR_KEEP_BYTES", Type::Bytes, "536870912", "0..1099511627776",
       "freed shareable tensor memory kept for the next tensor of the same size (its pages stay faulted in and "
       "mapped by the peers); the oldest is released beyond this many bytes. 0 keeps nothing", 0,
       int64_t{1} << 40},
      {"GYRE_TIMEOUT", Type::Int, "300", "1..86400",
       "seconds any wait on a peer inside a collective may last before it fails (every communicator starts "
       "with it; gyreCommSetTimeout changes one communicator's)", 1, 86400},
  };
  return vars;
}

}  // namespace gyre::env
