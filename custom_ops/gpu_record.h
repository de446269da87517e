// The device-to-host path of the error record (GPU builds only).
#pragma once
#ifdef PADDLE_WITH_CUDA

#include <cuda_runtime.h>

#include <cstdlib>

#include "mtp_bookkeeping.h"
#include "op_error.h"
#include "paddle/extension.h"

namespace mtp {

inline void cuda_check(cudaError_t e, const char* op, const char* what) {
  MTP_CHECK(e == cudaSuccess, op, ": CUDA error in ", what, ": ", cudaGetErrorString(e));
}

// A device record and its pinned host mirror, one per thread and device. A
// synchronous call has synchronised its stream before its thread can issue the
// next call, so calls never share a record concurrently; an asynchronous call
// leaves its record on the device until the next synchronous call reads it.
struct RecordBuffers {
  ErrorRecord* device = nullptr;
  ErrorRecord* host = nullptr;
};

inline RecordBuffers& record_buffers(const paddle::Place& place, const char* op) {
  constexpr int kMaxDevices = 64;
  thread_local RecordBuffers buffers[kMaxDevices];
  const int dev = place.GetDeviceId();
  MTP_CHECK(dev >= 0 && dev < kMaxDevices, op, ": unsupported device id ", dev);
  RecordBuffers& b = buffers[dev];
  if (b.device == nullptr) {
    int current = 0;
    cuda_check(cudaGetDevice(&current), op, "cudaGetDevice");
    cuda_check(cudaSetDevice(dev), op, "cudaSetDevice");
    cuda_check(cudaMalloc(&b.device, sizeof(ErrorRecord)), op, "cudaMalloc");
    cuda_check(cudaMemset(b.device, 0, sizeof(ErrorRecord)), op, "cudaMemset");
    cuda_check(cudaHostAlloc(&b.host, sizeof(ErrorRecord), cudaHostAllocDefault), op,
               "cudaHostAlloc");
    cuda_check(cudaSetDevice(current), op, "cudaSetDevice");
  }
  return b;
}

// Brings the record to the host in one copy and waits for it. An error is
// reported once: the device copy is cleared so the next call starts clean.
inline ErrorRecord read_record(RecordBuffers& b, cudaStream_t stream, const char* op) {
  cuda_check(cudaMemcpyAsync(b.host, b.device, sizeof(ErrorRecord), cudaMemcpyDeviceToHost,
                             stream),
             op, "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream), op, "cudaStreamSynchronize");
  const ErrorRecord r = *b.host;
  if (r.code != kOk) {
    cuda_check(cudaMemsetAsync(b.device, 0, sizeof(ErrorRecord), stream), op, "cudaMemsetAsync");
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
