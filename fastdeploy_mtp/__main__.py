"""Command line: ``python -m fastdeploy_mtp {build,check,simulate,...} ...``, also
installed as the console script ``fastdeploy-mtp``.

Exit codes: 0 done (a check or simulation found nothing wrong); 1 a run that
completed and FAILED its check; 2 a mistake or a missing piece (a bad option,
no Paddle, a library that cannot be built), said in one line on stderr; 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from . import __version__
from ._build import BuildError

PROG = "python -m fastdeploy_mtp"
CONSOLE_PROG = "fastdeploy-mtp"  # pyproject.toml's [project.scripts]
# Every refusal that is not one option's (those name their command) starts so.
ERROR = "fastdeploy_mtp: error: "
PADDLE_MISSING = ("this command needs PaddlePaddle, which is not installed: "
                  'pip install -e ".[cpu]" in a checkout, or pip install paddlepaddle '
                  "(paddlepaddle-gpu for a GPU)")


def _check(args) -> int:
    """Every form's registration (or one form's) against its table."""
    from .registration import check_all
    from .signature import FORMS

    forms = list(FORMS) if args.form == "all" else [args.form]
    print("check: the op library holds every form's ops; the first use builds it, once",
          flush=True)
    problems = []
    for form in forms:
        print(f"== the {form} form", flush=True)
        problems += check_all(form)
    if problems:
        print(f"{len(problems)} difference(s) between the registration and the signature table")
        return 1
    print(f"registration matches fastdeploy_mtp/signature.py ({', '.join(forms)})")
    return 0


def _signature(args) -> int:
    from pathlib import Path

    from ._build import SOURCE_DIR
    from .signature_cpp import GENERATED_HEADERS

    differ = 0
    for name, render in GENERATED_HEADERS.items():
        # The checkout's custom_ops/ or the installed copy.
        path = SOURCE_DIR / Path(name).relative_to("custom_ops")
        text = render()
        if args.write:
            path.write_text(text)
            print(f"wrote {path}")
            continue
        same = path.is_file() and path.read_text() == text
        differ += not same
        print(f"{name} {'matches' if same else 'DIFFERS from'} fastdeploy_mtp/signature.py"
              + ("" if same else ": run `python -m fastdeploy_mtp signature --write`"))
    return 1 if differ else 0


def _positive(name: str, values, high: int):
    """A one-line message when a count is outside [1, high], else None."""
    for v in values:
        if not 1 <= v <= high:
            return f"{name} must be within [1, {high}], got {v}"
    return None


def _bench(args) -> int:
    problem = (_positive("--bsz", args.bsz, 1 << 20) or _positive("--repeat", [args.repeat], 10**6)
               or _positive("--rounds", [args.rounds], 1000))
    if problem:
        print(f"bench: {problem}", file=sys.stderr)
        return 2
    from .bench.cpu import main as bench_main

    return bench_main(args)


def _bench_gpu(args) -> int:
    problem = (_positive("--bsz", args.bsz or [1], 1 << 20)
               or _positive("--calls", [args.calls], 10**6)
               or _positive("--rounds", [args.rounds], 1000))
    if problem:
        print(f"bench-gpu: {problem}", file=sys.stderr)
        return 2
    from .bench.gpu import main as gpu_bench_main

    return gpu_bench_main(args)


def _bench_sim(args) -> int:
    from .bench.cpu import simulator_bench

    simulator_bench()
    return 0


def _verdict(args) -> int:
    from .harness.simulate_cli import LIMITS
    from .harness.verdict import main as verdict_main

    if not 0 <= args.chunk <= LIMITS["max_prompt"]:
        print(f"verdict: --chunk must be within [0, {LIMITS['max_prompt']}] (0: off), "
              f"got {args.chunk}", file=sys.stderr)
        return 2

    return verdict_main(args)


def _reproduce(args) -> int:
    from .harness.reproduce import main as reproduce_main

    return reproduce_main(args)


def _build_library(args) -> int:
    """Builds the op library into the cache (or --into's folder), once."""
    from pathlib import Path

    from . import _build, _library

    if args.into is not None:
        # A program may set its own environment: the build below, and every
        # process started with the same variable, use this folder.
        os.environ[_build.CACHE_VARIABLE] = str(Path(args.into).expanduser().absolute())
    cuda = _build.with_cuda()
    if cuda and _build._nvcc() is None:
        print("build: this Paddle (paddlepaddle-gpu) builds the CUDA kernels with nvcc, which "
              "is not found: install the CUDA toolkit, or set CUDA_HOME to it", file=sys.stderr)
        return 2
    if args.arch:
        value = " ".join(args.arch)
        if not cuda:
            print("build: --arch needs a CUDA build of Paddle (paddlepaddle-gpu); this Paddle "
                  "builds the CPU library alone: leave --arch out", file=sys.stderr)
            return 2
        if _build.parse_archs(value) is None:
            print(f"build: --arch {value}: not a list of CUDA archs of 8.0 or later, such as "
                  "8.0 9.0 (or 80 90; 9.0+PTX adds its PTX)", file=sys.stderr)
            return 2
        os.environ[_build.ARCH_VARIABLE] = value
    elif cuda and not os.environ.get(_build.ARCH_VARIABLE):
        # The default: this machine's GPUs (or the list the cache records).
        os.environ[_build.ARCH_VARIABLE] = (_build.recorded_archs() or " ".join(
            f"{a // 10}.{a % 10}" for a in _build.cuda_archs()[0]))
    key = _build.source_hash(cuda)
    folder = _build.cache_root() / key
    before = _build.finished_build(folder, _build.MODULE_NAME)
    _library._build_from_source()
    what = "the CPU op library"
    if cuda:
        archs, ptx = _build.cuda_archs()
        _build.record_archs(os.environ[_build.ARCH_VARIABLE])
        what = ("the CPU and CUDA op library for " + ", ".join(f"sm_{a}" for a in archs)
                + " (PTX: " + ", ".join(f"compute_{a}" for a in ptx) + ")")
    print(f"{what}: {'already built' if before else 'built'} in {folder}")
    if os.environ.get(_build.CACHE_VARIABLE):
        print(f"processes with {_build.CACHE_VARIABLE}={folder.parent} load it without "
              "compiling")
    else:
        print(f"processes without {_build.CACHE_VARIABLE} (the default cache, "
              f"{folder.parent}) load it without compiling")
    return 0


def _simulate(args) -> int:
    from .harness.simulate_cli import main as simulate_main

    return simulate_main(args)


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line on stderr (exit code 2) that names
    the bad value, not the whole usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _Help(argparse.HelpFormatter):
    """Every option's help ends with its default, where it has one."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("%(default)" in text or any(default is v for v in (None, False, argparse.SUPPRESS))
                or not action.option_strings):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        return f"{text} (default: {shown})"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    from .signature import FORMS

    form_names = list(FORMS)
    parser = _Parser(prog=prog, formatter_class=_Help,
                     description="The draft model's bookkeeping ops for MTP speculative decoding: "
                                 "check their registration, simulate a serving loop around them, "
                                 "time them. Exit codes: 0 done, 1 a check or simulation that "
                                 "FAILED, 2 a mistake (one line on stderr), 130 interrupted.")
    parser.add_argument("--version", action="version", version=f"fastdeploy_mtp {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    def command(name: str, help: str, more: str = "") -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help + more, formatter_class=_Help)

    bd = command("build", "build the op library once, before the processes that use it start "
                          "(tensor-parallel workers, a read-only install), so that none of them "
                          "compiles",
                 ": the CPU library, and with paddlepaddle-gpu and nvcc the CUDA kernels too. "
                 "Needs a C++ compiler (and nvcc for CUDA).")
    bd.add_argument("--arch", nargs="+", metavar="ARCH", default=None,
                    help="CUDA archs to compile for, such as 8.0 9.0 (default: this machine's "
                         "GPUs'); recorded in the cache, so that processes started later load "
                         "this build")
    bd.add_argument("--into", metavar="DIR", default=None,
                    help="the cache folder to build into (default: FASTDEPLOY_MTP_CACHE, else "
                         "~/.cache/fastdeploy_mtp); processes with FASTDEPLOY_MTP_CACHE=DIR "
                         "load from it, read-only or not")
    ck = command("check", "compare the ops Paddle registered with the signature table "
                          "(fastdeploy_mtp/signature.py); exit 1 on any difference")
    ck.add_argument("--form", choices=["all", *form_names], default="all",
                    help="which form's ops to check")
    sg = command("signature", "check that the generated C++ files (custom_ops/forms.h, "
                              "op_signatures.h, op_bindings.h, op_registrations.cc) are the "
                              "ones the signature table renders; exit 1 if not")
    sg.add_argument("--write", action="store_true",
                    help="render the headers from the table and write them, instead of checking")
    from .bench.cpu import ROUNDS
    from .harness.simulate_cli import add_arguments

    sim = command("simulate", "closed-loop simulation of a serving engine around the ops: do the "
                              "mask offsets stay right?",
                  " (With --draft-model, does the draft attend what a cache-free model does?) "
                  "Prints a row per engine step and a summary; exits 0 after 'OK: ...' if "
                  "nothing was violated, 1 after 'FAILED: ...' otherwise.")
    add_arguments(sim)
    from .harness.verdict import add_arguments as add_verdict_arguments

    vd = command("verdict", "the table of docs/results.md: FastDeploy's runner replayed around "
                            "each form, role and k with the tiny draft model and its oracle",
                 " (60 steps, batch 8, seed 0, image prob 0.5 each; the progress, a line "
                 "a row with its time, on stderr).")
    add_verdict_arguments(vd)
    from .harness.reproduce import add_arguments as add_reproduce_arguments

    rp = command("reproduce", "the smallest state that shows a drifting row of the verdict "
                              "table: one request, FastDeploy's runner's op calls on it, each "
                              "tensor before and after, the quantity that drifts and the "
                              "FastDeploy rule that causes it",
                 ". It exits 1 after 'FAILED: ...' when it shows a drift, 0 after 'OK: ...' for "
                 "a row that is exact.")
    add_reproduce_arguments(rp)
    b = command("bench", "per-call time of each op next to the numpy reference (on the CPU also "
                         "the proposer's batched insert)")
    b.add_argument("--device", choices=["cpu", "gpu"], default=None,
                   help="where the ops run (default: gpu where Paddle has CUDA and sees a GPU, "
                        "else cpu)")
    b.add_argument("--bsz", type=int, nargs="+", default=[1, 64, 512, 4096], metavar="N",
                   help="batch sizes (requests) to time")
    b.add_argument("--repeat", type=int, default=200, metavar="N", help="op calls timed per round")
    b.add_argument("--rounds", type=int, default=ROUNDS, metavar="R",
                   help="rounds, op and reference alternating (the median is shown)")
    command("bench-sim", "wall time of a 40-step simulation with the tiny draft model and its "
                         "cache-free oracle, next to the scripted draft")
    g = command("bench-gpu", "GPU latency of each op against the floor and a FastDeploy-shaped "
                             "baseline, and of a captured CUDA-graph step (paddlepaddle-gpu and "
                             "a GPU)")
    from .bench.gpu import CALL_BSZ

    g.add_argument("--bsz", type=int, nargs="+", default=None, metavar="N",
                   help="batch sizes of every table (default: "
                        f"{' '.join(map(str, CALL_BSZ))} for the calls, each captured-step "
                        "table its own)")
    g.add_argument("--calls", type=int, default=300, metavar="N", help="calls timed per round")
    g.add_argument("--rounds", type=int, default=7, metavar="R",
                   help="interleaved rounds of every table (the median is shown)")
    g.add_argument("--graph-only", action="store_true", help="only the captured-step tables")
    g.add_argument("--form", choices=form_names, default="rollback",
                   help="FastDeploy's form of draft_model_preprocess; another than rollback "
                        "times its captured step against FastDeploy's launch of it, and "
                        "a corrected form's against the exact form it corrects")
    d = command("doctor", "what the FastDeploy plugin will do here, a finding a line: "
                          "FastDeploy and its ops, the form and mode, FD_PLUGINS, the op "
                          "library; run it in FastDeploy's environment",
                " It exits 0 when the plugin will work as intended, 1 otherwise.")
    d.add_argument("--json", action="store_true", help="the findings as one JSON document")
    return parser


def _doctor(args) -> int:
    from .doctor import main as doctor_main

    return doctor_main(args)


COMMANDS = {"doctor": _doctor, "build": _build_library, "check": _check, "signature": _signature,
            "bench": _bench, "bench-gpu": _bench_gpu,
            "bench-sim": _bench_sim, "simulate": _simulate, "verdict": _verdict,
            "reproduce": _reproduce}


def _refuse(message: str) -> int:
    print(ERROR + " ".join(message.split()), file=sys.stderr)
    return 2


def main(argv=None, prog: str = PROG) -> int:
    """Run the command `argv` names; its exit code. A mistake or a missing
    piece (no Paddle, a library that cannot be built) is one line on stderr
    and 2; any other exception is a bug, and keeps its traceback."""
    try:
        args = build_parser(prog).parse_args(argv)
    except SystemExit as stop:  # --help, --version (0) or a mistake (2), already printed
        return stop.code
    try:
        # FASTDEPLOY_MTP_FORM is not read here: each command's --form (and
        # the default its --help shows) decides the form it runs.
        return COMMANDS[args.command](args)
    except BuildError as e:
        return _refuse(str(e))
    except ModuleNotFoundError as e:
        if e.name != "paddle":
            raise
        return _refuse(PADDLE_MISSING)


def _run(prog: str = PROG) -> int:
    """main() as a program: Ctrl-C ends it with one line and 130, a reader
    that stops reading (``| head``) ends it quietly, as for any command-line
    tool, and Paddle's import-time warning that ccache is missing (its
    extension builder's concern, not a user's) is not shown. A library may not
    change its host's warnings; a program may."""
    import warnings

    warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)
    try:
        code = main(prog=prog)
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print("fastdeploy_mtp: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except BrokenPipeError:
        # Python would flush stdout again at exit and report the pipe once
        # more; point it at nothing first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def console() -> int:
    """The console script ``fastdeploy-mtp``: the same program under its own name."""
    return _run(prog=CONSOLE_PROG)


if __name__ == "__main__":
    sys.exit(_run())
