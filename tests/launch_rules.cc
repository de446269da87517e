// The launch plan (custom_ops/launch_rules.h) over devices described on the
// command line, for tests/test_launch_plan.py: the same functions the CUDA
// launcher calls, without a GPU.
//
// Each line of stdin is one question:
//   pre  BSZ SCRATCH CLUSTERS RESIDENT CLUSTER_BLOCKS
//   mask TOKENS COLS BSZ SCRATCH CLUSTERS RESIDENT CLUSTER_BLOCKS LANES
// SCRATCH: the stream has grid scratch (0/1); CLUSTERS: sm_90 or later (0/1);
// RESIDENT: blocks of a grid that fit at once (-1: no cooperative launch);
// CLUSTER_BLOCKS: the largest cluster that fits (0: none); LANES: the
// LaunchShape's mask_lanes (0: chosen). Each answer is one line:
//   SCOPE BLOCKS THREADS OVERLAP [LANES SHARE]
// with SCOPE one of block, cluster, grid (or "none" for a mask plan of lanes
// the kernels are not built for). A question after the word `asks` (`asks pre
// ...`, `asks mask ...`) also says what the plan asked the device, after the
// answer:
//   | fits SIZES... | resident CALLS
// the cluster sizes it asked cluster_fits about, in order, and how many times
// it asked for the resident blocks.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "launch_rules.h"
#include "scope_name.h"

namespace {

struct Described {
  bool has_clusters;
  int grid_resident;
  int cluster_blocks;
  // What a plan asked (a rule's work is its questions to the device).
  mutable std::vector<int> fits_asked;
  mutable int resident_asked = 0;
  bool clusters() const { return has_clusters; }
  int resident(mtp::KernelId, int) const {
    ++resident_asked;
    return grid_resident;
  }
  bool cluster_fits(mtp::KernelId, int blocks, int) const {
    fits_asked.push_back(blocks);
    return blocks <= cluster_blocks;
  }
};

void print_asked(const Described& d) {
  std::printf(" | fits");
  for (int b : d.fits_asked) std::printf(" %d", b);
  std::printf(" | resident %d", d.resident_asked);
}

void print(const mtp::Launch& l) {
  std::printf("%s %d %d %d", scope_name(l.scope), l.blocks, l.threads, l.overlap ? 1 : 0);
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string op;
    in >> op;
    const bool asks = op == "asks";
    if (asks) in >> op;
    if (op == "pre") {
      long long bsz;
      int scratch, clusters, resident, cluster_blocks;
      in >> bsz >> scratch >> clusters >> resident >> cluster_blocks;
      if (!in) return 2;
      const Described d{clusters != 0, resident, cluster_blocks};
      print(mtp::plan_preprocess_launch(d, bsz, scratch != 0, mtp::LaunchShape{}));
      if (asks) print_asked(d);
    } else if (op == "mask") {
      long long tokens, cols, bsz;
      int scratch, clusters, resident, cluster_blocks, lanes;
      in >> tokens >> cols >> bsz >> scratch >> clusters >> resident >> cluster_blocks >> lanes;
      if (!in) return 2;
      const Described d{clusters != 0, resident, cluster_blocks};
      mtp::LaunchShape shape;
      shape.mask_lanes = lanes;
      const mtp::MaskLaunch p = mtp::plan_mask_op(d, tokens, cols, bsz, scratch != 0, shape);
      if (p.kernel.lanes == 0) {
        std::printf("none");
      } else {
        print(p.launch);
        std::printf(" %d %d", p.kernel.lanes, p.kernel.share ? 1 : 0);
      }
      if (asks) print_asked(d);
    } else {
      return 2;
    }
    std::printf("\n");
  }
  return 0;
}
