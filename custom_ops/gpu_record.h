// The device-to-host path of the error record (GPU builds only).
#pragma once
#ifdef PADDLE_WITH_CUDA

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

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

// Where the kernels report, one set per thread and device:
//  - `pending`, device memory: the error of an asynchronous call that nobody
//    has read yet (code kOk when there is none);
//  - `report`, pinned host memory mapped into the device: a synchronous call's
//    kernel writes its result there directly, so the host needs no copy.
// A synchronous call has read its report before its thread can issue the next
// call, so calls never share a report concurrently.
// `grids` holds the multi-block kernels' scratch (mtp_kernels.h), one per
// stream: kernels on one stream run one after another and may share one, but
// kernels on two streams may run at once.
struct StreamScratch {
  cudaStream_t stream;
  GridScratch scratch;
};
struct RecordBuffers {
  static constexpr int kMaxStreams = 16;
  int device = 0;
  BatchResult* pending = nullptr;
  BatchResult* report = nullptr;         // host address
  BatchResult* report_device = nullptr;  // the same memory, as the kernel sees it
  StreamScratch grids[kMaxStreams];
  int streams = 0;
};

// The buffers of this thread on `place`'s device, made by its first call there.
// That first call allocates, which a CUDA graph capture forbids: it is refused
// (changing nothing, the capture still valid) with a hint to warm up first.
inline RecordBuffers& record_buffers(const paddle::Place& place, cudaStream_t stream,
                                     const char* op) {
  constexpr int kMaxDevices = 64;
  thread_local RecordBuffers buffers[kMaxDevices];
  const int dev = place.GetDeviceId();
  MTP_CHECK(dev >= 0 && dev < kMaxDevices, op, ": unsupported device id ", dev);
  RecordBuffers& b = buffers[dev];
  if (b.pending == nullptr) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cuda_check(cudaStreamIsCapturing(stream, &capture), op, "cudaStreamIsCapturing");
    MTP_CHECK(capture == cudaStreamCaptureStatusNone, op,
              ": the first call on a thread sets up its error record, which cannot happen "
              "while a CUDA graph is being captured: call ", op,
              " once before capturing (a warm-up step); nothing was changed");
    b.device = dev;
    DeviceScope on_device(dev, op);
    cuda_check(cudaMalloc(&b.pending, sizeof(BatchResult)), op, "cudaMalloc");
    cuda_check(cudaMemset(b.pending, 0, sizeof(BatchResult)), op, "cudaMemset");
    cuda_check(cudaHostAlloc(&b.report, sizeof(BatchResult), cudaHostAllocMapped), op,
               "cudaHostAlloc");
    cuda_check(cudaHostGetDevicePointer(&b.report_device, b.report, 0), op,
               "cudaHostGetDevicePointer");
    cuda_check(cudaDeviceSynchronize(), op, "cudaDeviceSynchronize");  // the memset is done
  }
  return b;
}

// The grid scratch of `stream`, made on its first use. None (so the kernels
// run as one block, which is always correct) while the stream is being
// captured, where allocating is not allowed, or past kMaxStreams streams.
inline GridScratch grid_scratch(RecordBuffers& b, cudaStream_t stream, const char* op) {
  for (int k = 0; k < b.streams; ++k) {
    if (b.grids[k].stream == stream) return b.grids[k].scratch;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capture), op, "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone || b.streams == RecordBuffers::kMaxStreams) {
    return GridScratch{nullptr, nullptr};
  }
  GridScratch g{nullptr, nullptr};
  DeviceScope on_device(b.device, op);
  cuda_check(cudaMalloc(&g.slots, kGridSlots * sizeof(unsigned long long)), op, "cudaMalloc");
  cuda_check(cudaMalloc(&g.finished, sizeof(unsigned)), op, "cudaMalloc");
  // On the op's stream, so it is done before the kernel that first uses it.
  cuda_check(cudaMemsetAsync(g.finished, 0, sizeof(unsigned), stream), op, "cudaMemsetAsync");
  b.grids[b.streams++] = StreamScratch{stream, g};
  return g;
}

// Before a synchronous launch: mark the report unwritten, so that a kernel
// that never ran cannot pass off the previous call's result as its own.
inline BatchResult* arm_report(RecordBuffers& b) {
  b.report->code = kUnreported;
  return b.report_device;
}

// After a synchronous launch: wait for the kernel's report and read it.
//
// The call returns as soon as the report is there: the host polls its `code`
// (the kernel writes it last, after a system-wide fence) rather than waiting
// for the stream to drain. Everything the kernel wrote to the tensors is done
// by then, and later work on the stream is ordered after it anyway. If nothing
// arrives within kPollFor (work queued ahead of the kernel, or a kernel that
// failed), it waits on the stream instead, which also surfaces CUDA errors.
inline BatchResult read_report(RecordBuffers& b, cudaStream_t stream, const char* op) {
  constexpr auto kPollFor = std::chrono::microseconds(500);
  const volatile int64_t* code = &b.report->code;
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
  const BatchResult r = *b.report;
  MTP_CHECK(r.code != kUnreported, op, ": the kernel finished without reporting");
  return r;
}

// Takes the pending error of asynchronous calls off the device (one copy and
// a synchronisation), leaving none behind: an error is reported once.
inline BatchResult take_pending(RecordBuffers& b, cudaStream_t stream, const char* op) {
  cuda_check(cudaMemcpyAsync(b.report, b.pending, sizeof(BatchResult), cudaMemcpyDeviceToHost,
                             stream),
             op, "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream), op, "cudaStreamSynchronize");
  const BatchResult r = *b.report;
  if (r.code != kOk) {
    cuda_check(cudaMemsetAsync(b.pending, 0, sizeof(BatchResult), stream), op, "cudaMemsetAsync");
  }
  return r;
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
