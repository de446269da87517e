// The CPU driver (mtp_cpu.h, the code the CPU op runs) over tensors that have
// an inaccessible page on each side, for tests/guarded.py: any read or write
// outside a tensor, however small, faults, where in a Paddle tensor it would
// land silently in the allocator's memory. Built with the op's flags and the
// undefined-behaviour sanitizer.
//
// A server: it reads calls on stdin and answers each on stdout, so a test
// pays for one process, not one a call. Each call runs twice, once with every
// tensor's last byte against the page after it and once with its first byte
// against the page before it; both runs must leave the same bytes.
//
// Little-endian int64 fields ("s" a string: its length, then its bytes):
//   call:   op (1 preprocess, 2 update_attn_mask_offsets), the number of
//           attrs, then each (preprocess: num_model_step, truncate_first_token,
//           splitwise_prefill, kvcache_scheduler_v1; the shadow form's two:
//           num_model_step, is_splitwise_prefill), count, then each tensor
//           argument: s name, element bytes, rows, columns, bytes. The op
//           word carries the form above the op's two bits (mtp::op_of), and
//           the form's rules run (every form is instantiated here).
//   answer: code (0: applied), request, v[4], s field (refused: the words
//           before the first ':'), then each tensor's bytes after the call in
//           the call's order, then attn_mask_offsets' bytes (none if refused)
// A malformed call exits 2 with a line on stderr. `guarded_cpu past|before`
// checks the guard itself (poke, below).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include "mtp_cpu.h"

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "guarded_cpu: %s\n", why.c_str());
  std::exit(2);
}

int64_t read_i64() {
  int64_t v;
  if (std::fread(&v, sizeof v, 1, stdin) != 1) {
    if (std::feof(stdin)) std::exit(0);  // the test closed the pipe
    die("short read");
  }
  return v;
}

std::string read_bytes(int64_t n) {
  if (n < 0 || n > (int64_t{1} << 34)) die("bad length " + std::to_string(n));
  std::string s(static_cast<size_t>(n), '\0');
  if (n > 0 && std::fread(&s[0], 1, s.size(), stdin) != s.size()) die("short read");
  return s;
}

