"""Mutation testing: plant one realistic bug at a time and see the tests fail.

    python tests/mutate.py [--list] [--only NAME ...] [--device cpu|gpu] [--jobs N]
                           [--deselect NODEID ...]

Not collected by pytest and not run in CI (it rebuilds the op library for
every C++ mutation: about a minute each). Each mutation is applied to a scratch
copy of the repository (``git ls-files`` plus uncommitted changes), the op
library is built there (a C++ mutant gets its own build), and the test suite
runs with ``-x``; a mutation is *killed* when the suite fails (or hangs past
SUITE_TIMEOUT_S), *survived* when it passes. The unmutated copy runs first
and must pass; a mutant that does not build is reported as broken (a mutation
set must hold realistic bugs, not typos). ``--device gpu`` runs the
CUDA-driver mutations (GPU tests only) on a machine with paddlepaddle-gpu.
Each verdict says how the suite killed its mutant: a failing test, a crash
of the test process or a hang; the summary names the mutants no failing
test killed (``--deselect`` the crashing test to see whether one would).
Exits 1 if any mutation survived, 2 if one no longer applies (its original
text is not in the file exactly once) or does not build.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
H = "custom_ops/mtp_bookkeeping.h"
CPU = "custom_ops/mtp_cpu.h"
AGREE = "custom_ops/agreement.cuh"
PRE_KERNEL = "custom_ops/preprocess_kernel.cuh"
MASK_KERNEL = "custom_ops/mask_kernel.cuh"
CHK = "custom_ops/tensor_checks.h"
REF = "fastdeploy_mtp/reference.py"
SLOTS = "fastdeploy_mtp/slots.py"
PROP = "fastdeploy_mtp/proposer.py"
SIM = "fastdeploy_mtp/harness/simulate.py"
DEVICES = "fastdeploy_mtp/devices.py"
BENCH = "fastdeploy_mtp/bench/cpu.py"
ORACLE = "fastdeploy_mtp/harness/draft_check.py"
TINY = "fastdeploy_mtp/harness/tiny_model.py"
REG = "fastdeploy_mtp/registration.py"
OPS = "fastdeploy_mtp/_library.py"
BUILD = "fastdeploy_mtp/_build.py"
CAPTURED = "fastdeploy_mtp/captured.py"
RECORD = "custom_ops/gpu_record.h"
RULES = "custom_ops/launch_rules.h"
DISPATCH = "custom_ops/op_dispatch.h"
# The bindings' parameters, checks and views, rendered from fastdeploy_mtp/signature.py:
# a bug planted here is a bug of the C++ that runs (test_signature.py also sees
# that the file no longer is the table's).
BIND = "custom_ops/op_bindings.h"
# The signature table itself: a mutation there renders the bindings again in
# the mutant's copy (``signature --write``), so that no test can kill it by
# seeing a generated file that no longer matches its table; only a test of
# what the rendered C++ takes or refuses can.
SIGNATURE = "fastdeploy_mtp/signature.py"
RENDERED_FROM_TABLE = (SIGNATURE,)
MAIN = "fastdeploy_mtp/__main__.py"
SIM_CLI = "fastdeploy_mtp/harness/simulate_cli.py"
PLUGIN = "fastdeploy_mtp/plugin/__init__.py"
PLUGIN_DETECT = "fastdeploy_mtp/plugin/detect.py"
PLUGIN_REPLACE = "fastdeploy_mtp/plugin/replace.py"
PATCHES = "fastdeploy_mtp/plugin/patches/__init__.py"
CHUNK_PATCH = "fastdeploy_mtp/plugin/patches/chunk_next_token.py"
CHUNK_PATCH_V0 = "fastdeploy_mtp/plugin/patches/chunk_next_token_v0.py"
REAL_OPS = "fastdeploy_mtp/harness/real_fastdeploy_ops.py"
DOCTOR = "fastdeploy_mtp/doctor.py"
REPRO = "fastdeploy_mtp/harness/reproduce.py"
WITHOUT_FIX = "fastdeploy_mtp/harness/without_fix.py"
REF_FD = "fastdeploy_mtp/reference_fastdeploy.py"
PYPROJECT = "pyproject.toml"
SIMFD = "fastdeploy_mtp/harness/sim_fastdeploy.py"
SIM_MODELS = "fastdeploy_mtp/harness/sim_models.py"
VERDICT = "fastdeploy_mtp/harness/verdict.py"
TABLES = "fastdeploy_mtp/harness/tables.py"
TWIN = "fastdeploy_mtp/harness/replay_twin.py"
LAUNCH = "custom_ops/launch_plan.cuh"
# Python that runs on a GPU only (the loop replayed from CUDA graphs): its
# mutations are the GPU suite's to kill, as the CUDA sources' are.
GPU_ONLY_PYTHON = (CAPTURED,)


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    nth: int = -1         # which occurrence of `old` (-1: it must be the only one)
    device: str = "cpu"   # "gpu": only the GPU tests can see it; "gpu2": only on two GPUs


MUTATIONS = [
    # -- the shared rules (mtp_bookkeeping.h): CPU and GPU run these ------------
    Mutation("a token's end entry computed in int32", H,
             "MTP_HD int64_t end_entry(int32_t j) { return 2 * (int64_t)j + 1; }",
             "MTP_HD int64_t end_entry(int32_t j) { return 2 * j + 1; }"),
    Mutation("rollback sign", H, ": (int64_t)p.old_decoder - p.decoder);",
             ": (int64_t)p.decoder - p.old_decoder);"),
    Mutation("roll back k instead of k-1", H, "p.decoder = (int64_t)S - (a.num_model_step - 1);",
             "p.decoder = (int64_t)S - a.num_model_step;"),
    Mutation("step_idx not rolled back", H, "p.step_minus = (int64_t)a.num_model_step - 1;",
             "p.step_minus = 0;"),
    Mutation("re-sync ignores accept_num", H,
             "p.decoder = (int64_t)r.base_decoder - r.accept_num;",
             "p.decoder = (int64_t)r.base_decoder;"),
    Mutation("re-sync keeps the draft's step", H, "p.step_from = r.base_step_idx;",
             "p.step_from = r.step_idx;", nth=0),
    Mutation("truncate places at E", H, "p.first_token_col = truncate ? (int64_t)E - 1 : (int64_t)E;",
             "p.first_token_col = (int64_t)E;"),
    Mutation("prefill forgets pre_ids[0]", H, "p.write_pre_ids0 = true;",
             "p.write_pre_ids0 = false;", nth=1),
    Mutation("block step drops instead of parking", H, "p.is_block_step = true;  // parked",
             "p.batch_drop = true;  // parked"),
    Mutation("unpark while the base is still blocked", H,
             "if (a.kvcache_scheduler_v1 && !base_block && p.is_block_step)",
             "if (a.kvcache_scheduler_v1 && p.is_block_step)"),
    Mutation("accept_num bound off by one", H,
             "(acc > max_acc)), kDecodeAcceptNum)", "(acc > max_acc + 1)), kDecodeAcceptNum)"),
    Mutation("pre_ids window end off by one", H,
             "(p.pre_ids_end > t.pre_cols)),", "(p.pre_ids_end > t.pre_cols + 1)),"),
    Mutation("step_idx floor off by one", H, "? p.step_from < kInt64Min + p.step_minus",
             "? p.step_from <= kInt64Min + p.step_minus"),
    Mutation("step_idx floor unclamped", H, "p.step_minus >= 0 ? p.step_from < kInt64Min",
             "true ? p.step_from < kInt64Min"),
    Mutation("seq_lens_decoder floor unchecked", H, "(p.decoder < kInt32Min) | ", ""),
    Mutation("prefill keeps a parked flag", H,
             "    p.old_rollback = 0;\n    p.is_block_step = false;", "    p.old_rollback = 0;"),
    Mutation("prefill keeps the rollback residue", H,
             "  if (!p.recompute & !p.shadow & !p.merged) {\n    p.old_rollback = 0;",
             "  if (!p.recompute & !p.shadow & !p.merged) {"),
    # -- the recompute form ----------------------------------------------------------
    Mutation("recompute limit off by one", H,
             "r.base_this_time > 2 ? r.base_this_time - 2 : 0",
             "r.base_this_time > 1 ? r.base_this_time - 1 : 0"),
    Mutation("recompute re-sync adds nothing", H,
             "p.recomputed = r.merged_form || r.recompute < limit ? r.recompute : limit;",
             "p.recomputed = r.stop_flag ? 0 : (r.merged_form || r.recompute < limit ? r.recompute : limit);"),
    Mutation("recompute count set to k", H, "p.next_recompute = a.num_model_step - 1;",
             "p.next_recompute = a.num_model_step;"),
    Mutation("recompute prefill drops the rollback", H,
             "  if (!p.recompute & !p.shadow & !p.merged) {\n    p.old_rollback = 0;",
             "  if (!p.shadow & !p.merged) {\n    p.old_rollback = 0;"),
    Mutation("recompute count never written", H,
             "  if (p.write_recompute) t.recompute_token_num[i] = p.next_recompute;", ""),
    Mutation("recompute rollback check skipped", H,
             "if (p.recompute) return fail(kRecomputeRollbackOutOfRange, p.old_rollback, p.recomputed);",
             "if (p.recompute) return ok();"),
    # -- PR #5738 as merged (the pr5738 form) ---------------------------------------
    Mutation("pr5738 clamps its rollback as the recompute form does", H,
             "p.recomputed = r.merged_form || r.recompute < limit ? r.recompute : limit;",
             "p.recomputed = r.recompute < limit ? r.recompute : limit;"),
    Mutation("pr5738 re-syncs by accept_num", H,
             "p.decoder = (int64_t)r.base_decoder - r.base_this_time;",
             "p.decoder = (int64_t)r.base_decoder - r.accept_num;"),
    Mutation("pr5738 re-sync adds to mask_rollback", H,
             "    p.recomputed = 0;\n    p.write_recompute = false;\n",
             "    p.write_recompute = false;\n"),
    Mutation("a running decode's rollback past int32 worded as a re-sync's", H,
             "  if ((f & kDecodeDecoder) && p.rolled_back)", "  if (false)"),
    Mutation("pr5738 re-sync worded as the other forms' decoder check", H,
             "  if ((f & kDecodeDecoder) && p.merged_resync)", "  if (false)"),
    Mutation("pr5738 refuses a negative accept_num", H,
             "p.accepted = r.merged_form & (r.accept_num < 0) ? 0 : r.accept_num;",
             "p.accepted = r.accept_num;"),
    Mutation("pr5738 refuses a decode of negative seq_lens_encoder", H,
             "bit(decode & (p.encoder < 0) & !p.merged, kDecodeEncoder)",
             "bit(decode & (p.encoder < 0), kDecodeEncoder)"),
    # -- the int32 and int64 extremes of each sum and difference the rules compute ---
    Mutation("pr5738 rollback plus recomputed tokens past int32 let through", H,
             "bit(p.rollback_tensor & ((uint64_t)(r - kInt32Min)",
             "bit(p.rollback_tensor & !p.merged & ((uint64_t)(r - kInt32Min)"),
    Mutation("a decode's seq_lens_decoder past int32 max let through", H,
             "bit(decode & ((p.decoder < kInt32Min) | (p.decoder > kInt32Max)), kDecodeDecoder)",
             "bit(decode & (p.decoder < kInt32Min), kDecodeDecoder)"),
    Mutation("a step_idx stepping up past int64 let through", H,
             ": p.step_from > kInt64Max + p.step_minus),", ": false),"),
    Mutation("the rollback's change of seq_lens_decoder computed in int32", H,
             ": (int64_t)p.old_decoder - p.decoder);",
             ": p.old_decoder - (int32_t)p.decoder);"),
    Mutation("a decode's mask end computed in int32", H,
             "bit(decode & (cursor + p.n > kInt32Max), kDecodeEnd)",
             "bit(decode & ((int32_t)cursor + p.n > kInt32Max), kDecodeEnd)"),
    # -- PR #5245's op (the pr5245 form) and PR #6403's mask rule (the pr6403 form) ----
    Mutation("pr5245 runs as the other forms, not as FastDeploy's kernel", H,
             "  return f == Form::kPr5245 || f == Form::kPr5738;",
             "  return f == Form::kPr5738;"),
    Mutation("pr5245 prefill clears a parked flag", H,
             "  if (!p.recompute & !p.shadow & !p.merged) {",
             "  if (!p.recompute & !p.shadow) {"),
    Mutation("pr6403 mask op keeps 9018ccf74's decode_states rule", H,
             "  return f == Form::kShadow || f == Form::kPr6403 || f == Form::kCorrectedPr6403;",
             "  return f == Form::kShadow || f == Form::kCorrectedPr6403;"),
    Mutation("pr6403 reference keeps 9018ccf74's decode_states rule", REF,
             "                                 every_decode or attn_mask_offsets_decoder is None)",
             "                                 attn_mask_offsets_decoder is None)"),
    Mutation("xpu's mask_rollback taken as written (an alias its op takes refused)", BIND,
             'c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, '
             'Access::kUnread);',
             'c.vector(mask_rollback, "mask_rollback", paddle::DataType::INT32, bsz, '
             'Access::kWritten);'),
    Mutation("FastDeploy model's XPU op stops at 512 requests", REF_FD,
             '    rows = bsz if version == "xpu" else min(bsz, BLOCK_SIZE)',
             '    rows = min(bsz, BLOCK_SIZE)'),
    Mutation("FastDeploy model's pr5245 rolls back k", REF_FD,
             "        back = wrap32(k - 1)", "        back = wrap32(k)"),
    # -- the model of FastDeploy 9018ccf74's kernel the pr5738 form is held to -------
    Mutation("FastDeploy model clamps the rollback", REF_FD,
             '        r = int(v["recompute_token_num"][i])',
             '        r = min(int(v["recompute_token_num"][i]), max(base_n - 2, 0))'),
    Mutation("FastDeploy model re-syncs by accept_num", REF_FD,
             'wrap32(int(v["base_model_seq_lens_decoder"][i]) - base_n)',
             'wrap32(int(v["base_model_seq_lens_decoder"][i]) - int(v["accept_num"][i]))'),
    Mutation("FastDeploy model's stop touches mask_rollback", REF_FD,
             '    v["stop_flags"][i] = True\n    v["seq_lens_this_time"][i] = 0\n',
             '    v["stop_flags"][i] = True\n    v["mask_rollback"][i] = 0\n'
             '    v["seq_lens_this_time"][i] = 0\n'),
    # -- the FastDeploy plugin ----------------------------------------------------------
    Mutation("plugin chooses the first shipped form for any signature", PLUGIN,
             '        candidates, said = detected, f"{chosen_mode} mode"',
             '        candidates, said = ("pr5245",), f"{chosen_mode} mode"'),
    Mutation("plugin patches FastDeploy's ops module only", PLUGIN_REPLACE,
             "        for module in list(sys.modules.values()):",
             "        for module in [sys.modules[\"fastdeploy.model_executor.ops.gpu\"]]:"),
    Mutation("plugin takes an unknown signature for the recompute form", PLUGIN_DETECT,
             '        return None, f"{what}, as none of our forms does ({known})"',
             '        return ("recompute",), f"{what}, as none of our forms does ({known})"'),
    Mutation("plugin follows FASTDEPLOY_MTP_FORM to an op of another signature", PLUGIN,
             "                not matches(override, PREPROCESS, names, count):",
             "                False:"),
    Mutation("plugin lets an unforeseen failure out of register", PLUGIN,
             "        except Exception as e:  # whatever went wrong, FastDeploy runs on with its own ops",
             "        except ImportError as e:  # whatever went wrong, FastDeploy runs on with its own ops"),
    Mutation("plugin probe's answer inverted", PLUGIN_DETECT,
             "    matching = [form for form in candidates if probe.expect.get(form) == seen]",
             "    matching = [form for form in candidates if probe.expect.get(form) != seen]"),
    Mutation("plugin loads our library at register", PLUGIN,
             "    modules = replace_everywhere(deferred.replacements())",
             "    modules = replace_everywhere(deferred.replacements()) + 0 * bool(deferred._library("
             "deferred.preprocess, PREPROCESS))"),
    Mutation("plugin leaves FastDeploy's 20-tensor op unknown", PLUGIN_DETECT,
             'SHIPPED_FORMS = ("pr5245", "pr5738", "pr6403", "shadow")',
             'SHIPPED_FORMS = ("pr5738", "pr6403", "shadow")'),
    Mutation("plugin keeps our mask op where the probe cannot tell", PLUGIN_REPLACE,
             "                f\"{self.preprocess} form's {PREPROCESS}\"))\n            return None",
             "                f\"{self.preprocess} form's {PREPROCESS}\"))\n"
             "            return self.use(self.candidates[0])"),
    Mutation("plugin retries a library that failed to load", PLUGIN_REPLACE,
             "        if self.library_failed:\n            return None",
             "        if False:\n            return None"),
    Mutation("plugin's first calls choose without the lock", PLUGIN_REPLACE,
             "        with self.lock:", "        with threading.Lock():"),
    Mutation("plugin probes on the default place", PLUGIN_DETECT,
             "        return paddle.to_tensor(np.asarray(values, dtype), place=place)",
             "        return paddle.to_tensor(np.asarray(values, dtype))"),
    Mutation("plugin returns every output in dynamic mode", PLUGIN_REPLACE,
             "        return outs[0] if isinstance(outs, (list, tuple)) else outs",
             "        return outs"),
    # -- the corrected forms and the plugin's corrected mode ------------------------------
    Mutation("corrected_pr5738 rolls a running decode back instead of re-syncing it", H,
             "  return f == Form::kCorrectedPr5245 || f == Form::kCorrectedPr5738;\n}",
             "  return f == Form::kCorrectedPr5245;\n}"),
    Mutation("the corrected mask op numbers a decode from its cursor", H,
             "  return f == Form::kShadow || f == Form::kCorrectedPr5738 || "
             "f == Form::kCorrectedPr6403;",
             "  return f == Form::kShadow || f == Form::kCorrectedPr6403;"),
    Mutation("corrected_pr6403 keeps 9018ccf74's decode_states rule", H,
             "  return f == Form::kShadow || f == Form::kPr6403 || f == Form::kCorrectedPr6403;",
             "  return f == Form::kShadow || f == Form::kPr6403;"),
    Mutation("reference's corrected decode re-syncs only a stopped draft", REF,
             "            if stop[i] or resync_every_decode:",
             "            if stop[i]:"),
    Mutation("reference's corrected mask op keeps the cursor it was given", REF,
             "            if from_kv:\n                cursor[i], rollback[i] = dec[i], 0",
             "            if False:\n                cursor[i], rollback[i] = dec[i], 0"),
    Mutation("plugin's corrected mode puts FastDeploy's own forms in place", PLUGIN,
             "            use = CORRECTED_OF.get", "            use = (lambda form: form)"),
    Mutation("plugin's default mode is exact", PLUGIN,
             '    value = os.environ.get(MODE_VARIABLE, "") or "corrected"',
             '    value = os.environ.get(MODE_VARIABLE, "") or "exact"'),
    Mutation("plugin passes FastDeploy's int flag on to our op", PLUGIN_REPLACE,
             "        if isinstance(value, numbers.Integral) and not isinstance(value, bool):",
             "        if False:"),
    Mutation("plugin's code marker always says pr5738", PLUGIN_DETECT,
             "    form = present if found else absent", "    form = absent"),
    Mutation("a patch applied to code it was not written for", PATCHES,
             "    if digest not in patch.known:", "    if False:"),
    Mutation("a patch's digest counts the docstring", PATCHES,
             "        node.body = node.body[1:]  # its docstring is words, not code",
             "        pass"),
    Mutation("the chunk patch writes the next token one column late", CHUNK_PATCH,
             "        return end - start - 1, int(tokens[end])",
             "        return end - start, int(tokens[end])"),
    Mutation("the chunk patch notes the prompt's last chunk too", CHUNK_PATCH,
             "    if end - start >= 1 and end < len(tokens):",
             "    if end - start >= 1 and end <= len(tokens):"),
    Mutation("the v0 chunk patch notes a prompt's last chunk too", CHUNK_PATCH_V0,
             "    if i >= len(chunks) - 1:", "    if i >= len(chunks):"),
    Mutation("the v0 insert patch notes a decode node's request", CHUNK_PATCH_V0,
             '    if info is not None and info.get("role") == "decode":', "    if False:"),
    Mutation("the v0 insert patch notes without chunked prefill", CHUNK_PATCH_V0,
             "                if self.cache_config.enable_chunked_prefill:",
             "                if True:"),
    Mutation("the v0 insert patch keeps a note of its slot's earlier request", CHUNK_PATCH_V0,
             "                    pending.pop(int(request.idx), None)\n",
             "                    pass\n"),
    Mutation("the v0 insert patch notes a list's only chunk short of the prompt", CHUNK_PATCH_V0,
             "    if not chunks or len(chunks) < 2:", "    if not chunks:"),
    Mutation("a patch installed without the patch it needs", PATCHES,
             "        if not targets[0].needs_met():\n            lines.append",
             "        if False:\n            lines.append"),
    Mutation("a patch applied at its module's import without the patch it needs", PATCHES,
             "            if not patch.needs_met():\n                if not patch.other_applied():",
             "            if False:\n                if not patch.other_applied():"),
    Mutation("the v0 chunk patch writes at the batch id, not its slot", CHUNK_PATCH_V0,
             "            slot = index(task.idx) if index is not None else task.idx",
             "            slot = task.idx"),
    Mutation("check reports a fitting patch as not applying too", PATCHES,
             "                fits.add(name)\n                break\n",
             "                fits.add(name)\n"),
    Mutation("doctor reports patches in the exact mode too", DOCTOR,
             '        if chosen == "corrected":\n            out += _patches(',
             '        if True:\n            out += _patches('),
    Mutation("the v0 patches are never installed", PATCHES,
             "    return list(chunk_next_token.PATCHES) + list(chunk_next_token_v0.PATCHES)",
             "    return list(chunk_next_token.PATCHES)"),
    Mutation("mtp_step_paddle's model drops the holder of the fewest blocks", REAL_OPS,
             "        victim = int(np.argmax(held))", "        victim = int(np.argmin(held))"),
    Mutation("mtp_step_paddle's model hands out a block without taking it off the free list",
             REAL_OPS, "            free_len[0] -= 1\n", ""),
    Mutation("the judge leaves a chunk's own prefill unchecked", SIM,
             "        ahead = set(node.chunks) if sub > 0 else set()",
             "        ahead = set(node.chunks)"),
    Mutation("doctor takes FD_PLUGINS trimmed", DOCTOR,
             "    if ENTRY_POINT in names:",
             "    if ENTRY_POINT in [n.strip() for n in names]:"),
    # -- the plugin's detection: every signature shape --------------------------------
    Mutation("plugin takes an op of extra parameters for its form (names)", PLUGIN_DETECT,
             "                and len(names) == len(sig.inputs) + len(sig.attrs))",
             "                and len(names) >= len(sig.inputs) + len(sig.attrs))"),
    Mutation("plugin reads a preprocess of extra parameters as a known form", PLUGIN_DETECT,
             "for f in forms if len(names) == len(key) + attrs(f))",
             "for f in forms if len(names) >= len(key) + attrs(f))"),
    Mutation("plugin checks the mask op only where its names and count are both known",
             PLUGIN_DETECT,
             "if (mask_names is not None or mask_count is not None) and \\",
             "if (mask_names is not None and mask_count is not None) and \\"),
    Mutation("plugin matches a count of parameters by the tensors alone", PLUGIN_DETECT,
             "    return count == len(sig.inputs) + len(sig.attrs)",
             "    return count >= len(sig.inputs)"),
    Mutation("plugin's docstring parsing ignores <...>", PLUGIN_DETECT,
             '        if ch in "<[({":\n            depth += 1\n        elif ch in ">])}":',
             '        if ch in "[({":\n            depth += 1\n        elif ch in "])}":'),
    Mutation("plugin's docstring parsing ignores {...}", PLUGIN_DETECT,
             '        if ch in "<[({":\n            depth += 1\n        elif ch in ">])}":',
             '        if ch in "<[(":\n            depth += 1\n        elif ch in ">])":'),
    Mutation("plugin's replacement without its all-or-nothing rollback", PLUGIN_REPLACE,
             "    except BaseException:\n        for module, name, value in reversed(done):\n"
             "            setattr(module, name, value)\n        raise",
             "    except BaseException:\n        raise"),
    # -- the reproducer (python -m fastdeploy_mtp reproduce) -----------------------------
    Mutation("reproducer reads the invariant with the rollback's sign turned", REPRO,
             '        return (self.value("attn_mask_offsets_decoder") - self.value("mask_rollback")',
             '        return (self.value("attn_mask_offsets_decoder") + self.value("mask_rollback")'),
    Mutation("reproducer runs another form's preprocess rules", REPRO,
             "sim_fastdeploy.preprocess_call(r, r.recompute, r.max_dec_len, r.form)",
             "sim_fastdeploy.preprocess_call(r, r.recompute, r.max_dec_len, None)"),
    Mutation("reproducer runs pr5738's mask op for pr6403", REPRO,
             "    outs = forms.load(r.form).library.update_attn_mask_offsets(*inputs.values())",
             '    outs = forms.load("pr5738" if r.form == "pr6403" else r.form).library.'
             "update_attn_mask_offsets(*inputs.values())"),
    Mutation("reproducer's mask-end drift with its sign turned", REPRO,
             "        drift = got - want", "        drift = want - got"),
    Mutation("reproducer exits 0 on a drift", REPRO,
             "        print(line)\n    return 1", "        print(line)\n    return 0"),
    Mutation("reproducer's state one cursor position off", REPRO,
             "                attn_mask_offsets_decoder=n + k - 1, decode_states=([], 0)),",
             "                attn_mask_offsets_decoder=n + k, decode_states=([], 0)),"),
    Mutation("reproducer calls a drifting row exact", REPRO,
             '    "rollback": {"mixed": None, "pd": Case("insert", ALIGNMENT, ROLLBACK_ON_A_DECODE_NODE)},',
             '    "rollback": {"mixed": None, "pd": None},'),
    Mutation("reproducer takes any k", REPRO,
             "p.add_argument(\"-k\", type=int, choices=KS, default=2,",
             "p.add_argument(\"-k\", type=int, default=2,"),
    # -- the shadow form -------------------------------------------------------------
    Mutation("shadow length limit off by one", H, "(end >= r.max_dec_len)",
             "(end > r.max_dec_len)"),
    Mutation("shadow skips at the limit on a prefill node too", H,
             "const bool near_end = !a.splitwise_prefill &", "const bool near_end = true &"),
    Mutation("shadow limit's sum formed past int64", H,
             "r.base_step_idx > kInt64Max - k ? kInt64Max : r.base_step_idx + k;",
             "r.base_step_idx + k;"),
    Mutation("shadow skip keeps step_idx", H, "    plan_not_running(p);\n    p.step_from = 0;",
             "    plan_not_running(p);"),
    Mutation("shadow prefill keeps the draft's step", H,
             "p.step_from = r.base_step_idx;  // less 1", "p.step_from = r.step_idx + 1;"),
    Mutation("shadow prefill forgets pre_ids[0]", H, "p.write_pre_ids0 = true;",
             "p.write_pre_ids0 = false;", nth=0),
    Mutation("shadow prefill step unchecked", H, "bit((decode | p.shadow) &", "bit(decode &"),
    Mutation("shadow keeps the base drafts on a prefill node", H,
             "return shadow || !a.splitwise_prefill;", "return !a.splitwise_prefill;"),
    Mutation("shadow mask numbers from one past the KV positions", H,
             "    p.cursor = S;\n", "    p.cursor = S + 1;\n"),
    Mutation("cu_seqlens_q short form reads past it", H,
             "p.next = i + 1 < t.cu_entries ?", "p.next = i + 1 <= t.cu_entries ?"),
    Mutation("rollback range unchecked", H,
             "bit(p.rollback_tensor & ((uint64_t)(r - kInt32Min) > (uint64_t)(kInt32Max - kInt32Min)),",
             "bit(false,"),
    Mutation("base draft row clears column 0", H,
             "for (int64_t j = 1; j < t.base_draft_cols; ++j) row[j] = -1;",
             "for (int64_t j = 0; j < t.base_draft_cols; ++j) row[j] = -1;"),
    Mutation("accepted tokens past the kept four dropped", H,
             "for (int32_t j = kKeptTokens; j < p.accepted; ++j) {",
             "for (int32_t j = kKeptTokens; j < p.accepted - 1; ++j) {"),
    Mutation("kept tokens read from the next column", H,
             "k.v[j] = j < t.accept_cols ? t.accept_tokens[i * t.accept_cols + j] : 0;",
             "k.v[j] = j + 1 < t.accept_cols ? t.accept_tokens[i * t.accept_cols + j + 1] : 0;"),
    Mutation("kept tokens read past accept_tokens' columns", H,
             "k.v[j] = j < t.accept_cols ? t.accept_tokens[i * t.accept_cols + j] : 0;",
             "k.v[j] = t.accept_tokens[i * t.accept_cols + j];"),
    Mutation("not running keeps seq_lens_decoder", H, "  p.decoder = 0;\n  p.encoder = 0;",
             "  p.encoder = 0;"),
    Mutation("mask ignores the rollback", H,
             "return (int64_t)p.cursor - p.rollback; }",
             "return (int64_t)p.cursor; }"),
    Mutation("mask keeps the rollback", H, "  t.mask_rollback[i] = 0;\n", "\n"),
    Mutation("decode_states pattern off by one", H, "MTP_HD int32_t decode_state(int64_t j, int32_t n) { return j < n ? 0 : -1; }",
             "MTP_HD int32_t decode_state(int64_t j, int32_t n) { return j <= n ? 0 : -1; }"),
    Mutation("shadow decode_states keeps a 1", H, "return j < n && old != 1 ? 0 : -1;",
             "return j < n ? (old == 1 ? 1 : 0) : -1;"),
    Mutation("shadow and pr6403 decode_states only for decodes of several tokens", H,
             "if constexpr (form_rewrites_every_decode(F)) return p.branch == kDecode;",
             "if constexpr (form_rewrites_every_decode(F)) return p.branch == kDecode && p.n > 1;"),
    Mutation("decode_states of a one-token decode written", H,
             "  return p.branch == kDecode && p.n > 1;\n",
             "  return p.branch == kDecode;\n"),
    # -- the shadow form's binding: what its raw op refuses ----------------------
    Mutation("recompute limit subtracts before comparing", H,
             "const int32_t limit = r.base_this_time > 2 ? r.base_this_time - 2 : 0;",
             "const int32_t limit = r.base_this_time - 2 > 0 ? r.base_this_time - 2 : 0;"),
    Mutation("recompute base_model_seq_lens_this_time exempt from the overlap check", BIND,
             'c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", '
             'paddle::DataType::INT32, bsz, Access::kRead);',
             'c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", '
             'paddle::DataType::INT32, bsz, Access::kUnread);', nth=0),
    Mutation("pr5245 base_model_seq_lens_this_time exempt from the overlap check", BIND,
             'c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", '
             'paddle::DataType::INT32, bsz, Access::kRead);',
             'c.vector(base_model_seq_lens_this_time, "base_model_seq_lens_this_time", '
             'paddle::DataType::INT32, bsz, Access::kUnread);', nth=1),
    # The forms' checks stand in the table's order (rollback, recompute, pr5245,
    # xpu, shadow; pr5738 and pr6403 take recompute's): the fifth is the shadow
    # form's (test_mutate.py checks that each bindings mutation lands in the
    # form it names).
    Mutation("shadow raw op takes num_model_step 0", BIND,
             'MTP_CHECK(num_model_step >= 1, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);',
             'MTP_CHECK(num_model_step >= 0, "draft_model_preprocess", ": num_model_step must be >= 1, got ", num_model_step);',
             nth=4),
    # -- the signature table (the bindings rendered again from it) -------------------
    Mutation("the 22-tensor forms' table takes base_model_seq_lens_this_time as never read",
             SIGNATURE,
             'replace(t, access=R, doc="[N] base model; bounds the recomputed tokens",',
             'replace(t, access=U, doc="[N] base model; bounds the recomputed tokens",'),
    Mutation("the shadow form's table checks max_dec_len as flat", SIGNATURE,
             'TensorArg("max_dec_len", _i64, R, "[N] each request\'s length limit",\n',
             'TensorArg("max_dec_len", _i64, R, "[N] each request\'s length limit", FLAT,\n'),
    Mutation("the shadow form's table takes num_model_step 0", SIGNATURE,
             'AttrArg("num_model_step", int, "draft substeps per engine step, >= 1", minimum=1),',
             'AttrArg("num_model_step", int, "draft substeps per engine step, >= 1", minimum=0),',
             nth=1),
    Mutation("shadow target_model_draft_tokens checked as read-only", BIND,
             'c.matrix(target_model_draft_tokens, "target_model_draft_tokens", '
             'paddle::DataType::INT64, bsz, Access::kWritten);',
             'c.matrix(target_model_draft_tokens, "target_model_draft_tokens", '
             'paddle::DataType::INT64, bsz, Access::kRead);'),
    Mutation("prompt offsets without +1", H, "return offset + 1;", "return offset;"),
    Mutation("vision end off by one", H, "const int32_t v = p.decoder + p.n;",
             "const int32_t v = p.decoder + p.n - 1;"),
    Mutation("skip a prompt without KV", H, "block_step || (E <= 0 && S <= 0);",
             "block_step || (E <= 0 || S <= 0);"),
    Mutation("a negative-length request decodes", H, "block_step || (E <= 0 && S <= 0);",
             "block_step || (E == 0 && S == 0);"),
    Mutation("tokens bound off by one", H, "(int64_t)p.q + p.n > t.num_tokens)",
             "(int64_t)p.q + p.n > t.num_tokens + 1)"),
    Mutation("requests' tokens may overlap", H,
             "bit((int64_t)p.q + tokens_written(p) > p.next, kTokensBeforeNext)",
             "bit((int64_t)p.q + tokens_written(p) > p.next + 1, kTokensBeforeNext)"),
    Mutation("cu_seqlens_q unchecked at a skipped request", H,
             "bit((int64_t)p.q + tokens_written(p) > p.next, kTokensBeforeNext)",
             "bit(runs & ((int64_t)p.q + tokens_written(p) > p.next), kTokensBeforeNext)"),
    Mutation("a skipped request's tokens count", H,
             "return p.branch == kSkip ? 0 : p.n;", "return p.n;"),
    Mutation("negative cursor allowed", H, "(cursor < 0), kDecodeCursor",
             "(cursor < -1000000), kDecodeCursor"),
    Mutation("mask offsets range unchecked", H, "return v >= 0 && v != kInt32Max;",
             "return true;"),
    Mutation("mask offsets checked by their minimum only", H,
             "if (mask_offset_ok(lo) && mask_offset_ok(hi)) return ok();",
             "if (mask_offset_ok(lo)) return ok();"),
    # -- the CPU driver ----------------------------------------------------------
    Mutation("CPU check skips the last request", CPU, "for (int64_t i = 0; i < bsz; ++i) {",
             "for (int64_t i = 0; i + 1 < bsz; ++i) {", nth=0),
    Mutation("CPU apply skips the last request", CPU,
             "for (int64_t i = 0; i < bsz; ++i) any |= apply_plan",
             "for (int64_t i = 0; i + 1 < bsz; ++i) any |= apply_plan"),
    Mutation("CPU mask check skips the last request", CPU, "for (int64_t i = 0; i < bsz; ++i) {",
             "for (int64_t i = 0; i + 1 < bsz; ++i) {", nth=1),
    Mutation("CPU clears the base draft rows on a prefill node too", CPU,
             "if (clears_base_draft(F == Form::kShadow, a)) {", "if (true) {"),
    Mutation("CPU zeroes half the output", CPU, "sizeof(int32_t) * 2 * t.num_tokens",
             "sizeof(int32_t) * t.num_tokens"),
    Mutation("CPU zeroes one entry past the output", CPU, "sizeof(int32_t) * 2 * t.num_tokens",
             "sizeof(int32_t) * (2 * t.num_tokens + 1)"),
    Mutation("not_need_stop from the last request only", CPU, "any |= apply_plan",
             "any = apply_plan"),
    # -- the bindings' static checks ---------------------------------------------
    Mutation("row count off by one", CHK, "MTP_CHECK(shape[0] >= min_rows,",
             "MTP_CHECK(shape[0] + 1 >= min_rows,"),
    Mutation("overlap checked between written tensors only", CHK,
             "if (!(x.written || y.written) || x.cpu != y.cpu) continue;",
             "if (!(x.written && y.written) || x.cpu != y.cpu) continue;"),
    Mutation("None not refused", CHK, "MTP_CHECK(t.defined(),", "MTP_CHECK(true || t.defined(),"),
    Mutation("adjacent tensors taken as overlapping", CHK,
             "MTP_CHECK(x.end <= y.begin || y.end <= x.begin,",
             "MTP_CHECK(x.end < y.begin || y.end < x.begin,"),
    Mutation("a dtype of the same byte size taken", CHK, "MTP_CHECK(t.dtype() == dtype,",
             "MTP_CHECK(dtype_bytes(t.dtype()) == dtype_bytes(dtype),"),
    Mutation("a [N, 2] tensor taken for a per-request vector", CHK,
             "MTP_CHECK(s.size() == 1 || (s.size() == 2 && s[1] == 1),",
             "MTP_CHECK(s.size() == 1 || s.size() == 2,"),
    # Compiled for Paddle 2 only, and only the GPU machine has Paddle 2: there
    # the op would write the other tensors before Paddle refuses the empty one.
    Mutation("an empty in-place output let through on Paddle 2", CHK,
             "MTP_CHECK(n > 0 || access != Access::kWritten,",
             "MTP_CHECK(true || access != Access::kWritten,", device="gpu"),
    # -- the CUDA driver (GPU only) -----------------------------------------------
    Mutation("GPU reports a thread's last failure", PRE_KERNEL,
             "if (mine.bad == kNone && preprocess_failures(t, p) != 0) mine.bad = verdict_of(i);",
             "if (preprocess_failures(t, p) != 0) mine.bad = verdict_of(i);", device="gpu"),
    Mutation("GPU ignores the pending error", AGREE,
             "if (pending_code != kOk) mine.bad = kPendingError;", "", device="gpu"),
    Mutation("GPU agreement reads the first slots only", AGREE,
             "      for (unsigned k = lane + 32 * kSlotsAtOnce; k < gridDim.x; k += 32) g = combine(g, slot(k));\n",
             "", device="gpu"),
    Mutation("GPU not_need_stop from one block", AGREE,
             "return verdict_in(__ldcg(scratch.slots + k)); }",
             "return Verdict{verdict_in(__ldcg(scratch.slots + k)).bad, "
             "verdict_in(__ldcg(scratch.slots + blockIdx.x)).any}; }", device="gpu"),
    Mutation("GPU one-warp block skips the warp agreement", AGREE,
             "return blockDim.x == 32 ? warp_agree(v) : block_agree(v);",
             "return blockDim.x == 32 ? v : block_agree(v);", device="gpu"),
    Mutation("GPU grid verdict from one lane of the slot readers", AGREE,
             "      g = warp_agree(g);\n      if (lane == 0) grid_verdict = slot_of(g);",
             "      if (lane == 0) grid_verdict = slot_of(g);", device="gpu"),
    Mutation("GPU mask kernel does not wait for the kernel before it", MASK_KERNEL,
             "  const int64_t* pending_code = pending_code_now(scope, out);\n"
             "  wait_for_previous_kernel();\n",
             "  const int64_t* pending_code = pending_code_now(scope, out);\n",
             device="gpu"),
    Mutation("GPU one-block mask skips the request checks", MASK_KERNEL,
             "kBranchFree ? mask_request_failures(t, p) == 0 :",
             "kBranchFree ? true :", device="gpu"),
    Mutation("GPU cluster block keeps its own verdict", AGREE,
             "return warp_agree(lane < blocks ? verdict_in(slots[lane]) : Verdict{kNone, 0});",
             "return v;", device="gpu"),
    Mutation("GPU cluster agreement reads the portable 8 slots only", AGREE,
             "return warp_agree(lane < blocks ? verdict_in(slots[lane]) : Verdict{kNone, 0});",
             "return warp_agree(lane < blocks && lane < kPortableClusterBlocks ? "
             "verdict_in(slots[lane]) : Verdict{kNone, 0});", device="gpu"),
    Mutation("GPU shared prompt walk skips tokens", MASK_KERNEL,
             "left > 0; left -= kAtOnce * step) {",
             "left > 0; left -= (kAtOnce + 1) * step) {", device="gpu"),
    Mutation("GPU a group's token checks stop short of the last token", MASK_KERNEL,
             "left > 0; left -= g.lanes)\n      bad |=", "left > 1; left -= g.lanes)\n      bad |=",
             device="gpu"),
    Mutation("GPU a group's token writes stop short of the last token", MASK_KERNEL,
             "left > 0; left -= g.lanes) {  // as group_checks_mask's",
             "left > 1; left -= g.lanes) {  // as group_checks_mask's", device="gpu"),
    Mutation("GPU shared prompt tokens go unchecked", MASK_KERNEL,
             "if (!mask_offset_ok(offset) && verdict_of(i) < mine.bad) mine.bad = verdict_of(i);",
             "", device="gpu"),
    Mutation("GPU a shared prompt's failure names the block's last request", MASK_KERNEL,
             "if (!mask_offset_ok(offset) && verdict_of(i) < mine.bad) mine.bad = verdict_of(i);",
             "if (!mask_offset_ok(offset)) mine.bad = verdict_of(i);", device="gpu"),
    Mutation("GPU block verdict agreed with the listing is its warp's", MASK_KERNEL,
             "return Listed{warp_agree(has ? Verdict{bads[lane], anys[lane]} : Verdict{kNone, 0}),",
             "return Listed{w,", device="gpu"),
    Mutation("GPU verdict agreed with the listing ignores the pending error", MASK_KERNEL,
             "if (kVerdictWithListing) add_pending(mine, pending);", "", device="gpu"),
    Mutation("GPU verdict agreed with the listing forgets later requests", MASK_KERNEL,
             "agreed = kVerdictWithListing && !walks && groups >= bsz;",
             "agreed = kVerdictWithListing && !walks;", device="gpu"),
    Mutation("GPU a warp's run of requests skips one", MASK_KERNEL,
             "* kRun + k % kRun", "* kRun + k % kRun / 2 * 2", device="gpu"),
    # -- where errors wait (any thread may replay a graph or ask) -----------------------
    Mutation("GPU the error record per thread, not per device", RECORD,
             "  static DeviceRecord records[kMaxDevices];",
             "  thread_local DeviceRecord records[kMaxDevices];", device="gpu"),
    Mutation("GPU an error taken is left pending too", AGREE,
             "  if (seen.code != kOk)\n    atomicCAS(", "  if (false)\n    atomicCAS(", device="gpu"),
    # -- the device the ops run on (two GPUs: tensors off the current device) ----------
    Mutation("GPU ops run on the current device, not their tensors'", RECORD,
             "    if (caller_ != device) {", "    if (false) {", device="gpu2"),
    Mutation("GPU the caller's current device not given back", RECORD,
             "    if (switched_) cudaSetDevice(caller_);", "", device="gpu2"),
    Mutation("GPU a call launches on device 0, not on its tensors' device", DISPATCH,
             "        on_device_(c.place().GetDeviceId(), op_),",
             "        on_device_(0, op_),", device="gpu2"),
    # -- the loop replayed from CUDA graphs (GPU only) ------------------------------------
    Mutation("a refused replay of preprocess not raised", CAPTURED,
             "            p.form_ops.raise_pending_errors(self.flag)\n", "", device="gpu"),
    Mutation("replayed preprocess without the without-fix undo", CAPTURED,
             "        with p.preprocess_effects():\n", "        if True:\n", device="gpu"),
    Mutation("the mask call captured with cu_seqlens_q as it was then", CAPTURED,
             "        write(self.cu, cu.astype(np.int32))\n        if self._mask is None:\n",
             "        if self._mask is None:\n            write(self.cu, cu.astype(np.int32))\n",
             device="gpu"),
    Mutation("a substep past the captured tokens replayed", CAPTURED,
             "        if tokens > self.max_tokens:\n", "        if False:\n", device="gpu"),
    # -- the values a refusal names ---------------------------------------------------
    Mutation("a refusal naming accept_tokens' and draft_tokens' widths swapped", H,
             "return fail(kAcceptNumOutOfRange, acc, t.accept_cols, t.draft_cols);",
             "return fail(kAcceptNumOutOfRange, acc, t.draft_cols, t.accept_cols);"),
    Mutation("a refusal naming the cursor and its rollback swapped", H,
             "return fail(kNegativeMaskCursor, p.cursor, p.rollback);",
             "return fail(kNegativeMaskCursor, p.rollback, p.cursor);"),
    Mutation("vision generation for any decode state above 1", H,
             "(state0 == 2 && S > 0 ? kVisionGeneration : kPrompt)",
             "(state0 >= 2 && S > 0 ? kVisionGeneration : kPrompt)"),
    # -- the launch plan (pure; its CPU tests run it over described devices) ----------
    Mutation("preprocess's one block on sm_90 one request longer", RULES,
             "ClusterShape preprocess_cluster{128, 16, 128, 64};",
             "ClusterShape preprocess_cluster{129, 16, 128, 64};"),
    Mutation("a grid of more blocks than fit at once", RULES,
             "  if (blocks > resident) blocks = resident;\n", "\n"),
    Mutation("a grid of more blocks than the scratch has slots", RULES,
             "  if (blocks > kGridSlots) blocks = kGridSlots;\n", "\n"),
    Mutation("no cluster of 8 where 16 do not fit", RULES,
             "    most.blocks = kPortableClusterBlocks;\n", "    return none;\n"),
    Mutation("half a warp a request only below the one block's bound", RULES,
             "if (bsz * 16 <= one_block) return 16;", "if (bsz * 16 < one_block) return 16;"),
    Mutation("long prompts shared out at 64 columns", RULES,
             "return mask_full_cols > kShareTokens && num_tokens > kShareTokens;",
             "return mask_full_cols >= kShareTokens && num_tokens > kShareTokens;"),
    Mutation("a long prompt's zeroing not capped at a block a request", RULES,
             "const int64_t zeroing = capped ? per_request : stores;",
             "const int64_t zeroing = stores;"),
    Mutation("a grid where there is no scratch", RULES,
             "if (work <= one_block_max || !has_scratch) return one;",
             "if (work <= one_block_max) return one;"),
    Mutation("a cluster retry that does not stop at the portable size", RULES,
             "if (most.blocks <= kPortableClusterBlocks) return none;",
             "if (most.blocks < kPortableClusterBlocks) return none;"),
    Mutation("a cluster of the portable size taken without asking whether it fits", RULES,
             "    if (d.cluster_fits(k, (int)blocks, (int)threads))\n",
             "    if (blocks <= kPortableClusterBlocks || d.cluster_fits(k, (int)blocks, "
             "(int)threads))\n"),
    # -- the numpy reference -------------------------------------------------------
    Mutation("reference rollback sign", REF, "rollback[i] = int(rollback[i]) + S_old - int(dec[i])",
             "rollback[i] = int(rollback[i]) + int(dec[i]) - S_old"),
    Mutation("reference decode_states pattern", REF, "        row[:n] = 0\n        row[n:] = -1",
             "        row[:n] = 0\n        row[n:] = 0"),
    Mutation("reference shadow decode_states keeps a 1", REF,
             "row[:n] = np.where(row[:n] == 1, -1, 0)", "row[:n] = np.where(row[:n] == 1, 1, 0)"),
    Mutation("the reference names only the first missing tensor", REF,
             """[f"lacks {', '.join(missing)}"]""", """[f"lacks {missing[0]}"]"""),
    Mutation("the reference names the missing tensors alone where others are unknown", REF,
             """the state {'; it '.join(said)}\"""", """the state {said[0]}\""""),
    # -- the models of FastDeploy's kernels: what they refuse -------------------------
    Mutation("a kernel model checks the dtypes of written tensors only", REF_FD,
             "        if state[t.name].dtype != t.dtype:",
             "        if t.written and state[t.name].dtype != t.dtype:"),
    # -- the proposer -----------------------------------------------------------------
    Mutation("decode preset 1 - k", SLOTS, "return 1 - (num_model_steps - 1)",
             "return 1 - num_model_steps"),
    Mutation("decode cursor +1 instead of +2", SLOTS,
             'a["attn_mask_offsets_decoder"][i] = int(r.mask_offsets[n - 1]) + 2',
             'a["attn_mask_offsets_decoder"][i] = int(r.mask_offsets[n - 1]) + 1'),
    Mutation("mixed input not shifted", SLOTS, 'a["input_ids"][i, : n - 1] = r.prompt[1:]',
             'a["input_ids"][i, : n - 1] = r.prompt[:-1]'),
    Mutation("release leaves the rollback", SLOTS, '"seq_lens_decoder": 0, "mask_rollback": 0,',
             '"seq_lens_decoder": 0,'),
    Mutation("insert keeps old pre_ids", SLOTS, '    a["pre_ids"][i] = -1\n', "\n"),
    Mutation("a handed-over token id 0 refused", SLOTS,
             "if any(not is_int(t) or not 0 <= t <= INT64_MAX for t in handed):",
             "if any(not is_int(t) or not 0 < t <= INT64_MAX for t in handed):"),
    Mutation("insert keeps a reused slot's decode_states", SLOTS,
             '    a["decode_states"][i] = 0\n', "\n"),
    Mutation("insert keeps a reused slot parked", SLOTS,
             '    a["is_block_step"][i] = False\n', "\n"),
    Mutation("handover KV positions one past", SLOTS, 'a["seq_lens_decoder"][i] = n + (k - 1)',
             'a["seq_lens_decoder"][i] = n + k'),
    Mutation("busy slot not refused", PROP, "busy = sorted(self.occupied.intersection(slots))",
             "busy = []"),
    Mutation("one slot twice in a batch accepted", PROP, "if len(set(slots)) != len(slots):",
             "if False:"),
    Mutation("release keeps the slots occupied", PROP,
             "        self.occupied.difference_update(slots)\n", "\n"),
    Mutation("a runner's not_need_stop ignored", PROP,
             '            args["not_need_stop"] = not_need_stop\n', "            pass\n"),
    Mutation("without the fix, the rollback update kept", WITHOUT_FIX,
             '        write(self.state["mask_rollback"], before)\n', "        pass\n"),
    Mutation("release leaves a parked slot parked", SLOTS,
             '"seq_lens_decoder": 0, "mask_rollback": 0, "is_block_step": False}',
             '"seq_lens_decoder": 0, "mask_rollback": 0}'),
    Mutation("the proposer always runs the v1 scheduler", PROP,
             "kvcache_scheduler_v1=bool(cfg.kvcache_scheduler_v1))", "kvcache_scheduler_v1=True)"),
    # -- the simulator and the oracle --------------------------------------------------
    Mutation("the simulator's not_need_stop check one way only", SIM,
             "    if running != bool((~st[\"stop_flags\"]).any()):",
             "    if running and not bool((~st[\"stop_flags\"]).any()):"),
    Mutation("alignment ignores step_idx", SIM, 'for name in ("seq_lens_decoder", "step_idx"):',
             'for name in ("seq_lens_decoder",):'),
    Mutation("the simulator checks no prompt's offsets", SIM,
             "if not block[i] and not (E[i] <= 0 and S[i] <= 0)]",
             "if not block[i] and E[i] == 0 and S[i] > 0]"),
    Mutation("alignment checked on a mixed node only", SIM, 'if p.config.role != "prefill":',
             'if p.config.role == "mixed":'),
    Mutation("the tally counts no rolled-back request", SIM, "        tally.rolled_back += 1\n",
             "\n"),
    Mutation("a run with disagreements alone passes", SIM,
             "        if self.model is not None and self.model.disagreements > 0:\n"
             "            said.append(\"the draft model computed otherwise than a cache-free recomputation\")\n", ""),
    Mutation("a run with FastDeploy's writes outside a row alone passes", SIM,
             "        if self.outside is not None and self.outside.total > 0:\n"
             "            said.append(\"FastDeploy's kernels would write outside a row or tensor\")\n",
             ""),
    Mutation("the tally's violations leave out alignment", SIM,
             "return self.mask_violations + self.align_violations",
             "return self.mask_violations"),
    Mutation("a re-prefill drops the prompt's image spans", SIM,
             "    offsets = list(life.mask_offsets) + list(range(len(life.prompt), len(prompt)))",
             "    offsets = list(range(len(prompt)))"),
    Mutation("the offset check's truth taken from the runner's re-prefill", SIM,
             "        node.base.admit(r.slot, r.prompt, mask_offsets=r.mask_offsets, decoded=decoded)\n",
             "        node.base.admit(r.slot, r.prompt, mask_offsets=r.mask_offsets, decoded=decoded)\n"
             "        node.truth[r.slot] = Submitted(np.asarray(r.mask_offsets))\n"),
    Mutation("the oracle's truth taken from the runner's re-prefill", SIM,
             "        node.base.admit(r.slot, r.prompt, mask_offsets=r.mask_offsets, decoded=decoded)\n",
             "        node.base.admit(r.slot, r.prompt, mask_offsets=r.mask_offsets, decoded=decoded)\n"
             "        if node.runner is not None:\n"
             "            node.runner.admit(r.slot, np.asarray(r.mask_offsets))\n"),
    Mutation("a GPU command runs where Paddle sees no GPU", DEVICES,
             "    if paddle.device.cuda.device_count() < 1:\n", "    if False:\n"),
    Mutation("bench defaults to the GPU where there is none", BENCH,
             'device = args.device or ("cpu" if problem else "gpu")',
             'device = args.device or "gpu"'),
    Mutation("oracle compares nothing", ORACLE,
             "bad = (diff > TOLERANCE) | (got.argmax(axis=1) != want.argmax(axis=1))",
             "bad = diff > 1e30"),
    Mutation("oracle uses the op's mask as the truth", ORACLE,
             "ends = true_ends(self.prompt_offsets[slot], np.arange(M))",
             "ends = np.concatenate([true_ends(self.prompt_offsets[slot], np.arange(start)), "
             "offsets[2 * q + 1:2 * (q + n):2]])"),
    Mutation("oracle compares each request's last token only", ORACLE,
             "got, want = logits[q:q + n], full[start:M]",
             "got, want = logits[q + n - 1:q + n], full[M - 1:M]"),
    # -- the real draft model (what a runner's draft forward does with the mask) ------
    Mutation("the model's attention ignoring a window's start", TINY,
             "allowed = (keys >= starts[:, None]) & (keys < ends[:, None])",
             "allowed = keys < ends[:, None]"),
    Mutation("cached attention stops one key short", TINY,
             "ends = np.minimum(ends_all[q0:q0 + n].astype(np.int64), self.L)",
             "ends = np.minimum(ends_all[q0:q0 + n].astype(np.int64) - 1, self.L)"),
    Mutation("cached K/V written one position late", TINY,
             "np.full(n, slot * self.L) for slot, _, n, _ in requests]) \\\n            + positions",
             "np.full(n, slot * self.L) for slot, _, n, _ in requests]) \\\n            + positions + 1"),
    Mutation("prefill hands over one position short", TINY,
             "a, b = slot * self.L, slot * self.L + n", "a, b = slot * self.L, slot * self.L + n - 1"),
    Mutation("handed-over K/V land in slot 0", TINY,
             "index = _cpu(np.arange(n, dtype=np.int64) + slot * self.L)",
             "index = _cpu(np.arange(n, dtype=np.int64))"),
    # -- the registration check (CI's drop-in guarantee) ------------------------------
    Mutation("registration check ignores attributes and in-place pairs", REG,
             'for field in ("inputs", "outputs", "attrs", "inplace"):',
             'for field in ("inputs", "outputs"):'),
    # -- the wrappers -------------------------------------------------------------------
    Mutation("a stale install counts as current", OPS,
             "if _build.read_install_stamp() == _build.source_hash(_build.with_cuda()):",
             "if _build.read_install_stamp() is not None:"),
    Mutation("an int attribute's range skipped on the fast path", OPS,
             "(kind is int and 1 <= value <= INT32_MAX)", "(kind is int)"),
    Mutation("grad not refused", OPS, "if not t.stop_gradient or not t.is_contiguous():",
             "if not t.is_contiguous():"),
    Mutation("an int attribute's upper bound taken as exclusive", OPS,
             "elif not 1 <= int(value) <= INT32_MAX:", "elif not 1 <= int(value) < INT32_MAX:"),
    Mutation("a numpy integer taken for a bool attribute", OPS,
             "if not isinstance(value, (bool, np.bool_)):",
             "if not isinstance(value, (bool, np.bool_, np.integer)):"),
    # -- the build ------------------------------------------------------------------------
    # -- FastDeploy's runner, replayed (sim_fastdeploy.py) -----------------------
    Mutation("replayed decode-node cursor from the last prompt token", SIMFD,
             'a["attn_mask_offsets_decoder"][i] = int(offsets[end - 1]) + 1',
             'a["attn_mask_offsets_decoder"][i] = int(offsets[n - 1]) + 1'),
    Mutation("replayed preprocess call bound by name, not by FastDeploy's positions", SIMFD,
             'SWAPPED_BY_FASTDEPLOY = {"is_block_step": "batch_drop", "batch_drop": "is_block_step"}',
             'SWAPPED_BY_FASTDEPLOY = {}'),
    # -- FastDeploy's chunked prefill and prefix-cache starts, replayed ------------
    Mutation("a replayed prefill chunk inserted at position 0, not at its start", SIMFD,
             'a["seq_lens_decoder"][i] = start', 'a["seq_lens_decoder"][i] = 0'),
    Mutation("a replayed chunk before the last counting a generated token", SIMFD,
             'a["step_idx"][i] = generated if end >= tokens.shape[0] else 0',
             'a["step_idx"][i] = generated if end >= tokens.shape[0] else 1'),
    Mutation("a replayed chunk cutting an image span", SIMFD,
             '        end = max(end, image_span_end(offsets, end))', '        pass'),
    Mutation("a prefix-cache hit of the whole prompt left whole", SIMFD,
             '    if matched == n:\n        matched -= block\n', ''),
    Mutation("a prefix-cache hit ending before an image span's last token kept", SIMFD,
             "if 0 < matched and offsets[matched - 1] >= matched:",
             "if 0 < matched and offsets[matched - 1] > matched:"),
    Mutation("a prefix-cache hit inside an image span moved to the span's end", SIMFD,
             "matched = int(np.nonzero(offsets == offsets[matched - 1])[0][0])",
             "matched = int(np.nonzero(offsets == offsets[matched - 1])[0][-1]) + 1"),
    Mutation("an image span's last token taken for text", SIMFD,
             "if offsets[p] > p or (p > 0 and offsets[p - 1] == p):",
             "if offsets[p] > p:"),
    Mutation("the base model's lengths not moved over a chunk", SIM_MODELS,
             '                    a_["seq_lens_decoder"][i] = end\n', ''),
    Mutation("the oracle takes the draft's own tokens for a prompt's", ORACLE,
             '                inputs[:m] = truth[:m]\n', ''),
    Mutation("a prefill node handing a chunked request over after its first chunk", SIM,
             'prefilled += [i for i in admitted if i not in node.chunks]', 'prefilled += admitted'),
    Mutation("a prefix-cache hit's draft K/V never filled", SIM,
             '                node.runner.cached_prefix(r.slot, spans[r.slot][0][0])',
             '                pass'),
    Mutation("replayed outside-write count misses the column one past the row", SIMFD,
             "(cols >= P)", "(cols > P)"),
    Mutation("FastDeploy's draft update handing the base model no end token", SIM_MODELS,
             "put_base(i, tok)\n                if tok == EOS:",
             "put_base(i, -1 if tok == EOS else tok)\n                if tok == EOS:"),
    Mutation("the scripted base going on after an accepted end token", SIM_MODELS,
             'if (ends.size or a_["step_idx"][i]', 'if (a_["step_idx"][i]'),
    Mutation("a prefill node's stopped request keeping its step_idx", SIM_MODELS,
             's["step_idx"][s["stop_flags"].astype(bool)] = 0', 'pass'),
    Mutation("the draft update's not_need_stop left as the preprocess wrote it", SIM_MODELS,
             'flag[...] = not s["stop_flags"].astype(bool).all()', 'pass'),
    Mutation("the replay running a substep after every draft stopped", SIM,
             'if node.fastdeploy and not bool(_read(p.state["not_need_stop"]).reshape(-1)[0]):',
             'if False:'),
    Mutation("the replay check never comparing a substep's mask offsets", TWIN,
             "if not np.array_equal(out, offs_r[:out.shape[0]]):", "if False:"),
    Mutation("the replay check missing a substep the replay ran and FastDeploy did not", TWIN,
             "if ran != len(self.fed):", "if ran < len(self.fed):"),
    Mutation("the replay check's form from the preprocess op alone", TWIN,
             'form = mask if mask == "pr6403" else pre', "form = pre"),
    Mutation("the reproducer's end token never among the base model's drafts", REPRO,
             'return sim_fastdeploy.draft_update_kernel(r.form) == "ends"', 'return False'),
    Mutation("the reproducer calling every k = 1 row exact", REPRO,
             "return K1_CASES.get(form, {}).get(role) if k == 1 else CASES[form][role]",
             "return None if k == 1 else CASES[form][role]"),
    Mutation("the chunk reproducer inserting the prompt whole", REPRO,
             'spans={0: (0, chunk)}', 'spans={0: (0, len(prompt))}'),
    Mutation("the chunk reproducer's sample the prompt's own token", REPRO,
             'r.fill({}, dict(accept_tokens=([CHUNK_SAMPLE], 0)))',
             'r.fill({}, dict(accept_tokens=([prompt[chunk]], 0)))'),
    Mutation("the chunk reproducer citing another version's kernel for pr5245", REPRO,
             '"pr5245": _gpu_cause("ba915e03e", "200-213", "97-109", "pr5245",',
             '"pr5245": _gpu_cause("9018ccf74", "204-213", "99-111", "pr5245",'),
    Mutation("the chunk reproducer exiting 0 on its drift", REPRO,
             '            print(line)\n        return 1\n    rep = reproduce(',
             '            print(line)\n        return 0\n    rep = reproduce('),
    Mutation("verdict rows of another workload than the table's", TABLES,
             'WORKLOAD = dict(runner="fastdeploy", draft_model="tiny", image_prob=0.5)',
             'WORKLOAD = dict(runner="fastdeploy", draft_model="tiny", image_prob=0.25)'),
    Mutation("verdict violations without their kinds", TABLES,
             "    return f\"{mask + alignment} ({', '.join(kinds)})\"",
             "    return f\"{mask + alignment}\""),
    # -- the command line and the packaging -------------------------------------
    Mutation('a missing Paddle shown as a traceback', MAIN,
             '        if e.name != "paddle":\n            raise\n        return _refuse(PADDLE_MISSING)',
             '        raise'),
    Mutation('a BuildError shown as a traceback', MAIN,
             '    except BuildError as e:\n        return _refuse(str(e))\n',
             ''),
    Mutation('a BuildError of several lines printed as they are', MAIN,
             'print(ERROR + " ".join(message.split()), file=sys.stderr)',
             'print(ERROR + message, file=sys.stderr)'),
    Mutation('the simulator follows FASTDEPLOY_MTP_FORM, not --form', SIM,
             'proposer = (ProposerWithoutFix if legacy else MTPProposer)(cfg, buffers, place, form=form)',
             'proposer = (ProposerWithoutFix if legacy else MTPProposer)(cfg, buffers, place)'),
    Mutation('any missing module taken for Paddle', MAIN,
             'if e.name != "paddle":',
             'if e.name is None:'),
    Mutation('Ctrl-C shown as a traceback', MAIN,
             '    except KeyboardInterrupt:\n        print("fastdeploy_mtp: interrupted", file=sys.stderr)\n        return 128 + signal.SIGINT\n',
             ''),
    Mutation('check of every form checks the first only', MAIN,
             '    for form in forms:\n        print(f"== the {form} form", flush=True)',
             '    for form in forms[:1]:\n        print(f"== the {form} form", flush=True)'),
    Mutation('verdict --chunk at its documented limit refused', MAIN,
             'if not 0 <= args.chunk <= LIMITS["max_prompt"]:',
             'if not 0 <= args.chunk < LIMITS["max_prompt"]:'),
    Mutation('simulate --max-prompt 1 accepted', SIM_CLI,
             '("max_prompt", 2)', '("max_prompt", 1)'),
    Mutation('--version prints a second version number', MAIN,
             'version=f"fastdeploy_mtp {__version__}"',
             'version="fastdeploy_mtp 0.1"'),
    Mutation('check silent about its build', MAIN,
             'print("check: the op library holds every form\'s ops; the first use builds it, once",',
             'print("",'),
    Mutation('check passes a form with differences before one without', MAIN,
             '        problems += check_all(form)', '        problems = check_all(form)'),
    Mutation('--plot checked by os.access', SIM_CLI,
             '    why = _write_problem(path)\n',
             '    why = None if os.access(os.path.dirname(os.path.abspath(path)), os.W_OK) else "no"\n'),
    Mutation('the install hint names a plot extra that does not exist', SIM_CLI,
             'pip install -e ".[plot]" \'',
             'pip install -e ".[plots]" \''),
    Mutation('a second version number in pyproject', PYPROJECT,
             'dynamic = ["version"]',
             'version = "0.1.0"'),
    Mutation('the console script without its own name', PYPROJECT,
             'fastdeploy-mtp = "fastdeploy_mtp.__main__:console"',
             'fastdeploy-mtp = "fastdeploy_mtp.__main__:main"'),
    Mutation('py.typed left out of the wheel', PYPROJECT,
             '"fastdeploy_mtp" = ["py.typed"]',
             '"fastdeploy_mtp" = []'),
    # -- the CUDA archs: the build's list and the launcher's choice by kernel image --
    Mutation('the highest arch built without its PTX', BUILD,
             '    return archs, sorted(set(ptx) | {top})',
             '    return archs, sorted(set(ptx))'),
    Mutation('an arch below sm_80 taken', BUILD,
             '        if arch < LEAST_ARCH:',
             '        if arch < 0:'),
    Mutation('without a GPU, a build for sm_90 only', BUILD,
             'or list(SERVED_ARCHS)',
             'or [90]'),
    Mutation("the CUDA flags left out of the CUDA build's hash", BUILD,
             '    flags = repr((compile_flags(cuda), link_flags(cuda))).replace(',
             '    flags = repr((compile_flags(False), link_flags(cuda))).replace('),
    Mutation('an arch nvcc does not know taken', BUILD,
             '        if unknown:\n            raise SettingError(',
             '        if False:\n            raise SettingError('),
    Mutation('the visible GPUs never asked of nvidia-smi', BUILD,
             '    if not archs:\n        try:\n            out = subprocess.run(["nvidia-smi"',
             '    if False:\n        try:\n            out = subprocess.run(["nvidia-smi"'),
    Mutation('GPU clusters and early launches by the device alone, not the loaded code', LAUNCH,
             '    c = device && major * 10 >= kClusterArch && kernel_image_arch() >= kClusterArch ? 1 : 2;',
             '    c = device && major * 10 >= kClusterArch ? 1 : 2;', device='gpu'),
    Mutation('GPU every launch programmatic', LAUNCH,
             '  if (l.overlap) {',
             '  if (true) {', device='gpu'),
    Mutation("kernel headers left out of the build's hash", BUILD,
             'SOURCE_SUFFIXES = (".h", ".cuh", ".cc", ".cu")', 'SOURCE_SUFFIXES = (".h", ".cc", ".cu")'),
    Mutation("kernel sources left out of the build's hash", BUILD,
             'SOURCE_SUFFIXES = (".h", ".cuh", ".cc", ".cu")', 'SOURCE_SUFFIXES = (".h", ".cuh", ".cc")'),
    Mutation("a first build without the lock", BUILD,
             "    with build_lock(root, key, what):", "    with contextlib.nullcontext():"),
    Mutation("a waiter that comes before the holder's pid names no one", BUILD,
             "            holder = _lock_holder(fd)\n",
             '            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"\n'),
    Mutation("a released build lock keeps its holder's pid", BUILD,
             "            os.ftruncate(fd, 0)\n    finally:\n        os.close(fd)",
             "            pass\n    finally:\n        os.close(fd)"),
    Mutation("the sources' folder hashed, so each copy of the same sources builds anew", BUILD,
             '.replace(str(SOURCE_DIR), "<sources>")', ''),
    Mutation("an empty setting taken for a value", BUILD,
             "    if value and value not in allowed:",
             "    if name in os.environ and value not in allowed:"),
]

# Test files in the order that kills fastest (cheap, broad ones first).
# The guarded driver's own file leads: a write past a tensor there faults
# at once, where in a Paddle tensor it may corrupt the heap and hang the suite.
# The fixed refusal messages come after the guarded driver's bad-input cases:
# a check skipped there makes the Paddle op write past a tensor (a crash),
# where the guarded driver fails the test instead.
CPU_TESTS = ["tests/test_guarded.py", "tests/test_launch_plan.py", "tests/test_hostile_input.py",
             "tests/test_form_limits.py", "tests/test_table_behaviour.py",
             "tests/test_bad_input.py", "tests/test_refusal_messages.py",
             "tests/test_properties.py", "tests/test_differential.py",
             "tests/test_proposer.py", "tests/test_simulator.py", "tests/test_draft_model.py",
             "tests/test_signature.py", "tests/test_loader.py",
             "tests/test_huge_requests.py", "tests/test_forms.py", "tests/test_form_recompute.py",
             "tests/test_fastdeploy_kernels.py", "tests/test_form_pr5245.py",
             "tests/test_form_pr5738.py",
             "tests/test_form_pr6403.py", "tests/test_form_xpu.py",
             "tests/test_reference_fastdeploy.py", "tests/test_state_errors.py",
             "tests/test_form_shadow.py", "tests/test_fastdeploy_dropin.py",
             "tests/test_sim_fastdeploy.py", "tests/test_sim_chunked.py", "tests/test_cli.py",
             "tests/test_plugin.py", "tests/test_form_corrected.py", "tests/test_patches.py",
             "tests/test_doctor.py",
             "tests/test_cli_limits.py", "tests/test_plugin_detection.py",
             "tests/test_verdict.py", "tests/test_reproduce.py", "tests/test_replay_twin.py",
             "tests/test_build_lock.py",
             "tests/test_docs.py"]
# The tests that compare text rather than behaviour: a generated file or the
# C++ source against the signature table, and the docs against what a command
# prints. `--behaviour` leaves them out, to count the mutants that behaviour
# alone kills (a kill here may rest on a file no longer matching its table
# or a page no longer matching a printout, whether a user would see a change
# or not).
TEXT_CHECKS = ["tests/test_docs.py",
               *(f"tests/test_signature.py::{t}" for t in (
                   "test_registration_matches_table", "test_check_command_exits_zero",
                   "test_generated_headers_are_the_tables",
                   "test_signature_command_checks_every_generated_header",
                   "test_kernel_parameters_are_the_tables",
                   "test_checks_list_every_input_once_in_order",
                   "test_the_check_order_is_the_bindings",
                   "test_checks_use_the_tables_kind_dtype_and_access",
                   "test_no_hand_written_binding_names_a_tensor")),
               "tests/test_cli.py::test_without_paddle_the_help_version_and_signature_still_work",
               "tests/test_cli.py::test_check_says_what_it_builds_and_checks_every_form",
               *(f"tests/test_verdict.py::{t}" for t in (
                   "test_the_docs_table_has", "test_sampled_rows_are_what_the_command_prints",
                   "test_the_chunked_table_has", "test_sampled_chunked_rows",
                   "test_the_plugin_table_has", "test_with_the_plugin_every_row_of_the_docs",
                   "test_sampled_plugin_rows")),
               "tests/test_reproduce.py::test_the_drifting_rows_are_those_of_the_verdict_table"]
GPU_TESTS = ["tests/test_gpu.py", "tests/test_refusal_messages.py", "tests/test_bad_input.py",
             "tests/test_hostile_input.py",
             "tests/test_differential.py",
             "tests/test_gpu_loop.py", "tests/test_gpu_devices.py",
             "tests/test_huge_requests.py"]
# The mutations only a machine with two GPUs can see (test_gpu_devices.py
# skips on fewer): run with --device gpu2 there.
GPU2_TESTS = ["tests/test_gpu_devices.py"]


# The test files nearest each mutated file, run before the rest: with -x the
# suite stops at its first failure, so a mutant dies as soon as a test near
# its code sees it, while a survivor still runs every file. The verdict is
# the whole suite's either way; only the time to it changes.
NEAREST = {
    REF: ["tests/test_differential.py", "tests/test_properties.py", "tests/test_state_errors.py"],
    REF_FD: ["tests/test_reference_fastdeploy.py", "tests/test_fastdeploy_kernels.py",
             "tests/test_state_errors.py"],
    PLUGIN: ["tests/test_plugin.py", "tests/test_plugin_detection.py"],
    PLUGIN_DETECT: ["tests/test_plugin.py", "tests/test_plugin_detection.py"],
    PLUGIN_REPLACE: ["tests/test_plugin.py", "tests/test_plugin_detection.py"],
    PATCHES: ["tests/test_patches.py", "tests/test_plugin.py"],
    CHUNK_PATCH: ["tests/test_patches.py", "tests/test_verdict.py"],
    CHUNK_PATCH_V0: ["tests/test_patches.py"],
    REAL_OPS: ["tests/test_real_fastdeploy_ops.py"],
    DOCTOR: ["tests/test_doctor.py"],
    REPRO: ["tests/test_reproduce.py", "tests/test_cli.py"],
    SIMFD: ["tests/test_sim_fastdeploy.py", "tests/test_sim_chunked.py", "tests/test_verdict.py"],
    SIM_MODELS: ["tests/test_sim_chunked.py", "tests/test_simulator.py",
                 "tests/test_sim_fastdeploy.py"],
    TWIN: ["tests/test_replay_twin.py"],
    VERDICT: ["tests/test_verdict.py"],
    TABLES: ["tests/test_verdict.py"],
    SIGNATURE: ["tests/test_table_behaviour.py", "tests/test_bad_input.py"],
    MAIN: ["tests/test_cli.py", "tests/test_cli_limits.py"],
    SIM_CLI: ["tests/test_cli.py", "tests/test_cli_limits.py", "tests/test_simulator.py"],
    BUILD: ["tests/test_loader.py", "tests/test_build_lock.py"],
    PROP: ["tests/test_proposer.py"],
    SLOTS: ["tests/test_proposer.py"],
    SIM: ["tests/test_simulator.py", "tests/test_sim_chunked.py"],
    ORACLE: ["tests/test_simulator.py", "tests/test_draft_model.py", "tests/test_sim_chunked.py"],
    TINY: ["tests/test_draft_model.py"],
    WITHOUT_FIX: ["tests/test_simulator.py"],
}
# A mutation named after a form is nearest to that form's own tests.
FORM_TESTS = {"recompute": ["tests/test_form_recompute.py"],
              **{f: ["tests/test_form_corrected.py"]
                 for f in ("corrected_pr5245", "corrected_pr5738", "corrected_pr6403")},
              "shadow": ["tests/test_form_shadow.py"],
              **{f: [f"tests/test_form_{f}.py", "tests/test_fastdeploy_kernels.py"]
                 for f in ("pr5245", "pr5738", "pr6403", "xpu")}}


def ordered_tests(m, tests: list) -> list:
    """`tests` (the device's set, or --tests) with the files nearest `m` first."""
    near = list(NEAREST.get(m.path, []))
    for form, files in FORM_TESTS.items():
        if form in m.name.split() or f"{form}'s" in m.name:
            near = files + near
    if m.path.endswith((".h", ".cuh", ".cc")):
        # The guarded driver still leads for C++: a write past a tensor faults
        # there at once, where in a Paddle tensor it may hang the suite.
        near = ["tests/test_guarded.py"] + near
    first = [t for t in dict.fromkeys(near) if t in tests]
    return first + [t for t in tests if t not in first]


def _gpus() -> int:
    """How many GPUs Paddle sees (asked in a child: this script imports no Paddle)."""
    r = subprocess.run([sys.executable, "-c", "import paddle; print(paddle.device.cuda."
                        "device_count() if paddle.is_compiled_with_cuda() else 0)"],
                       capture_output=True, text=True)
    lines = r.stdout.strip().splitlines()
    return int(lines[-1]) if r.returncode == 0 and lines and lines[-1].isdigit() else 0


def _files() -> list:
    r = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                       cwd=REPO, capture_output=True, text=True)
    if r.returncode == 0:
        return [f for f in r.stdout.splitlines() if (REPO / f).is_file()]
    # A copy of the tree without .git (a device machine): the sources, not builds.
    skip = {".git", ".gpu", ".whl", "build", "dist", "__pycache__", "gpu-report"}
    out = []
    for root, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        out += [str(Path(root, n).relative_to(REPO)) for n in names if not n.endswith((".so", ".o"))]
    return out


