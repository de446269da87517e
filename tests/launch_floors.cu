// Launch floors of a captured step: what a CUDA graph of 20 steps x 4 kernels
// costs a step when the kernels do next to nothing but the one thing each
// variant names (an empty kernel, with or without a programmatic dependent
// launch; one load and store a thread, launched plainly or cooperatively; a
// chain of dependent loads in one warp; one block striding over n items; a
// cooperative grid barrier; a hand-made barrier; a "last block to finish"
// count; a thread-block cluster; per-block slots polled for this launch's
// tag; the agreement split into a check kernel and an apply kernel; a barrier
// with no fence). A dev tool, not a test: it tells how far below our kernels
// the floor lies (docs/performance.md, fifth to seventh sessions). CI only
// compiles it.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90,code=sm_90 -o floors tests/launch_floors.cu
//   ./floors [TEXT]   (on the GPU machine; TEXT: only the rows whose name holds it)
#include <cooperative_groups.h>
#include <cstdio>
#include <cstring>
#include <vector>
#include <functional>
namespace cg = cooperative_groups;
#define CHECK(x) do { cudaError_t e_=(x); if(e_){printf("%s:%d %s\n",__FILE__,__LINE__,cudaGetErrorString(e_)); exit(1);} } while(0)

__device__ __forceinline__ void pdl() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__global__ void k_empty() {}
__global__ void k_empty_pdl() { pdl(); }
__global__ void k_loadstore(int* buf, int n) {  // every thread: one load, one store
  pdl();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = buf[i] + 1;
}
__global__ void k_chain(int* buf, int n, int depth) {  // dependent loads
  pdl();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = buf[i];
  for (int d = 0; d < depth; ++d) v = buf[(i + (v & 1)) % n] + v;
  buf[i] = v & 0xff;
}
__global__ void k_gridsync(int* buf, int n) {
  pdl();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  cg::this_grid().sync();
  if (i < n) buf[i] = (v + 1) & 0xff;
}
// own barrier: count + generation
__global__ void k_ownsync(int* buf, int n, unsigned* count, volatile unsigned* gen) {
  pdl();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned g = *gen;
    __threadfence();
    if (atomicAdd(count, 1) == gridDim.x - 1) { *count = 0; __threadfence(); *gen = g + 1; }
    else while (*gen == g) {}
    __threadfence();
  }
  __syncthreads();
  if (i < n) buf[i] = (v + 1) & 0xff;
}
// last block done: no wait
__global__ void k_lastblock(int* buf, int n, unsigned* count, int* flag) {
  pdl();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) buf[i] = (buf[i] + 1) & 0xff;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(count, 1) == gridDim.x - 1) { *count = 0; *flag += 1; }
  }
}
__global__ void k_oneblock(int* buf, int n) {  // one block strides over n
  pdl();
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = (buf[i] + 1) & 0xff;
  __syncthreads();
}

// The block's smallest v, in every lane of its first warp (in the other
// warps: ~0u). Every thread calls it.
__device__ unsigned first_warp_min(unsigned v) {
  __shared__ unsigned warps[32];
  v = __reduce_min_sync(~0u, v);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  const unsigned b = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : ~0u;
  return __reduce_min_sync(~0u, b);
}

// One cluster agreeing through distributed shared memory: each block pushes
// its verdict into every block's slots, then one hardware cluster barrier
// (the arrive at the start makes sure every block runs before it is written
// to; no block touches another's memory after the barrier, so any may exit).
__global__ void k_clustersync(int* buf, int n) {
  pdl();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  __shared__ unsigned slots[16];
  cg::cluster_group cl = cg::this_cluster();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  const unsigned b = first_warp_min((unsigned)v);
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  unsigned nb = cl.num_blocks();
  if (threadIdx.x < nb) cl.map_shared_rank(slots, threadIdx.x)[cl.block_rank()] = b;
  cl.sync();
  unsigned g = threadIdx.x % 32 < nb ? slots[threadIdx.x % 32] : ~0u;
  g = __reduce_min_sync(~0u, g);
  if (i < n) buf[i] = (v + 1 + (g & 0x100)) & 0xff;
}

