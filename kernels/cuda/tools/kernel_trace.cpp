// A kernel timeline for GPU machines without Nsight Systems. The CUDA driver loads this library
// into any process started with
//
//   CUDA_INJECTION64_PATH=libustrain_kernel_trace.so USTRAIN_KERNEL_TRACE=trace.csv ustrain ...
//
// and it writes one CSV line per kernel, copy and memset that ran (CUPTI activity records,
// taken by the GPU's own clock while the program runs at full speed, unlike Nsight Compute's
// serialised replay): kind, start and end in ns, stream, name. scripts/kernel-timeline.py reads
// it: busy time per op class, and the idle gaps between kernels with the kernels around them.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

constexpr std::size_t kBufferBytes = 16u << 20;

std::FILE* g_out = nullptr;  // the one trace file of this process
std::mutex g_out_mutex;      // CUPTI may hand buffers back from its own thread

void report(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, text ? text : "unknown CUPTI error");
}

// A demangled kernel name, quoted for CSV (double quotes become single ones).
void write_name(const char* mangled) {
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  const char* name = status == 0 && plain ? plain : mangled;
  std::fputc('"', g_out);
  for (const char* c = name; *c; ++c) std::fputc(*c == '"' ? '\'' : *c, g_out);
  std::fputs("\"\n", g_out);
  std::free(plain);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard lock(g_out_mutex);
  CUpti_Activity* record = nullptr;
  while (g_out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        std::fprintf(g_out, "kernel,%llu,%llu,%u,", static_cast<unsigned long long>(k->start),
                     static_cast<unsigned long long>(k->end), k->streamId);
        write_name(k->name);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        std::fprintf(g_out, "memcpy,%llu,%llu,%u,\"copy kind %u, %llu bytes\"\n",
                     static_cast<unsigned long long>(m->start), static_cast<unsigned long long>(m->end), m->streamId,
                     static_cast<unsigned>(m->copyKind), static_cast<unsigned long long>(m->bytes));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        std::fprintf(g_out, "memset,%llu,%llu,%u,\"memset %llu bytes\"\n", static_cast<unsigned long long>(m->start),
                     static_cast<unsigned long long>(m->end), m->streamId, static_cast<unsigned long long>(m->bytes));
        break;
      }
      default: break;
    }
  }
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
    std::fprintf(stderr, "kernel_trace: %zu records dropped\n", dropped);
  std::free(buffer);
}

void finish() {
  report(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flushing the activity buffers");
  std::lock_guard lock(g_out_mutex);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

// Called by the CUDA driver when it initialises, in every process that names this library.
extern "C" int InitializeInjection() {
  const char* path = std::getenv("USTRAIN_KERNEL_TRACE");
  g_out = std::fopen(path && *path ? path : "kernel-trace.csv", "w");
  if (!g_out) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path && *path ? path : "kernel-trace.csv");
    return 0;
  }
  std::fputs("kind,start_ns,end_ns,stream,name\n", g_out);
  report(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "registering the buffer callbacks");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enabling kernel records");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling copy records");
  report(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enabling memset records");
  std::atexit(finish);
  return 1;
}
