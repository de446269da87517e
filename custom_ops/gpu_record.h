// The device-to-host path of the error record (GPU builds only).
#pragma once
#ifdef PADDLE_WITH_CUDA

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "mtp_bookkeeping.h"
#include "mtp_kernels.h"
#include "raise.h"
#include "paddle/extension.h"

namespace mtp {

inline void cuda_check(cudaError_t e, const char* op, const char* what) {
  MTP_CHECK(e == cudaSuccess, op, ": CUDA error in ", what, ": ", cudaGetErrorString(e));
}

// Makes `device` the thread's current CUDA device for its scope, and gives the
// caller's back after. Every CUDA call of an op acts on the current device (the
// launch, the occupancy and cluster queries, the allocations), while Paddle
// hands the op tensors on their own device, which need not be the current one:
// a tensor-parallel rank's tensors on gpu:1 in a thread whose current device
// is 0. Switches only when they differ, so the common call pays one
// cudaGetDevice.
class DeviceScope {
 public:
  DeviceScope(int device, const char* op) {
    cuda_check(cudaGetDevice(&caller_), op, "cudaGetDevice");
    if (caller_ != device) {
      cuda_check(cudaSetDevice(device), op, "cudaSetDevice");
      switched_ = true;
    }
  }
  ~DeviceScope() {
    if (switched_) cudaSetDevice(caller_);  // a destructor must not throw; it cannot fail here
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int caller_ = 0;
  bool switched_ = false;
};

// Where the kernels report.
//
// Per device, shared by every thread of the process (DeviceRecord):
//  - `pending`, device memory: the error of an asynchronous call that nobody
//    has read yet (code kOk when there is none). One per device, so that an
//    error reaches whichever thread asks next: a CUDA graph captured on one
//    thread bakes this address into its kernels, and another thread that
//    replays it reads the same record through raise_pending_errors or its
//    next synchronous call.
//  - the multi-block kernels' scratch (mtp_kernels.h), one per stream:
//    kernels on one stream run one after another and may share one, but
//    kernels on two streams may run at once.
// Both live as long as the process: at most one record a device and
// kMaxStreams scratches in it, made once.
//
// Per thread and device (ThreadReports): `report`, pinned host memory mapped
// into the device, where a synchronous call's kernel writes its result so the
// host needs no copy. A synchronous call has read its report before its
// thread can issue the next call, so calls never share a report
// concurrently. Freed when the thread ends.
constexpr int kMaxDevices = 64;

struct StreamScratch {
  cudaStream_t stream;
  GridScratch scratch;
};

struct DeviceRecord {
  static constexpr int kMaxStreams = 64;
  std::mutex setup;  // serialises the allocations below; reads take no lock
  std::atomic<BatchResult*> pending{nullptr};
  StreamScratch grids[kMaxStreams];
  std::atomic<int> streams{0};  // grids[0, streams) are made and never change
  std::atomic<bool> told_full{false};
};

inline DeviceRecord& device_record(int dev) {
  static DeviceRecord records[kMaxDevices];
  return records[dev];
}

inline int checked_device(const paddle::Place& place, const char* op) {
  const int dev = place.GetDeviceId();
  MTP_CHECK(dev >= 0 && dev < kMaxDevices, op, ": unsupported device id ", dev);
  return dev;
}

inline bool capturing(cudaStream_t stream, const char* op) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capture), op, "cudaStreamIsCapturing");
  return capture != cudaStreamCaptureStatusNone;
}

// The pending record of `place`'s device, made by the first call there from
// any thread. That first call allocates, which a CUDA graph capture forbids:
// it is refused (changing nothing, the capture still valid) with a hint to
// warm up first.
inline BatchResult* pending_record(const paddle::Place& place, cudaStream_t stream,
                                   const char* op) {
  const int dev = checked_device(place, op);
  DeviceRecord& d = device_record(dev);
  BatchResult* p = d.pending.load(std::memory_order_acquire);
  if (p != nullptr) return p;
  MTP_CHECK(!capturing(stream, op), op,
            ": the first call on a device sets up its error record, which cannot happen "
            "while a CUDA graph is being captured: call ", op,
            " once before capturing (a warm-up step); nothing was changed");
  std::lock_guard<std::mutex> lock(d.setup);
  p = d.pending.load(std::memory_order_relaxed);
  if (p != nullptr) return p;
  DeviceScope on_device(dev, op);
  cuda_check(cudaMalloc(&p, sizeof(BatchResult)), op, "cudaMalloc");
  cuda_check(cudaMemset(p, 0, sizeof(BatchResult)), op, "cudaMemset");
  cuda_check(cudaDeviceSynchronize(), op, "cudaDeviceSynchronize");  // the memset is done
  d.pending.store(p, std::memory_order_release);
  return p;
}