def where(m: Mutation, text: str) -> int:
    """Where `m` applies in `text` (the start of its `old`), or -1 where it
    does not: its text absent, or there more than once and no nth given."""
    count = text.count(m.old)
    if (m.nth < 0 and count != 1) or count <= m.nth:
        return -1
    at = -1
    for _ in range(max(m.nth, 0) + 1):
        at = text.index(m.old, at + 1)
    return at


def apply(m: Mutation, root: Path) -> bool:
    path = root / m.path
    text = path.read_text()
    at = where(m, text)
    if at < 0:
        return False
    path.write_text(text[:at] + m.new + text[at + len(m.old):])
    return True


def applies(m: Mutation) -> bool:
    """Whether `m` applies to today's sources (tried on a copy of its file)."""
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / m.path
        dst.parent.mkdir(parents=True, exist_ok=True)  # a top-level file's folder is tmp
        shutil.copy2(REPO / m.path, dst)
        return apply(m, Path(tmp))


def _copy(root: Path) -> None:
    for f in _files():  # listed anew: the tree may change during a long run
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, root / f)


# A mutant may corrupt the heap (a bound off by one lets the CPU op write past
# a tensor) and leave the test process waiting forever on a lock: a hung suite
# fails as surely as a failing one (CI would stop it). Unmutated, the suites
# take about 75 s on this project's 2-core CPU machine and 290 s on the H200
# (its GPU suite also runs the CPU cases of the bad-input files); the limit
# is twice the slower, so a loaded machine running several mutants at once
# does not count a slow suite as a hang.
SUITE_TIMEOUT_S = 600


