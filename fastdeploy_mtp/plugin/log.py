"""The plugin's log: one line a decision, on the ``fastdeploy_mtp`` logger."""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "fastdeploy_mtp"

_log = logging.getLogger(LOGGER_NAME)


def say(level: int, line: str) -> None:
    """Logs `line` on the fastdeploy_mtp logger. FastDeploy configures only
    its own ``fastdeploy`` logger; importing Paddle gives the root logger a
    stderr handler. Where no handler at all would take the line, one on
    stderr is added to ours, so that it is seen."""
    if not _log.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        _log.addHandler(handler)
        if _log.getEffectiveLevel() > logging.INFO:
            _log.setLevel(logging.INFO)
    _log.log(level, line)


def first_line(text: str, limit: int = 300) -> str:
    lines = text.strip().splitlines()
    line = lines[0] if lines else "no message"
    return line if len(line) <= limit else line[:limit] + " ..."
