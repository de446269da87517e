// The graph probe: captured steps with the CUDA kernels alone, no Paddle.
//
// A dev tool, not a test and not in CI (CI only compiles it). It times, on
// the GPU machine, one CUDA graph of 20 steps (draft_model_preprocess,
// asynchronous, then three update_attn_mask_offsets calls) against a graph of
// as many empty kernels, for the launchers of custom_ops/mtp_kernels.cu under
// several LaunchShapes, each op alone (the other's kernels replaced by empty
// ones), the ops' launches with kernels that only agree ("agreement",
// custom_ops/bench/agreement_floor.cu: what the launch shapes cost before any
// request is read), the ops' kernels with the agreement across blocks taken
// out ("free", unsafe: what a step would cost if agreeing were free), and,
// built with -DPROBE_BASELINE, another revision's kernels (the "baseline").
// Before timing, it checks that every variant (but those floors) and the
// baseline leave every tensor byte-identical after the same steps, eager and
// replayed.
//
//   bash benchmarks/graph_probe.sh [REV]             (here: states, baseline REV, build)
//   build/probe/probe build/probe/states [BSZ ...] [--quick] [--only NAME[,NAME...]]
//
// The states are the graph table's (benchmarks/graph_probe.py).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "mtp_kernels.h"

#include "bench/agreement_floor.h"

#ifdef PROBE_BASELINE
#define mtp mtp_old
#include "old/mtp_kernels.h"
#undef mtp
#endif

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

constexpr int kSteps = 20, kMaskCalls = 3;
int replays = 50, rounds = 7;  // --quick: 2 and 1 (under compute-sanitizer)

// One op's arrays on the device, by name.
struct Array {
  void* dev = nullptr;
  size_t bytes = 0;
  int64_t rows = 0, cols = 0;
};
using Arrays = std::map<std::string, Array>;

size_t dtype_size(const std::string& d) {
  if (d == "int64") return 8;
  if (d == "int32") return 4;
  if (d == "bool") return 1;
  std::fprintf(stderr, "unknown dtype %s\n", d.c_str());
  std::exit(1);
}

Arrays load(const std::string& path) {
  std::ifstream manifest(path + ".txt");
  std::ifstream data(path + ".bin", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(data)), {});
  if (!manifest || bytes.empty()) {
    std::fprintf(stderr, "cannot read %s.{txt,bin}\n", path.c_str());
    std::exit(1);
  }
  Arrays out;
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string name, dtype;
    int64_t rows, cols;
    size_t offset;
    in >> name >> dtype >> rows >> cols >> offset;
    Array a;
    a.rows = rows;
    a.cols = cols;
    a.bytes = rows * cols * dtype_size(dtype);
    CHECK(cudaMalloc(&a.dev, a.bytes ? a.bytes : 1));
    CHECK(cudaMemcpy(a.dev, bytes.data() + offset, a.bytes, cudaMemcpyHostToDevice));
    out[name] = a;
  }
  return out;
}

Arrays clone(const Arrays& src) {
  Arrays out;
  for (const auto& [name, a] : src) {
    Array b = a;
    CHECK(cudaMalloc(&b.dev, a.bytes ? a.bytes : 1));
    CHECK(cudaMemcpy(b.dev, a.dev, a.bytes, cudaMemcpyDeviceToDevice));
    out[name] = b;
  }
  return out;
}

std::vector<char> host(const Array& a) {
  std::vector<char> h(a.bytes);
  CHECK(cudaMemcpy(h.data(), a.dev, a.bytes, cudaMemcpyDeviceToHost));
  return h;
}

template <typename T>
T* p(const Arrays& s, const char* name) {
  return static_cast<T*>(s.at(name).dev);
}