def how_killed(returncode: int) -> str:
    """How a suite that ran to its end (no hang) judged a mutant: "" when it
    passed. A crash kills as surely as a failing test, but it is the weaker
    kill: a write past a tensor may instead corrupt the heap unseen (as
    "tokens bound off by one" once did), so the summary counts crashes apart
    and docs/mutation.md says which tests would fail in their place."""
    if returncode == 0:
        return ""
    if returncode == 1:
        return "a failing test"
    if returncode < 0:
        return f"a crash (signal {-returncode})"
    return f"pytest's exit code {returncode}"


def _run_tests(root: Path, tests: list, cache: Path, extra: tuple = ()) -> tuple:
    """(verdict, how, last line): build the library, then the suite with -x."""
    # Hypothesis draws the same examples in every run (tests/conftest.py): a
    # kill must not depend on a random draw.
    env = dict(os.environ, FASTDEPLOY_MTP_BUILD="1", FASTDEPLOY_MTP_CACHE=str(cache),
               PYTHONDONTWRITEBYTECODE="1", HYPOTHESIS_PROFILE="fixed")
    build = subprocess.run([sys.executable, "-c", "from fastdeploy_mtp import ops; "
                            "ops.load_library()"], cwd=root, env=env, capture_output=True,
                           text=True)
    if build.returncode != 0:
        return "broken", "", (build.stderr.strip().splitlines() or [""])[-1][:120]
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                            *[t for t in tests if (root / t).exists()], *extra],
                           cwd=root, env=env, capture_output=True, text=True,
                           timeout=SUITE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "killed", "a hang", f"stopped after {SUITE_TIMEOUT_S} s"
    last = (r.stdout.strip().splitlines() or [""])[-1]
    how = how_killed(r.returncode)
    return ("killed" if how else "survived"), how, last