// Blocks agreeing through per-block slots tagged with the launch's epoch: a
// block's first warp polls every slot until each carries this launch's tag,
// and the slots it waited for hold the verdicts. No atomic and no second read
// after a barrier. Block 0 advances the epoch once it has seen every slot
// (each block read the epoch before writing its slot). A floor only: the
// tag wraps, and a slot left from 2^32 launches before would pass for new.
__global__ void k_slotpoll(int* buf, int n, unsigned long long* slots, unsigned* epoch_word) {
  pdl();
  __shared__ unsigned verdict;
  const unsigned epoch = *(volatile unsigned*)epoch_word + 1;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  const unsigned b = first_warp_min((unsigned)v);
  if (threadIdx.x < 32) {
    if (threadIdx.x == 0) {
      unsigned long long s = (unsigned long long)epoch << 32 | b;
      asm volatile("st.release.gpu.global.u64 [%0], %1;" :: "l"(slots + blockIdx.x), "l"(s) : "memory");
    }
    unsigned g = ~0u;
    for (unsigned base = 0; base < gridDim.x; base += 32 * 8) {
      unsigned long long got[8];
      bool seen[8];
#pragma unroll
      for (int r = 0; r < 8; ++r) seen[r] = base + threadIdx.x + 32 * r >= gridDim.x;
      bool all;
      do {
#pragma unroll
        for (int r = 0; r < 8; ++r)
          if (!seen[r]) asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(got[r]) : "l"(slots + base + threadIdx.x + 32 * r) : "memory");
        all = true;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
          if (!seen[r] && (unsigned)(got[r] >> 32) == epoch) { seen[r] = true; g = min(g, (unsigned)got[r]); }
          all &= seen[r];
        }
      } while (!__all_sync(~0u, all));
    }
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    g = __reduce_min_sync(~0u, g);
    if (threadIdx.x == 0) verdict = g;
  }
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile unsigned*)epoch_word = epoch;
  if (i < n) buf[i] = (v + 1 + (verdict & 0x100)) & 0xff;
}
// The agreement as two kernels (two graph nodes an op): "check" puts each
// block's verdict in its slot; "apply" reads every slot (its first warp a
// block) once the check kernel has finished.
__global__ void k_check(int* buf, int n, unsigned long long* slots) {
  pdl();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  const unsigned b = first_warp_min((unsigned)v);
  if (threadIdx.x == 0) slots[blockIdx.x] = b;
}
__global__ void k_apply(int* buf, int n, unsigned long long* slots, int check_blocks) {
  pdl();
  __shared__ unsigned verdict;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  if (threadIdx.x < 32) {
    unsigned g = ~0u;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
      int k = threadIdx.x + 32 * r;
      if (k < check_blocks) g = min(g, (unsigned)__ldcg(slots + k));
    }
    g = __reduce_min_sync(~0u, g);
    if (threadIdx.x == 0) verdict = g;
  }
  __syncthreads();
  if (i < n) buf[i] = (v + 1 + (verdict & 0x100)) & 0xff;
}

// A grid barrier with no fence: a relaxed count and a relaxed spin, the
// verdicts added into the count (blocks arrived in the high half, failing
// blocks in the low). What the release and acquire of the cooperative
// barrier cost, beside it. Not a safe barrier for writes; a floor only.
__global__ void k_relaxedsync(int* buf, int n, unsigned long long* word) {
  pdl();
  __shared__ unsigned long long seen;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? buf[i] : 0;
  const int bad = __syncthreads_or(v == 12345);
  if (threadIdx.x == 0) {
    unsigned long long old, cur;
    asm volatile("atom.add.relaxed.gpu.global.u64 %0, [%1], %2;" : "=l"(old) : "l"(word), "l"((1ull << 32) | (unsigned)bad) : "memory");
    const unsigned long long target = (old >> 32) / gridDim.x * gridDim.x + gridDim.x;
    do {
      asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(cur) : "l"(word) : "memory");
    } while ((cur >> 32) < target);
    seen = cur;
  }
  __syncthreads();
  if (i < n) buf[i] = (v + 1 + (int)(seen & 1)) & 0xff;
}

