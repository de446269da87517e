// The name a test harness prints for each scope a launch plan agrees over
// (launch_rules.h's mtp::Scope): tests/launch_rules.cc and tests/arch_probe.cu.
#pragma once

#include "launch_rules.h"

inline const char* scope_name(mtp::Scope s) {
  switch (s) {
    case mtp::Scope::kOneBlock: return "block";
    case mtp::Scope::kCluster: return "cluster";
    case mtp::Scope::kGrid: return "grid";
  }
  return "?";
}
