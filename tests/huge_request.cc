// One update_attn_mask_offsets request of 2^30 + 3 tokens through the CPU
// driver (mtp_cpu.h, the code the CPU op runs), for tests/test_huge_requests.py.
//
// Past 2^30 tokens a token's entry 2 * j + 1 no longer fits int32. The
// output (8 GiB) and, per branch, attn_mask_offsets_full's row or
// decode_states' row (4 GiB each) are virtual: a 64 MiB memory file each,
// mapped again and again, with an inaccessible page before and after each, so the
// run needs little memory and a write outside a tensor faults.
//
//   huge_request prompt|vision|decode
// prints: code q n out[1] out[2n-2] out[2n-1] cursor decode_states[n-1]
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mtp_cpu.h"

namespace {

constexpr size_t kChunk = size_t{64} << 20;
constexpr size_t kGuard = 4096;

// `bytes` (a multiple of kChunk) of address space over a kChunk-sized memory
// file of its own, with an inaccessible page on each side.
template <typename T>
T* aliased(size_t bytes) {
  const int fd = memfd_create("huge_request", 0);
  if (fd < 0 || ftruncate(fd, kChunk) != 0) std::abort();
  char* base = static_cast<char*>(mmap(nullptr, bytes + 2 * kGuard, PROT_NONE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (base == MAP_FAILED) std::abort();
  for (size_t at = 0; at < bytes; at += kChunk) {
    if (mmap(base + kGuard + at, kChunk, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd, 0) == MAP_FAILED)
      std::abort();
  }
  return reinterpret_cast<T*>(base + kGuard);
}

size_t chunks(size_t bytes) { return (bytes + kChunk - 1) / kChunk * kChunk; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const bool prompt = std::strcmp(argv[1], "prompt") == 0;
  const bool vision = std::strcmp(argv[1], "vision") == 0;
  const bool decode = std::strcmp(argv[1], "decode") == 0;
  if (!prompt && !vision && !decode) return 2;
  const int32_t n = (int32_t{1} << 30) + 3;
  const int32_t decoder = 7;  // seq_lens_decoder: a vision request's S; > 0 for a decode

  int32_t this_time[1] = {n};
  int32_t encoder[1] = {decode ? 0 : 5};
  int32_t decoder_len[1] = {prompt ? 0 : decoder};
  int32_t cu[2] = {0, n};
  int32_t cursor[1] = {100};
  bool block[1] = {false};
  int32_t rollback[1] = {3};
  int32_t small_row[1] = {0};

  mtp::MaskTensors t{};
  t.num_tokens = n;
  t.seq_lens_this_time = this_time;
  t.seq_lens_encoder = encoder;
  t.seq_lens_decoder = decoder_len;
  t.cu_seqlens_q = cu;
  t.cu_entries = 2;
  t.mask_decoder = cursor;
  t.is_block_step = block;
  t.mask_rollback = rollback;
  t.out = aliased<int32_t>(chunks(sizeof(int32_t) * 2 * size_t(n)));
  if (prompt) {
    int32_t* full = aliased<int32_t>(chunks(sizeof(int32_t) * size_t(n)));
    full[n - 1] = 41;  // every other offset reads 0 (the zeroed memory file) or 41
    t.mask_full = full;
    t.mask_full_cols = n;
  } else {
    t.mask_full = small_row;
    t.mask_full_cols = 1;
  }
  if (decode) {
    int32_t* states = aliased<int32_t>(chunks(sizeof(int32_t) * size_t(n)));
    t.decode_states = states;
    t.decode_states_cols = n;
  } else {
    static int32_t state[1];
    state[0] = vision ? 2 : 0;
    t.decode_states = state;
    t.decode_states_cols = 1;
  }

  const mtp::BatchResult r = mtp::mask_batch<mtp::Form::kRollback>(t, 1);
  const int64_t last = 2 * int64_t{n} - 1;
  std::printf("%lld %d %d %d %d %d %d %d\n", static_cast<long long>(r.code), cu[0], n, t.out[1],
              t.out[last - 1], t.out[last], cursor[0], t.decode_states[t.decode_states_cols - 1]);
  return 0;
}