// The grid scratch of `stream` on `place`'s device, made on its first use.
// None (so the kernels run as one block, which is always correct) while the
// stream is being captured, where allocating is not allowed, or once the
// device has kMaxStreams scratches: then the first such call says so once
// on stderr, since that costs big batches time.
inline GridScratch grid_scratch(const paddle::Place& place, cudaStream_t stream,
                                const char* op) {
  const int dev = checked_device(place, op);
  DeviceRecord& d = device_record(dev);
  int n = d.streams.load(std::memory_order_acquire);
  for (int k = 0; k < n; ++k) {
    if (d.grids[k].stream == stream) return d.grids[k].scratch;
  }
  if (capturing(stream, op)) return GridScratch{nullptr, nullptr};
  std::lock_guard<std::mutex> lock(d.setup);
  n = d.streams.load(std::memory_order_relaxed);
  for (int k = 0; k < n; ++k) {  // another thread may have made it meanwhile
    if (d.grids[k].stream == stream) return d.grids[k].scratch;
  }
  if (n == DeviceRecord::kMaxStreams) {
    if (!d.told_full.exchange(true)) {
      std::fprintf(stderr,
                   "fastdeploy_mtp: %d streams on device %d already have grid scratch; calls "
                   "on further streams run as one block of threads (the same results, slower "
                   "for big batches)\n",
                   DeviceRecord::kMaxStreams, dev);
    }
    return GridScratch{nullptr, nullptr};
  }
  GridScratch g{nullptr, nullptr};
  DeviceScope on_device(dev, op);
  cuda_check(cudaMalloc(&g.slots, kGridSlots * sizeof(unsigned long long)), op, "cudaMalloc");
  cuda_check(cudaMalloc(&g.finished, sizeof(unsigned)), op, "cudaMalloc");
  // On the op's stream, so it is done before the kernel that first uses it.
  cuda_check(cudaMemsetAsync(g.finished, 0, sizeof(unsigned), stream), op, "cudaMemsetAsync");
  d.grids[n] = StreamScratch{stream, g};
  d.streams.store(n + 1, std::memory_order_release);
  return g;
}

// A thread's reports, one per device, freed when the thread ends.
struct ThreadReports {
  BatchResult* host[kMaxDevices] = {};
  BatchResult* device[kMaxDevices] = {};
  ThreadReports() = default;
  ThreadReports(const ThreadReports&) = delete;
  ThreadReports& operator=(const ThreadReports&) = delete;
  ~ThreadReports() {
    // Nothing is in flight: a synchronous call reads its report before it
    // returns. At the process's end the CUDA runtime may be gone already;
    // the error that cudaFreeHost then returns is of no consequence.
    for (BatchResult* p : host) {
      if (p != nullptr) cudaFreeHost(p);
    }
  }
};

struct Report {
  BatchResult* host;
  BatchResult* device;  // the same memory, as the kernel sees it
};

// This thread's report on `place`'s device, made by its first synchronous
// call there (which cannot be inside a capture: its host waits for the
// kernel).
inline Report thread_report(const paddle::Place& place, cudaStream_t stream, const char* op) {
  thread_local ThreadReports reports;
  const int dev = checked_device(place, op);
  if (reports.host[dev] == nullptr) {
    MTP_CHECK(!capturing(stream, op), op,
              ": a synchronous call cannot be captured into a CUDA graph (its host waits for "
              "the kernel): put not_need_stop on the GPU; nothing was changed");
    DeviceScope on_device(dev, op);
    BatchResult* host = nullptr;
    BatchResult* device = nullptr;
    cuda_check(cudaHostAlloc(&host, sizeof(BatchResult), cudaHostAllocMapped), op,
               "cudaHostAlloc");
    const cudaError_t e = cudaHostGetDevicePointer(&device, host, 0);
    if (e != cudaSuccess) cudaFreeHost(host);
    cuda_check(e, op, "cudaHostGetDevicePointer");
    reports.host[dev] = host;
    reports.device[dev] = device;
  }
  return Report{reports.host[dev], reports.device[dev]};
}

// Before a synchronous launch: mark the report unwritten, so that a kernel
// that never ran cannot pass off the previous call's result as its own.
inline BatchResult* arm_report(const Report& r) {
  r.host->code = kUnreported;
  return r.device;
}

// After a synchronous launch: wait for the kernel's report and read it.
//
// The call returns as soon as the report is there: the host polls its `code`
// (the kernel writes it last, after a system-wide fence) rather than waiting
// for the stream to drain. Everything the kernel wrote to the tensors is done
// by then, and later work on the stream is ordered after it anyway. If nothing
// arrives within kPollFor (work queued ahead of the kernel, or a kernel that
// failed), it waits on the stream instead, which also surfaces CUDA errors.
inline BatchResult read_report(const Report& rep, cudaStream_t stream, const char* op) {
  constexpr auto kPollFor = std::chrono::microseconds(500);
  const volatile int64_t* code = &rep.host->code;
  const auto start = std::chrono::steady_clock::now();
  bool arrived = true;
  for (unsigned n = 1; *code == kUnreported; ++n) {
    if (n % 64 == 0 && std::chrono::steady_clock::now() - start > kPollFor) {
      arrived = false;
      break;
    }
  }
  if (!arrived) cuda_check(cudaStreamSynchronize(stream), op, "cudaStreamSynchronize");
  std::atomic_thread_fence(std::memory_order_acquire);
  const BatchResult r = *rep.host;
  MTP_CHECK(r.code != kUnreported, op, ": the kernel finished without reporting");
  return r;
}

// Takes the pending error of asynchronous calls off the device, leaving none
// behind, so an error is reported once. A kernel does the taking
// (launch_take_pending), so that an error another stream leaves at the same
// moment is either taken whole or stays pending, never half-read or cleared
// unread.
inline BatchResult take_pending(BatchResult* pending, const Report& rep, cudaStream_t stream,
                                const char* op) {
  cuda_check(launch_take_pending(pending, arm_report(rep), stream), op, "kernel launch");
  return read_report(rep, stream, op);
}

// update_attn_mask_offsets has no host tensor to say "don't wait": it runs
// asynchronously while its stream is being captured into a CUDA graph, or when
// FASTDEPLOY_MTP_ASYNC_MASK=1 is set in the environment.
inline bool asynchronous_mask_call(cudaStream_t stream, const char* op) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &status), op, "cudaStreamIsCapturing");
  if (status != cudaStreamCaptureStatusNone) return true;
  const char* env = std::getenv("FASTDEPLOY_MTP_ASYNC_MASK");
  return env != nullptr && env[0] == '1';
}

}  // namespace mtp

#endif  // PADDLE_WITH_CUDA