void write_i64(int64_t v) { std::fwrite(&v, sizeof v, 1, stdout); }
void write_bytes(const void* p, size_t n) {
  write_i64(static_cast<int64_t>(n));
  if (n > 0) std::fwrite(p, 1, n, stdout);
}

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// `n` bytes with an inaccessible page on each side; the bytes sit against
// the page after them (`at_end`) or the page before.
class GuardedBuffer {
 public:
  GuardedBuffer(const std::string& bytes, bool at_end) {
    const size_t n = bytes.size();
    span_ = (n + kPage - 1) / kPage * kPage;
    total_ = span_ + 2 * kPage;
    void* m = mmap(nullptr, total_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) die("mmap failed");
    base_ = static_cast<char*>(m);
    if (span_ > 0 && mprotect(base_ + kPage, span_, PROT_READ | PROT_WRITE) != 0)
      die("mprotect failed");
    data_ = base_ + kPage + (at_end ? span_ - n : 0);
    if (n > 0) std::memcpy(data_, bytes.data(), n);
    size_ = n;
  }
  ~GuardedBuffer() { munmap(base_, total_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* base_;
  char* data_;
  size_t span_, total_, size_;
};

struct Arg {
  std::string name;
  int64_t elem, rows, cols;
  std::string bytes;
};

// One run of a call: the arguments in guarded buffers, found by name.
class Run {
 public:
  Run(const std::vector<Arg>& args, bool at_end) : args_(args), used_(args.size(), false) {
    for (const Arg& a : args) buffers_.emplace_back(new GuardedBuffer(a.bytes, at_end));
  }

  template <typename T>
  T* ptr(const char* name) {
    const size_t k = find(name);
    if (args_[k].elem != static_cast<int64_t>(sizeof(T)))
      die(std::string(name) + ": element size " + std::to_string(args_[k].elem));
    used_[k] = true;
    return reinterpret_cast<T*>(buffers_[k]->data());
  }
  int64_t cols(const char* name) { return args_[find(name)].cols; }
  bool has(const char* name) const {
    for (const Arg& a : args_)
      if (a.name == name) return true;
    return false;
  }
  int64_t rows(const char* name) { return args_[find(name)].rows; }
  // An argument the op never reads: its memory is not handed over.
  void unread(const char* name) { used_[find(name)] = true; }

  // Every argument sent was one the driver takes.
  void all_used() const {
    for (size_t k = 0; k < args_.size(); ++k)
      if (!used_[k]) die("argument " + args_[k].name + " is not one the op takes");
  }

  std::string bytes_after(size_t k) const {
    return std::string(buffers_[k]->data(), buffers_[k]->size());
  }

 private:
  size_t find(const char* name) const {
    for (size_t k = 0; k < args_.size(); ++k)
      if (args_[k].name == name) return k;
    die(std::string("argument ") + name + " is missing");
  }

  const std::vector<Arg>& args_;
  std::vector<std::unique_ptr<GuardedBuffer>> buffers_;
  std::vector<bool> used_;
};

std::string field_of(int64_t code) {
  switch (code) {
#define MTP_FIELD_OF(name, value, words) \
  case value: {                          \
    const std::string w = words;         \
    return w.substr(0, w.find(':'));     \
  }
    MTP_CHECKS(MTP_FIELD_OF)
#undef MTP_FIELD_OF
    default:
      return "unknown check " + std::to_string(code);
  }
}

struct Outcome {
  mtp::BatchResult result;
  std::vector<std::string> after;
  std::string out;  // attn_mask_offsets, if applied
};

// Calls fn with form f as a compile-time constant (every form of forms.h).
template <typename Fn>
auto with_form(mtp::Form f, Fn fn) {
  switch (f) {
#define MTP_FORM_CASE(F) \
  case mtp::F:           \
    return fn(std::integral_constant<mtp::Form, mtp::F>{});
    MTP_FOR_EACH_FORM(MTP_FORM_CASE)
#undef MTP_FORM_CASE
  }
  die("unknown form " + std::to_string(static_cast<int>(f)));
  return fn(std::integral_constant<mtp::Form, mtp::Form::kRollback>{});
}

Outcome run_preprocess(const std::vector<Arg>& args, const mtp::PreprocessAttrs& a, bool at_end,
                       mtp::Form form) {
  Run r(args, at_end);
  const bool shadow = r.has("max_dec_len"), recompute = r.has("recompute_token_num");
  // The pr5245 form has no mask_rollback, and reads base_model_seq_lens_this_time;
  // the xpu form passes mask_rollback and recompute_token_num and never reads them.
  const bool xpu = form == mtp::Form::kXpu;
  const bool rollback = r.has("mask_rollback") && !xpu;
  if (xpu) {
    r.unread("mask_rollback");
    r.unread("recompute_token_num");
  }
  // The shadow form names the base model the target model.
  auto base = [&](const char* name) {
    return std::string(shadow ? "target_model_" : "base_model_") + name;
  };
  mtp::PreprocessTensors t;
  t.draft_tokens = r.ptr<int64_t>("draft_tokens");
  t.draft_cols = r.cols("draft_tokens");
  t.input_ids = r.ptr<int64_t>("input_ids");
  t.input_cols = r.cols("input_ids");
  t.stop_flags = r.ptr<bool>("stop_flags");
  t.seq_lens_this_time = r.ptr<int32_t>("seq_lens_this_time");
  t.seq_lens_encoder = r.ptr<int32_t>("seq_lens_encoder");
  t.seq_lens_decoder = r.ptr<int32_t>("seq_lens_decoder");
  t.step_idx = r.ptr<int64_t>("step_idx");
  bool* not_need_stop = r.ptr<bool>("not_need_stop");
  // The tensors the shadow form has not stay null.
  t.is_block_step = shadow ? nullptr : r.ptr<bool>("is_block_step");
  t.batch_drop = shadow ? nullptr : r.ptr<bool>("batch_drop");
  t.pre_ids = r.ptr<int64_t>("pre_ids");
  t.pre_cols = r.cols("pre_ids");
  t.mask_rollback = rollback ? r.ptr<int32_t>("mask_rollback") : nullptr;
  t.accept_tokens = r.ptr<int64_t>("accept_tokens");
  t.accept_cols = r.cols("accept_tokens");
  t.accept_num = r.ptr<int32_t>("accept_num");
  t.base_seq_lens_this_time = nullptr;
  if (recompute || (!shadow && !rollback)) {
    t.base_seq_lens_this_time = r.ptr<int32_t>("base_model_seq_lens_this_time");
  } else if (!shadow) {
    r.unread("base_model_seq_lens_this_time");
  }
  r.unread(base("seq_lens_encoder").c_str());
  t.base_seq_lens_decoder = r.ptr<int32_t>(base("seq_lens_decoder").c_str());
  t.base_step_idx = r.ptr<int64_t>(base("step_idx").c_str());
  t.base_stop_flags = r.ptr<bool>(base("stop_flags").c_str());
  t.base_is_block_step = shadow ? nullptr : r.ptr<bool>("base_model_is_block_step");
  t.base_draft_tokens = r.ptr<int64_t>(base("draft_tokens").c_str());
  t.base_draft_cols = r.cols(base("draft_tokens").c_str());
  t.recompute_token_num = recompute && !xpu ? r.ptr<int32_t>("recompute_token_num") : nullptr;
  t.max_dec_len = shadow ? r.ptr<int64_t>("max_dec_len") : nullptr;
  r.all_used();
  Outcome o;
  const int64_t bsz = r.rows("seq_lens_this_time");
  o.result = with_form(form, [&](auto f) {
    return mtp::preprocess_batch<mtp::preprocess_form(f())>(t, a, bsz);
  });
  if (o.result.code == mtp::kOk) *not_need_stop = o.result.any_running != 0;  // as the op does
  for (size_t k = 0; k < args.size(); ++k) o.after.push_back(r.bytes_after(k));
  return o;
}

Outcome run_mask(const std::vector<Arg>& args, bool at_end, mtp::Form form) {
  Run r(args, at_end);
  mtp::MaskTensors t;
  r.unread("ids_remove_padding");
  t.num_tokens = r.rows("ids_remove_padding");
  t.seq_lens_this_time = r.ptr<int32_t>("seq_lens_this_time");
  t.seq_lens_encoder = r.ptr<int32_t>("seq_lens_encoder");
  t.seq_lens_decoder = r.ptr<int32_t>("seq_lens_decoder");
  t.cu_seqlens_q = r.ptr<int32_t>("cu_seqlens_q");
  t.cu_entries = r.rows("cu_seqlens_q") * r.cols("cu_seqlens_q");
  t.mask_full = r.ptr<int32_t>("attn_mask_offsets_full");
  t.mask_full_cols = r.cols("attn_mask_offsets_full");
  // The shadow form's call has no cursor and no rollback (both stay null).
  const bool shadow = !r.has("attn_mask_offsets_decoder");
  t.mask_decoder = shadow ? nullptr : r.ptr<int32_t>("attn_mask_offsets_decoder");
  t.is_block_step = r.ptr<bool>("is_block_step");
  t.decode_states = r.ptr<int32_t>("decode_states");
  t.decode_states_cols = r.cols("decode_states");
  t.mask_rollback = shadow ? nullptr : r.ptr<int32_t>("mask_rollback");
  r.all_used();
  // The op's fresh output, filled with a value no rule writes, so that an
  // entry left unwritten shows.
  GuardedBuffer out(std::string(sizeof(int32_t) * 2 * static_cast<size_t>(t.num_tokens), '\x7b'),
                    at_end);
  t.out = reinterpret_cast<int32_t*>(out.data());
  Outcome o;
  const int64_t bsz = r.rows("seq_lens_this_time");
  o.result = with_form(form, [&](auto f) { return mtp::mask_batch<mtp::mask_form(f())>(t, bsz); });
  for (size_t k = 0; k < args.size(); ++k) o.after.push_back(r.bytes_after(k));
  if (o.result.code == mtp::kOk) o.out.assign(out.data(), out.size());
  return o;
}

bool same(const Outcome& x, const Outcome& y) {
  return std::memcmp(&x.result, &y.result, sizeof x.result) == 0 && x.after == y.after &&
         x.out == y.out;
}

}  // namespace

// `guarded_cpu past|before`: touches the byte just past (before) a guarded
// tensor's bytes in the placement that puts them against that page, and must
// fault there; tests/test_guarded.py sees that the guard holds.
int poke(const char* where) {
  const bool past = std::strcmp(where, "past") == 0;
  if (!past && std::strcmp(where, "before") != 0) die(std::string("unknown poke ") + where);
  GuardedBuffer b(std::string(12, '\0'), past);
  volatile char* p = b.data() + (past ? b.size() : -1);
  *p = 1;
  return 0;  // not reached while the guard holds
}

int main(int argc, char** argv) {
  if (argc == 2) return poke(argv[1]);
  for (;;) {
    // The op and its form, as a batch result's origin holds them (op_of).
    const int64_t word = read_i64();
    const int64_t op = mtp::origin_op(word);
    const mtp::Form form = mtp::origin_form(word);
    if ((op != mtp::kPreprocessOp && op != mtp::kMaskOp) || word < 0 || word > 0xff)
      die("unknown op " + std::to_string(word));
    if (static_cast<int>(form) >= mtp::kForms) die("unknown form in " + std::to_string(word));
    mtp::PreprocessAttrs attrs{};
    const int64_t n_attrs = read_i64();
    if (n_attrs != (op == mtp::kPreprocessOp ? 4 : 0) && !(op == mtp::kPreprocessOp && n_attrs == 2))
      die("bad attribute count " + std::to_string(n_attrs));
    if (n_attrs == 4) {
      attrs.num_model_step = static_cast<int32_t>(read_i64());
      attrs.truncate_first_token = read_i64() != 0;
      attrs.splitwise_prefill = read_i64() != 0;
      attrs.kvcache_scheduler_v1 = read_i64() != 0;
    } else if (n_attrs == 2) {  // the shadow form's, as its binding passes them
      attrs.num_model_step = static_cast<int32_t>(read_i64());
      attrs.truncate_first_token = true;
      attrs.splitwise_prefill = read_i64() != 0;
      attrs.kvcache_scheduler_v1 = false;
    }
    const int64_t count = read_i64();
    if (count < 0 || count > 32) die("bad argument count");
    std::vector<Arg> args(static_cast<size_t>(count));
    for (Arg& a : args) {
      a.name = read_bytes(read_i64());
      a.elem = read_i64();
      a.rows = read_i64();
      a.cols = read_i64();
      a.bytes = read_bytes(read_i64());
      if (a.elem <= 0 || a.rows < 0 || a.cols < 0 ||
          static_cast<int64_t>(a.bytes.size()) != a.elem * a.rows * a.cols)
        die(a.name + ": its shape and bytes disagree");
    }
    Outcome o[2];
    for (int at_end = 0; at_end < 2; ++at_end) {
      o[at_end] = op == mtp::kPreprocessOp ? run_preprocess(args, attrs, at_end != 0, form)
                                           : run_mask(args, at_end != 0, form);
    }
    if (!same(o[0], o[1])) die("the two runs (tensors against the page before, after) differ");
    const mtp::BatchResult& r = o[0].result;
    write_i64(r.code);
    write_i64(r.request);
    for (int64_t v : r.v) write_i64(v);
    const std::string field = r.code == mtp::kOk ? "" : field_of(r.code);
    write_bytes(field.data(), field.size());
    for (const std::string& b : o[0].after) write_bytes(b.data(), b.size());
    write_bytes(o[0].out.data(), o[0].out.size());
    std::fflush(stdout);
  }
}