// The same field names in both revisions' structs.
template <typename Tensors>
Tensors preprocess_tensors(const Arrays& s) {
  Tensors t{};  // fields a revision has and this list does not stay null
  t.draft_tokens = p<int64_t>(s, "draft_tokens");
  t.draft_cols = s.at("draft_tokens").cols;
  t.input_ids = p<int64_t>(s, "input_ids");
  t.input_cols = s.at("input_ids").cols;
  t.stop_flags = p<bool>(s, "stop_flags");
  t.seq_lens_this_time = p<int32_t>(s, "seq_lens_this_time");
  t.seq_lens_encoder = p<int32_t>(s, "seq_lens_encoder");
  t.seq_lens_decoder = p<int32_t>(s, "seq_lens_decoder");
  t.step_idx = p<int64_t>(s, "step_idx");
  t.is_block_step = p<bool>(s, "is_block_step");
  t.batch_drop = p<bool>(s, "batch_drop");
  t.pre_ids = p<int64_t>(s, "pre_ids");
  t.pre_cols = s.at("pre_ids").cols;
  t.mask_rollback = p<int32_t>(s, "mask_rollback");
  t.accept_tokens = p<int64_t>(s, "accept_tokens");
  t.accept_cols = s.at("accept_tokens").cols;
  t.accept_num = p<int32_t>(s, "accept_num");
  t.base_seq_lens_decoder = p<int32_t>(s, "base_model_seq_lens_decoder");
  t.base_step_idx = p<int64_t>(s, "base_model_step_idx");
  t.base_stop_flags = p<bool>(s, "base_model_stop_flags");
  t.base_is_block_step = p<bool>(s, "base_model_is_block_step");
  t.base_draft_tokens = p<int64_t>(s, "base_model_draft_tokens");
  t.base_draft_cols = s.at("base_model_draft_tokens").cols;
  return t;
}

template <typename Tensors>
Tensors mask_tensors(const Arrays& s) {
  Tensors t;
  t.num_tokens = s.at("ids_remove_padding").rows;
  t.seq_lens_this_time = p<int32_t>(s, "seq_lens_this_time");
  t.seq_lens_encoder = p<int32_t>(s, "seq_lens_encoder");
  t.seq_lens_decoder = p<int32_t>(s, "seq_lens_decoder");
  t.cu_seqlens_q = p<int32_t>(s, "cu_seqlens_q");
  t.mask_full = p<int32_t>(s, "attn_mask_offsets_full");
  t.mask_full_cols = s.at("attn_mask_offsets_full").cols;
  t.mask_decoder = p<int32_t>(s, "attn_mask_offsets_decoder");
  t.is_block_step = p<bool>(s, "is_block_step");
  t.decode_states = p<int32_t>(s, "decode_states");
  t.decode_states_cols = s.at("decode_states").cols;
  t.mask_rollback = p<int32_t>(s, "mask_rollback");
  t.out = p<int32_t>(s, "out");
  return t;
}

// A step's state: both ops' arrays (the mask op's fresh output among them).
struct State {
  Arrays pre, mask;
  int64_t bsz = 0;
};

State load_state(const std::string& dir, int64_t bsz) {
  State s;
  s.bsz = bsz;
  s.pre = load(dir + "/b" + std::to_string(bsz) + "_pre");
  s.mask = load(dir + "/b" + std::to_string(bsz) + "_mask");
  Array out;
  out.rows = 2 * s.mask.at("ids_remove_padding").rows;
  out.cols = 1;
  out.bytes = out.rows * 4;
  CHECK(cudaMalloc(&out.dev, out.bytes ? out.bytes : 1));
  CHECK(cudaMemset(out.dev, 0x7f, out.bytes));  // the op must write every entry
  s.mask["out"] = out;
  return s;
}

State clone_state(const State& s) { return State{clone(s.pre), clone(s.mask), s.bsz}; }

const mtp::PreprocessAttrs kAttrs{3, false, false, true};

// A way of running one step: the revision and the launch shape.
struct Variant {
  std::string name;
  bool baseline = false;
  bool empty = false;
  mtp::LaunchShape shape;
  bool pre = true, mask = true;  // false: an empty kernel in its place
  bool agreement = false;        // both ops' launches, agreeing only (bench/agreement_floor.cu)
  bool empty_overlap = false;    // the empty kernels as programmatic dependent launches
  bool own_pre_shape = false;    // draft_model_preprocess launched with pre_shape
  bool free_agreement = false;   // the ops' kernels agreeing within blocks only (agreement_floor.cu)
  mtp::LaunchShape pre_shape;
};

// Per-variant device buffers: the error record (pending) and the grid scratch.
struct Record {
  mtp::BatchResult* pending = nullptr;
  mtp::GridScratch grid{nullptr, nullptr};
  unsigned* sink = nullptr;  // the agreement kernels' verdicts
  void* baseline_grid[8] = {};  // the baseline's GridScratch, whatever its fields
};