def run_one(m, tests: list, cache: Path, extra: tuple = ()) -> tuple:
    """`m` None: the unmutated baseline, which must pass."""
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        root = Path(tmp) / "repo"
        _copy(root)
        if m is not None and not apply(m, root):
            return m, "stale", "", time.time() - t0, f"{m.path}: the original text is not there"
        if m is not None and m.path in RENDERED_FROM_TABLE:
            r = subprocess.run([sys.executable, "-m", "fastdeploy_mtp", "signature", "--write"],
                               cwd=root, capture_output=True, text=True)
            if r.returncode != 0:
                return m, "broken", "", time.time() - t0, (r.stderr.strip().splitlines()
                                                           or [""])[-1][:120]
        # C++ mutants build into their own folder of the shared cache (keyed
        # by the sources' hash, not their folder); Python mutants reuse the
        # baseline's build.
        order = tests if m is None else ordered_tests(m, tests)
        verdict, how, last = _run_tests(root, order, cache, extra)
        return m, verdict, how, time.time() - t0, last


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--list", action="store_true", help="list (and check that each applies)")
    p.add_argument("--only", nargs="+", help="mutation names (substrings)")
    p.add_argument("--device", choices=["cpu", "gpu", "gpu2"], default="cpu",
                   help="gpu2: the mutations that need two GPUs to be seen")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--deselect", nargs="+", default=[], metavar="NODEID",
                   help="leave these tests out (pytest's --deselect): would another test "
                        "fail where one crashed?")
    p.add_argument("--behaviour", action="store_true",
                   help="leave out the tests that compare text (TEXT_CHECKS: generated files "
                        "against the table, the docs against printouts)")
    p.add_argument("--tests", nargs="+", metavar="FILE",
                   help="run these test files instead of the device's set: which mutants "
                        "does one file kill on its own?")
    args = p.parse_args()
    chosen = [m for m in MUTATIONS if m.device == args.device]
    if args.only:
        chosen = [m for m in chosen if any(o in m.name for o in args.only)]
    if args.list:
        stale = 0
        for m in chosen:
            ok = applies(m)
            stale += not ok
            print(f"{m.device:4} {m.path:32} {m.name}{'' if ok else '   STALE'}")
        return 2 if stale else 0
    tests = args.tests or {"cpu": CPU_TESTS, "gpu": GPU_TESTS, "gpu2": GPU2_TESTS}[args.device]
    if args.device == "gpu2" and (gpus := _gpus()) < 2:
        print(f"mutate: --device gpu2 needs two GPUs; this machine has {gpus}")
        return 2
    missing = [t for t in tests if not (REPO / t).exists()]
    if missing:
        print(f"mutate: no such test file: {' '.join(missing)}")
        return 2
    left_out = args.deselect + (TEXT_CHECKS if args.behaviour else [])
    extra = tuple(a for d in left_out for a in ("--deselect", d))
    cache = Path(tempfile.mkdtemp(prefix="fastdeploy_mtp_mutants_"))
    try:
        _, verdict, _, secs, last = run_one(None, tests, cache, extra)
        print(f"baseline {secs:5.0f}s  (no mutation)   [{last}]", flush=True)
        if verdict != "survived":
            print("mutate: the unmutated suite does not pass; fix that first")
            return 2
        print(f"mutate: {len(chosen)} mutations, {args.jobs} at a time, tests: "
              f"{' '.join(tests)}", flush=True)
        counts = {"killed": 0, "survived": 0, "stale": 0, "broken": 0}
        weak = []  # killed by a crash or a hang, not by a failing test
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for m, verdict, how, secs, last in pool.map(
                    lambda m: run_one(m, tests, cache, extra), chosen):
                counts[verdict] += 1
                if verdict == "killed" and how != "a failing test":
                    weak.append(f"{m.name}: {how}")
                by = f" by {how}" if how else ""
                print(f"{verdict:8} {secs:5.0f}s  {m.path:32} {m.name}{by}   [{last}]",
                      flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    total = len(chosen)
    print(f"mutate: {counts['killed']}/{total} killed, {counts['survived']} survived, "
          f"{counts['stale']} stale, {counts['broken']} do not build "
          f"({100.0 * counts['killed'] / max(total, 1):.0f}%)")
    if weak:
        print(f"mutate: {len(weak)} killed by no failing test: {'; '.join(weak)}")
    return 2 if counts["stale"] or counts["broken"] else (1 if counts["survived"] else 0)


if __name__ == "__main__":
    sys.exit(main())
