"""Peak memory of a command and its child processes, as the machine sees it:
``python tests/peak_memory.py COMMAND ...``.

Prints, on stderr after the command ends, the peak of the processes' summed
proportional set size (PSS: a page shared by several mappings or processes
counted once in all), of their summed resident set size (RSS: such a page
counted once per mapping, as ``/usr/bin/time -v``'s maximum resident set
size counts it), and of the rise of the machine's used memory (MemTotal -
MemAvailable) over its value at the start, sampled every 0.2 s. Exits with
the command's exit code. tests/test_huge_requests.py is where the two differ:
its harness maps one 64 MiB memory file over and over."""

import subprocess
import sys
import time


def _meminfo() -> dict:
    with open("/proc/meminfo") as f:
        return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f)}


def _used_kib() -> int:
    m = _meminfo()
    return m["MemTotal"] - m["MemAvailable"]


def _tree(pid: int) -> list:
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                              text=True).stdout.split()
    return [pid] + [q for c in map(int, children) for q in _tree(c)]


def _sizes(pids) -> tuple:
    pss = rss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1])
        except OSError:  # ended between the listing and the read
            pass
    return pss, rss


def main(argv) -> int:
    if not argv:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    start = _used_kib()
    proc = subprocess.Popen(argv)
    peak_pss = peak_rss = peak_rise = 0
    while proc.poll() is None:
        pss, rss = _sizes(_tree(proc.pid))
        peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
        peak_rise = max(peak_rise, _used_kib() - start)
        time.sleep(0.2)
    gib = 1024 * 1024
    print(f"peak PSS {peak_pss / gib:.2f} GiB, peak RSS {peak_rss / gib:.2f} GiB, peak rise of "
          f"the machine's used memory {peak_rise / gib:.2f} GiB", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