Record make_record() {
  Record r;
  CHECK(cudaMalloc(&r.pending, sizeof(mtp::BatchResult)));
  CHECK(cudaMemset(r.pending, 0, sizeof(mtp::BatchResult)));
  CHECK(cudaMalloc(&r.grid.slots, mtp::kGridSlots * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&r.grid.finished, sizeof(unsigned)));
  CHECK(cudaMemset(r.grid.finished, 0, sizeof(unsigned)));
  CHECK(cudaMalloc(&r.sink, sizeof(unsigned)));
  // Every revision's GridScratch is a few device pointers to per-block slots
  // or counters: each gets a zeroed buffer big enough for any of them.
  for (void*& p : r.baseline_grid) {
    CHECK(cudaMalloc(&p, 1024 * sizeof(long long)));
    CHECK(cudaMemset(p, 0, 1024 * sizeof(long long)));
  }
  return r;
}

__global__ void empty_kernel() {}
__global__ void empty_overlapping_kernel() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

void launch_empty(bool overlap, cudaStream_t stream) {
  if (!overlap) {
    empty_kernel<<<1, 1, 0, stream>>>();
    CHECK(cudaGetLastError());
    return;
  }
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(1);
  c.blockDim = dim3(1);
  c.stream = stream;
  c.attrs = &attr;
  c.numAttrs = 1;
  CHECK(cudaLaunchKernelEx(&c, empty_overlapping_kernel));
}

void step(const Variant& v, const State& s, const Record& r, bool* not_need_stop,
          cudaStream_t stream) {
  if (v.empty) {
    for (int k = 0; k < 1 + kMaskCalls; ++k) launch_empty(v.empty_overlap, stream);
    return;
  }
#ifdef PROBE_BASELINE
  if (v.baseline) {
    const auto t = preprocess_tensors<mtp_old::PreprocessTensors>(s.pre);
    const mtp_old::PreprocessAttrs a{kAttrs.num_model_step, kAttrs.truncate_first_token,
                                     kAttrs.splitwise_prefill, kAttrs.kvcache_scheduler_v1};
    const mtp_old::Reporting out{reinterpret_cast<mtp_old::BatchResult*>(r.pending), nullptr};
    static_assert(sizeof(mtp_old::GridScratch) <= sizeof r.baseline_grid, "more fields");
    mtp_old::GridScratch g;
    std::memcpy(&g, r.baseline_grid, sizeof g);
    CHECK(mtp_old::launch_preprocess(t, a, s.bsz, not_need_stop, out, g, stream));
    const auto m = mask_tensors<mtp_old::MaskTensors>(s.mask);
    for (int k = 0; k < kMaskCalls; ++k)
      CHECK(mtp_old::launch_mask(m, s.bsz, out, g, stream));
    return;
  }
#endif
  if (v.agreement) {
    CHECK(mtp::launch_preprocess_agreement(s.bsz, r.sink, r.grid, stream, v.shape));
    const int64_t num_tokens = s.mask.at("ids_remove_padding").rows;
    const int64_t cols = s.mask.at("attn_mask_offsets_full").cols;
    for (int k = 0; k < kMaskCalls; ++k)
      CHECK(mtp::launch_mask_agreement(num_tokens, cols, s.bsz, r.sink, r.grid, stream, v.shape));
    return;
  }
  const auto t = preprocess_tensors<mtp::PreprocessTensors>(s.pre);
  const mtp::Reporting out{r.pending, nullptr};
  if (v.pre && v.free_agreement) {
    CHECK(mtp::launch_preprocess_free(t, kAttrs, s.bsz, not_need_stop, out, r.grid, stream,
                                      v.shape));
  } else if (v.pre) {
    CHECK(mtp::launch_preprocess<mtp::Form::kRollback>(t, kAttrs, s.bsz, not_need_stop, out, r.grid, stream,
                                 v.own_pre_shape ? v.pre_shape : v.shape));
  } else {
    launch_empty(false, stream);
  }
  const auto m = mask_tensors<mtp::MaskTensors>(s.mask);
  for (int k = 0; k < kMaskCalls; ++k) {
    if (v.mask && v.free_agreement) {
      CHECK(mtp::launch_mask_free(m, s.bsz, out, r.grid, stream, v.shape));
    } else if (v.mask) {
      CHECK(mtp::launch_mask<mtp::Form::kRollback>(m, s.bsz, out, r.grid, stream, v.shape));
    } else {
      launch_empty(false, stream);
    }
  }
}