struct Launch { void* fn; dim3 g, b; bool coop, pdl; std::vector<void*> args; };

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : nullptr;  // rows whose name holds it
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int* buf; CHECK(cudaMalloc(&buf, 1 << 24)); CHECK(cudaMemset(buf, 0, 1 << 24));
  unsigned* count; CHECK(cudaMalloc(&count, 256)); CHECK(cudaMemset(count, 0, 256));
  int* flag = (int*)(count + 32);
  unsigned* gen = count + 16;
  cudaStream_t s; CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("SMs %d\n", sms);
  int cluster = 0;  // blocks a cluster, 0: none
  auto launch = [&](void* fn, int blocks, int threads, bool coop, bool pdl, void** args) {
    cudaLaunchAttribute at[3]; int na = 0;
    if (cluster > 0) { at[na].id = cudaLaunchAttributeClusterDimension; at[na].val.clusterDim.x = cluster; at[na].val.clusterDim.y = 1; at[na].val.clusterDim.z = 1; ++na; }
    if (coop) { at[na].id = cudaLaunchAttributeCooperative; at[na].val.cooperative = 1; ++na; }
    if (pdl) { at[na].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[na].val.programmaticStreamSerializationAllowed = 1; ++na; }
    cudaLaunchConfig_t c = {}; c.gridDim = dim3(blocks); c.blockDim = dim3(threads); c.stream = s; c.attrs = at; c.numAttrs = na;
    CHECK(cudaLaunchKernelExC(&c, fn, args));
  };
  auto time = [&](const char* name, std::function<void()> one) {
    if (only != nullptr && std::strstr(name, only) == nullptr) return;
    for (int w = 0; w < 2; ++w) one();
    CHECK(cudaStreamSynchronize(s));
    cudaGraph_t g; cudaGraphExec_t e;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < 20 * 4; ++k) one();
    CHECK(cudaStreamEndCapture(s, &g)); CHECK(cudaGraphInstantiate(&e, g, 0));
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int w = 0; w < 3; ++w) CHECK(cudaGraphLaunch(e, s));
    float best = 1e9;
    for (int r = 0; r < 7; ++r) {
      cudaEventRecord(a, s);
      for (int k = 0; k < 50; ++k) CHECK(cudaGraphLaunch(e, s));
      cudaEventRecord(b, s); CHECK(cudaEventSynchronize(b));
      float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
    }
    printf("%-40s %7.2f us/step\n", name, best * 1000 / 50 / 20);
    cudaGraphExecDestroy(e); cudaGraphDestroy(g);
  };
  time("empty", [&] { launch((void*)k_empty, 1, 1, false, false, nullptr); });
  time("empty pdl", [&] { launch((void*)k_empty_pdl, 1, 1, false, true, nullptr); });
  for (int n : {32, 1024, 8192, 65536}) {
    int threads = 256, blocks = (n + threads - 1) / threads;
    void* args[] = {&buf, &n};
    char name[80]; snprintf(name, 80, "loadstore n=%d blocks=%d pdl", n, blocks);
    time(name, [&] { launch((void*)k_loadstore, blocks, threads, false, true, args); });
  }
  for (int depth : {1, 2, 4, 8}) {
    int n = 32; void* args[] = {&buf, &n, &depth};
    char name[80]; snprintf(name, 80, "chain depth %d one warp", depth);
    time(name, [&] { launch((void*)k_chain, 1, 32, false, true, args); });
  }
  for (int n : {8192, 65536}) for (int threads : {256, 1024}) {
    void* args[] = {&buf, &n};
    char name[80]; snprintf(name, 80, "oneblock n=%d threads=%d", n, threads);
    time(name, [&] { launch((void*)k_oneblock, 1, threads, false, true, args); });
  }
  for (int blocks : {2, 8, 32, 66, 132, 264}) for (int threads : {256, 1024}) {
    if (blocks * threads > 132 * 2048) continue;
    int n = blocks * threads; void* args[] = {&buf, &n};
    char name[80]; snprintf(name, 80, "gridsync %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_gridsync, blocks, threads, true, true, args); });
    void* args2[] = {&buf, &n, &count, &gen};
    snprintf(name, 80, "ownsync %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_ownsync, blocks, threads, true, true, args2); });
    void* args3[] = {&buf, &n, &count, &flag};
    snprintf(name, 80, "lastblock %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_lastblock, blocks, threads, false, true, args3); });
  }
  for (int blocks : {256, 512, 1024}) {
    int threads = 256, n = blocks * threads;
    void* args3[] = {&buf, &n, &count, &flag};
    char name[80]; snprintf(name, 80, "lastblock %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_lastblock, blocks, threads, false, true, args3); });
  }
  unsigned long long* slots; CHECK(cudaMalloc(&slots, 1024 * 8)); CHECK(cudaMemset(slots, 0, 1024 * 8));
  unsigned* epoch = count + 48;
  for (int blocks : {2, 8, 32, 66, 132, 264}) for (int threads : {256, 1024}) {
    if (blocks * threads > 132 * 1024) continue;
    int n = blocks * threads; void* args[] = {&buf, &n};
    char name[80]; snprintf(name, 80, "loadstore coop %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_loadstore, blocks, threads, true, true, args); });
    void* args2[] = {&buf, &n, &slots, &epoch};
    snprintf(name, 80, "slotpoll %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_slotpoll, blocks, threads, true, true, args2); });
    void* args3[] = {&buf, &n, &slots};
    void* args4[] = {&buf, &n, &slots, &blocks};
    snprintf(name, 80, "check+apply %d x %d (8 kernels)", blocks, threads);
    time(name, [&] {
      launch((void*)k_check, blocks, threads, false, true, args3);
      launch((void*)k_apply, blocks, threads, false, true, args4);
    });
  }
  unsigned long long* word; CHECK(cudaMalloc(&word, 8)); CHECK(cudaMemset(word, 0, 8));
  for (int blocks : {2, 8, 32, 132}) for (int threads : {256, 1024}) {
    int n = blocks * threads; void* args[] = {&buf, &n};
    char name[80]; snprintf(name, 80, "gridsync again %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_gridsync, blocks, threads, true, true, args); });
    void* args2[] = {&buf, &n, &word};
    CHECK(cudaMemset(word, 0, 8));  // counts in multiples of this grid from here
    snprintf(name, 80, "relaxedsync %d x %d", blocks, threads);
    time(name, [&] { launch((void*)k_relaxedsync, blocks, threads, true, true, args2); });
  }
  CHECK(cudaFuncSetAttribute((void*)k_clustersync, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int blocks : {2, 4, 8, 16}) for (int threads : {256, 512, 1024}) {
    int n = blocks * threads; void* args[] = {&buf, &n};
    cudaLaunchConfig_t c = {}; cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = blocks; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    c.gridDim = dim3(blocks); c.blockDim = dim3(threads); c.attrs = at; c.numAttrs = 1;
    int fit = 0;
    if (cudaOccupancyMaxActiveClusters(&fit, (void*)k_clustersync, &c) != cudaSuccess || fit < 1) {
      cudaGetLastError(); printf("cluster %d x %d: does not fit\n", blocks, threads); continue;
    }
    char name[80]; snprintf(name, 80, "cluster %d x %d (fit %d)", blocks, threads, fit);
    cluster = blocks;
    time(name, [&] { launch((void*)k_clustersync, blocks, threads, false, true, args); });
    cluster = 0;
  }
  return 0;
}