cudaGraphExec_t capture(const Variant& v, const State& s, const Record& r, bool* nns,
                        cudaStream_t stream, int steps) {
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < steps; ++k) step(v, s, r, nns, stream);
  CHECK(cudaStreamEndCapture(stream, &g));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphDestroy(g));
  return exec;
}

bool same(const State& a, const State& b, const std::string& what) {
  bool ok = true;
  for (const Arrays* arrays : {&a.pre, &a.mask}) {
    const Arrays& other = arrays == &a.pre ? b.pre : b.mask;
    for (const auto& [name, x] : *arrays) {
      if (host(x) != host(other.at(name))) {
        std::printf("MISMATCH bsz %lld %s: %s\n", (long long)a.bsz, what.c_str(), name.c_str());
        ok = false;
      }
    }
  }
  return ok;
}

int64_t pending_code(const Record& r) {
  mtp::BatchResult h;
  CHECK(cudaMemcpy(&h, r.pending, sizeof h, cudaMemcpyDeviceToHost));
  return h.code;
}

// Every variant, eager and replayed, leaves the same bytes as the first.
bool agree(const std::vector<Variant>& variants, const State& base, cudaStream_t stream) {
  bool ok = true;
  std::vector<State> copies;
  for (size_t k = 0; k < variants.size(); ++k) copies.push_back(clone_state(base));
  bool* nns;
  CHECK(cudaMalloc(&nns, variants.size()));
  // Not the floors: "agreement" writes no request, and "free" may lose a
  // write (another block's zeroing of the output is ordered before it only by
  // the agreement that "free" leaves out; seen at 1024 requests).
  auto compared = [&](size_t k) {
    const Variant& v = variants[k];
    return !v.empty && !v.agreement && !v.free_agreement && v.pre && v.mask;
  };
  for (size_t k = 0; k < variants.size(); ++k) {
    if (!compared(k)) continue;
    const Record r = make_record();
    for (int n = 0; n < 2; ++n) step(variants[k], copies[k], r, nns + k, stream);
    cudaGraphExec_t g = capture(variants[k], copies[k], r, nns + k, stream, 2);
    for (int n = 0; n < 3; ++n) CHECK(cudaGraphLaunch(g, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaGraphExecDestroy(g));
    if (pending_code(r) != 0) {
      std::printf("FAILED bsz %lld %s: pending error %lld\n", (long long)base.bsz,
                  variants[k].name.c_str(), (long long)pending_code(r));
      ok = false;
    }
  }
  size_t ref = 0;
  while (ref < variants.size() && !compared(ref)) ++ref;
  std::vector<char> first_flag(1);
  CHECK(cudaMemcpy(first_flag.data(), nns + ref, 1, cudaMemcpyDeviceToHost));
  for (size_t k = ref + 1; k < variants.size(); ++k) {
    if (!compared(k)) continue;
    ok &= same(copies[ref], copies[k], variants[k].name + " vs " + variants[ref].name);
    char flag;
    CHECK(cudaMemcpy(&flag, nns + k, 1, cudaMemcpyDeviceToHost));
    if (flag != first_flag[0]) {
      std::printf("MISMATCH bsz %lld %s: not_need_stop\n", (long long)base.bsz,
                  variants[k].name.c_str());
      ok = false;
    }
  }
  return ok;
}

double replay_us(cudaGraphExec_t g, cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1) {
  CHECK(cudaEventRecord(e0, stream));
  for (int n = 0; n < replays; ++n) CHECK(cudaGraphLaunch(g, stream));
  CHECK(cudaEventRecord(e1, stream));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  return 1000.0 * ms / (replays * kSteps);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STATES_DIR [bsz ...] [--quick] [--only NAME[,NAME...]]\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<int64_t> sizes;
  bool quick = false;
  std::string only;
  for (int k = 2; k < argc; ++k) {
    if (std::strcmp(argv[k], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[k], "--only") == 0 && k + 1 < argc) {
      only = argv[++k];
    } else {
      sizes.push_back(std::atoll(argv[k]));
    }
  }
  if (quick) {
    replays = 2;
    rounds = 1;
  }
  if (sizes.empty()) sizes = {1, 64, 512, 1024, 4096, 8192};

  std::vector<Variant> variants;
  variants.push_back({"empty", false, true, {}});
#ifdef PROBE_BASELINE
  variants.push_back({"baseline", true, false, {}});
#endif
  {
    Variant v{"empty-overlap", false, true, {}};
    v.empty_overlap = true;
    variants.push_back(v);
  }
  variants.push_back({"default", false, false, {}});
  {
    Variant v{"pre-only", false, false, {}};
    v.mask = false;
    variants.push_back(v);
    v.name = "mask-only";
    v.mask = true;
    v.pre = false;
    variants.push_back(v);
    v.name = "agreement";
    v.pre = true;
    v.agreement = true;
    variants.push_back(v);
  }
  {
    // Unsafe, a floor: what the step would cost if blocks agreed for free.
    // Not compared with the others' bytes (see agree()).
    Variant v{"free", false, false, {}};
    v.free_agreement = true;
    variants.push_back(v);
    // The same with the batch spread as thin as the kernels allow (no agreement
    // to pay for): a warp a request (the mask op) or a warp of requests
    // (preprocess) a block, grids only.
    v.name = "free-spread";
    v.shape.one_block_max = 32;
    v.shape.grid_threads = 32;
    v.shape.mask_lanes = 32;
    v.shape.mask_max_warps = 1 << 20;
    v.shape.mask_cluster.blocks = 0;
    v.shape.preprocess_cluster.blocks = 0;
    v.shape.preprocess_one_block_max = 32;
    v.shape.preprocess_grid_threads = 32;
    variants.push_back(v);
  }
  auto shaped = [&](const char* name, auto change) {
    Variant v{name, false, false, {}};
    change(v.shape);
    variants.push_back(v);
  };
  shaped("mw1024", [](mtp::LaunchShape& s) { s.mask_max_warps = 1024; });
  shaped("mw512", [](mtp::LaunchShape& s) { s.mask_max_warps = 512; });
  shaped("mw256", [](mtp::LaunchShape& s) { s.mask_max_warps = 256; });
  shaped("grid512", [](mtp::LaunchShape& s) { s.grid_threads = 512; });
  shaped("grid1024", [](mtp::LaunchShape& s) { s.grid_threads = 1024; });
  shaped("lanes32", [](mtp::LaunchShape& s) { s.mask_lanes = 32; });
  shaped("lanes16", [](mtp::LaunchShape& s) { s.mask_lanes = 16; });
  shaped("lanes8", [](mtp::LaunchShape& s) { s.mask_lanes = 8; });
  shaped("wide1024", [](mtp::LaunchShape& s) { s.mask_wide_max = 1024; });
  shaped("wide4096", [](mtp::LaunchShape& s) { s.mask_wide_max = 4096; });
  shaped("wide2048", [](mtp::LaunchShape& s) { s.mask_wide_max = 2048; });
  shaped("half1024", [](mtp::LaunchShape& s) { s.mask_half_max = 1024; });
  shaped("half4096", [](mtp::LaunchShape& s) { s.mask_half_max = 4096; });
  for (int threads : {64, 256, 512}) {
    Variant v{"pre-grid" + std::to_string(threads), false, false, {}};
    v.own_pre_shape = true;
    v.pre_shape.preprocess_grid_threads = threads;
    variants.push_back(v);
  }
  {
    Variant v{"pre-oneblock512", false, false, {}};
    v.own_pre_shape = true;
    v.pre_shape.preprocess_one_block_max = 512;
    variants.push_back(v);
  }
  shaped("grid128", [](mtp::LaunchShape& s) { s.grid_threads = 128; });
  shaped("oneblock128", [](mtp::LaunchShape& s) { s.one_block_max = 128; });
  shaped("no-cluster", [](mtp::LaunchShape& s) { s.mask_cluster.blocks = 0; });
  shaped("cl-t256", [](mtp::LaunchShape& s) { s.mask_cluster.threads = 256; });
  // Clusters of 8 blocks and thinner blocks.
  shaped("cl8", [](mtp::LaunchShape& s) {
    s.mask_cluster = {512, 8, 512, 128};
    s.preprocess_cluster = {128, 8, 128, 32};
  });
  shaped("pre-min32", [](mtp::LaunchShape& s) { s.preprocess_cluster.min_threads = 32; });
  shaped("mask-min128", [](mtp::LaunchShape& s) { s.mask_cluster.min_threads = 128; });
  // Fatter 16-block clusters (all slower than the default where it counts:
  // cl-t768 gains up to 1.3 us a decode step at 576-768 requests but costs
  // 2.3-3.6 us a step with prompt chunks there; docs/performance.md). The
  // agreement-only step of cl-t1024 is the floor of a mask cluster past 512.
  shaped("cl-t1024", [](mtp::LaunchShape& s) { s.mask_cluster.threads = 1024; });
  shaped("cl-t768", [](mtp::LaunchShape& s) { s.mask_cluster.threads = 768; });
  {
    Variant v{"agreement-cl-t1024", false, false, {}};
    v.agreement = true;
    v.shape.mask_cluster.threads = 1024;
    variants.push_back(v);
  }
  // Fewer, fatter blocks in a small mask cluster (64 requests: 4 blocks of 512
  // or 2 of 1024 instead of 8 of 256), and their launches agreeing only.
  for (int threads : {512, 1024}) {
    Variant v{"mask-min" + std::to_string(threads), false, false, {}};
    v.shape.mask_cluster.threads = threads;
    v.shape.mask_cluster.min_threads = threads;
    variants.push_back(v);
    v.name = "agreement-mask-min" + std::to_string(threads);
    v.agreement = true;
    variants.push_back(v);
  }
  shaped("pre-clt512", [](mtp::LaunchShape& s) { s.preprocess_cluster.threads = 512; });
  for (int64_t block_max : {32, 64, 128}) {
    Variant v{"pre-block" + std::to_string(block_max), false, false, {}};
    v.own_pre_shape = true;
    v.pre_shape.preprocess_cluster.block_max = block_max;
    variants.push_back(v);
  }
  for (int threads : {64, 256}) {
    Variant v{"pre-clt" + std::to_string(threads), false, false, {}};
    v.own_pre_shape = true;
    v.pre_shape.preprocess_cluster.threads = threads;
    variants.push_back(v);
  }
  {
    Variant v{"pre-no-cluster", false, false, {}};
    v.own_pre_shape = true;
    v.pre_shape.preprocess_cluster.blocks = 0;
    variants.push_back(v);
  }

  if (!only.empty()) {
    std::vector<Variant> kept{variants[0]};
    const std::string names = "," + only + ",";
    for (const auto& v : variants)
      if (&v != &variants[0] && names.find("," + v.name + ",") != std::string::npos)
        kept.push_back(v);
    variants = kept;
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  bool all_ok = true;

  std::printf("per step (us): one graph of %d steps (preprocess async + %d mask calls), "
              "median of %d rounds of %d replays\n",
              kSteps, kMaskCalls, rounds, replays);
  std::printf("| bsz |");
  for (const auto& v : variants) std::printf(" %s |", v.name.c_str());
  std::printf("\n|---:|");
  for (size_t k = 0; k < variants.size(); ++k) std::printf("---:|");
  std::printf("\n");
  for (int64_t bsz : sizes) {
    const State base = load_state(dir, bsz);
    all_ok &= agree(variants, base, stream);
    bool* nns;
    CHECK(cudaMalloc(&nns, 1));
    std::vector<cudaGraphExec_t> graphs;
    std::vector<Record> records;
    for (const auto& v : variants) {
      records.push_back(make_record());
      step(v, base, records.back(), nns, stream);  // warm-up
      graphs.push_back(capture(v, base, records.back(), nns, stream, kSteps));
      CHECK(cudaGraphLaunch(graphs.back(), stream));
    }
    CHECK(cudaStreamSynchronize(stream));
    std::vector<std::vector<double>> times(variants.size());
    for (int round = 0; round < rounds; ++round)
      for (size_t k = 0; k < variants.size(); ++k)
        times[k].push_back(replay_us(graphs[k], stream, e0, e1));
    const double empty = median(times[0]);
    std::printf("| %lld |", (long long)bsz);
    for (size_t k = 0; k < variants.size(); ++k) {
      const double t = median(times[k]);
      if (k == 0) {
        std::printf(" %.2f |", t);
      } else {
        std::printf(" %.2f (%.1fx) |", t, t / empty);
      }
    }
    std::printf("\n");
    for (size_t k = 0; k < variants.size(); ++k) {
      if (!variants[k].empty && pending_code(records[k]) != 0) {
        std::printf("FAILED bsz %lld %s: pending error after the replays\n", (long long)bsz,
                    variants[k].name.c_str());
        all_ok = false;
      }
      CHECK(cudaGraphExecDestroy(graphs[k]));
    }
    std::fflush(stdout);
  }
  std::printf(all_ok ? "probe: every variant agreed\n" : "probe: DISAGREEMENT (see above)\n");
  return all_ok ? 0 : 1;
}
