"""The plugin's patches of FastDeploy's proposer (fastdeploy_mtp/plugin/patches):
each applied only to the code it was written for, never raising into
FastDeploy, and the chunk patch's own rule. The digests each patch lists are
checked against FastDeploy's source where FASTDEPLOY_SRC names a checkout
(a FastDeploy tree at one commit, ``git archive COMMIT``); without it those
tests skip."""

import ast
import dataclasses
import logging
import os
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from fastdeploy_mtp.plugin import patches
from fastdeploy_mtp.plugin.patches import Patch, chunk_next_token, chunk_next_token_v0, code_digest


def function(source: str):
    """The function a source defines, compiled from a file of its own, so
    that inspect can read its source back."""
    import importlib.util
    import tempfile

    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "m.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"patched_{abs(hash(source))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


ORIGINAL = """
def f(self, x):
    y = x + 1
    return y * 2
"""


def test_the_digest_ignores_comments_layout_and_docstring_but_not_code():
    same = function('''
    def f(self, x):
        """Words."""
        # a comment
        y = x + 1

        return y * 2  # another
    ''')
    one_line = function("""
    def f(self, x):
        y = x + 2
        return y * 2
    """)
    assert code_digest(function(ORIGINAL)) == code_digest(same)
    assert code_digest(function(ORIGINAL)) != code_digest(one_line)


def owner_with(method, name="Proposer"):
    module = types.ModuleType("fake_fastdeploy_module")
    module.Proposer = type(name, (), {"run": method})
    return module


def patch_of(original, seen):
    def wrap(fd_method):
        def run(self, x):
            seen.append(x)
            return fd_method(self, x) + 100
        return run
    return Patch("test-patch", "fake_fastdeploy_module", "Proposer", "run",
                 {code_digest(original): "abc1234"}, wrap, ("pr5738",))


def test_a_patch_applies_to_the_code_it_was_written_for():
    original, seen = function(ORIGINAL), []
    module = owner_with(original)
    level, line = patches.apply(patch_of(original, seen), module)
    assert level == logging.INFO and "as at abc1234" in line, line
    assert module.Proposer().run(3) == (3 + 1) * 2 + 100 and seen == [3]
    assert module.Proposer.run.__wrapped__ is original


def test_a_method_that_differs_by_one_line_is_left_alone_with_a_warning():
    written_for = function(ORIGINAL)
    theirs = function("""
    def f(self, x):
        y = x + 1
        return y * 3
    """)
    module = owner_with(theirs)
    level, line = patches.apply(patch_of(written_for, []), module)
    assert level == logging.WARNING and "not applied" in line and "not written for" in line
    assert module.Proposer.run is theirs and module.Proposer().run(3) == 12


def test_a_missing_class_or_method_is_a_warning():
    original = function(ORIGINAL)
    empty = types.ModuleType("fake_fastdeploy_module")
    assert patches.apply(patch_of(original, []), empty)[0] == logging.WARNING
    module = owner_with(original)
    del module.Proposer.run
    level, line = patches.apply(patch_of(original, []), module)
    assert level == logging.WARNING and "is not there" in line, line


def test_install_patches_a_module_imported_after_it(tmp_path, monkeypatch):
    """The proposer's module imported after the plugin's register: the finder
    patches it as it is imported, reporting the line then."""
    package = tmp_path / "later_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "proposer.py").write_text(ORIGINAL.replace("def f(self", "class Proposer:\n"
                                                          "    def run(self")
                                         .replace("\n    y", "\n        y")
                                         .replace("\n    return", "\n        return"))
    written_for = function(ORIGINAL)
    monkeypatch.syspath_prepend(str(tmp_path))
    reported = []
    import importlib.util

    spec = importlib.util.spec_from_file_location("later_probe", package / "proposer.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    patch = Patch("test-later", "later_pkg.proposer", "Proposer", "run",
                  {code_digest(probe.Proposer.run): "abc1234"},
                  patch_of(written_for, []).wrap, ("pr5738",))
    before = list(sys.meta_path)
    try:
        lines = patches.install(("pr5738",), report=lambda lvl, ln: reported.append((lvl, ln)),
                                patches=[patch])
        assert lines == [(logging.INFO, "patch test-later waits for later_pkg.proposer's import")]
        import later_pkg.proposer as proposer

        assert proposer.Proposer().run(3) == 108, reported
        assert [lvl for lvl, _ in reported] == [logging.INFO], reported
    finally:
        sys.meta_path[:] = before
        for name in ("later_pkg", "later_pkg.proposer"):
            sys.modules.pop(name, None)


def test_a_patch_of_runners_of_other_forms_is_not_installed():
    original = function(ORIGINAL)
    module = owner_with(original)
    sys.modules["fake_fastdeploy_module"] = module
    try:
        assert patches.install(("pr5245",), patches=[patch_of(original, [])]) == []
        assert module.Proposer.run is original
    finally:
        del sys.modules["fake_fastdeploy_module"]


def fastdeploy_tree(tmp_path, method_source=ORIGINAL, owner="Proposer"):
    """A FastDeploy package whose spec_decode/mtp.py defines `owner` with
    `method_source` (a function ``f``) as its method, and fails if imported."""
    package = tmp_path / "fastdeploy"
    (package / "spec_decode").mkdir(parents=True)
    body = textwrap.indent(textwrap.dedent(method_source), "    ")
    (package / "spec_decode" / "mtp.py").write_text(
        "raise SystemExit('imported')\n\n\nclass " + owner + ":\n" + body)
    return package


def source_patch(original, name="test-patch", module="fastdeploy.spec_decode.mtp"):
    return Patch(name, module, "Proposer", "f", {code_digest(original): "abc1234"},
                 lambda m: m, ("pr5738",))


def test_a_method_s_digest_read_from_its_file_is_its_code_digest(tmp_path):
    package = fastdeploy_tree(tmp_path)
    path = package / "spec_decode" / "mtp.py"
    assert patches.source_digest(path, "Proposer", "f") == code_digest(function(ORIGINAL))
    assert patches.source_digest(path, "Proposer", "other") is None
    assert patches.source_digest(path, "Other", "f") is None
    assert patches.source_digest(package / "nothing.py", "Proposer", "f") is None


def test_check_says_which_patches_fit_fastdeploy_s_source_without_importing_it(tmp_path):
    fits = fastdeploy_tree(tmp_path / "a")
    differs = fastdeploy_tree(tmp_path / "b", ORIGINAL.replace("y * 2", "y * 3"))
    original = function(ORIGINAL)
    # Two targets of one name: the second, in a module the tree lacks, is an
    # alternative (one that fits is enough).
    both = [source_patch(original), source_patch(original, module="fastdeploy.spec_decode.gone")]
    assert patches.check(("pr5738",), fits, both) == [
        (logging.INFO, "patch test-patch fits Proposer.f as at abc1234")]
    (level, line), = patches.check(("pr5738",), differs, both)
    assert level == logging.WARNING and "Proposer.f is code it was not written for" in line
    assert line.endswith("FastDeploy's own method stays"), line
    (level, line), = patches.check(("pr5738",), tmp_path / "none", both)
    assert level == logging.WARNING and "its module is not there" in line
    assert patches.check(("shadow",), fits, both) == []  # another form's runner
    (level, line), = patches.check(("pr5738",), fastdeploy_tree(tmp_path / "c", "x = 1\n"),
                                   both)
    assert level == logging.WARNING and "Proposer.f is not there" in line


def test_a_patch_is_not_installed_without_the_patch_it_needs(tmp_path):
    """A patch that notes what another writes: applied where the writer
    applies, refused with a WARNING line where the writer is refused (its
    notes would do nothing), by install and by check alike."""
    writer_code, noter_code = function(ORIGINAL), function(ORIGINAL.replace("* 2", "* 5"))
    digests = {"run": code_digest(writer_code), "note": code_digest(noter_code)}

    def wrap(method):
        return lambda self, x: method(self, x)

    noter = Patch("noter", "fake_fastdeploy_module", "Proposer", "note",
                  {digests["note"]: "abc1234"}, wrap, ("pr5738",), needs="writer")

    def writer(fits):
        return Patch("writer", "fake_fastdeploy_module", "Proposer", "run",
                     {digests["run" if fits else "note"]: "abc1234"}, wrap, ("pr5738",))

    for fits in (True, False):
        module = types.ModuleType("fake_fastdeploy_module")
        module.Proposer = type("Proposer", (), {"run": writer_code, "note": noter_code})
        sys.modules["fake_fastdeploy_module"] = module
        try:
            w, n = writer(fits), dataclasses.replace(noter)
            lines = patches.install(("pr5738",), patches=[n, w])  # the noter listed first
        finally:
            del sys.modules["fake_fastdeploy_module"]
        assert [line.split(" ")[1] for _, line in lines] == ["writer", "noter"], lines
        assert (lines[1][0] == logging.INFO) == fits, lines
        assert (getattr(module.Proposer.note, "fastdeploy_mtp_patch", None) == "noter") == fits
        if not fits:
            assert lines[1][1] == ("patch noter not applied: it needs patch writer, which "
                                   "does not apply; FastDeploy's own method stays")
    package = tmp_path / "fastdeploy"
    (package / "spec_decode").mkdir(parents=True)
    source = textwrap.dedent(ORIGINAL).replace("def f(", "def run(") + \
        textwrap.dedent(ORIGINAL.replace("* 2", "* 5")).replace("def f(", "def note(")
    (package / "spec_decode" / "mtp.py").write_text(
        "class Proposer:\n" + textwrap.indent(source, "    "))
    for fits in (True, False):
        w = dataclasses.replace(writer(fits), module="fastdeploy.spec_decode.mtp",
                                known={patches.source_digest(
                                    package / "spec_decode" / "mtp.py", "Proposer",
                                    "run" if fits else "note"): "abc1234"})
        n = dataclasses.replace(noter, module="fastdeploy.spec_decode.mtp",
                                known={patches.source_digest(
                                    package / "spec_decode" / "mtp.py", "Proposer",
                                    "note"): "abc1234"})
        lines = patches.check(("pr5738",), package, [n, w])
        assert [level for level, _ in lines] == [logging.INFO if fits else logging.WARNING] * 2
        assert fits or "it needs patch writer" in lines[1][1], lines


def test_a_patch_waiting_for_its_module_is_refused_there_when_its_writer_is(tmp_path,
                                                                             monkeypatch):
    """Both in a module imported after install: the writer's gate fails as
    the module is imported, and the noter is refused there, one WARNING line
    each."""
    package = tmp_path / "later_pair"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "proposer.py").write_text("class Proposer:\n" + textwrap.indent(
        textwrap.dedent(ORIGINAL).replace("def f(", "def run(")
        + textwrap.dedent(ORIGINAL).replace("def f(", "def note("), "    "))
    monkeypatch.syspath_prepend(str(tmp_path))
    note_digest = patches.source_digest(package / "proposer.py", "Proposer", "note")
    writer = Patch("writer", "later_pair.proposer", "Proposer", "run", {"0" * 16: "abc1234"},
                   lambda m: m, ("pr5738",))
    noter = Patch("noter", "later_pair.proposer", "Proposer", "note", {note_digest: "abc1234"},
                  lambda m: m, ("pr5738",), needs="writer")
    reported = []
    before = list(sys.meta_path)
    try:
        lines = patches.install(("pr5738",), report=lambda lvl, ln: reported.append((lvl, ln)),
                                patches=[noter, writer])
        assert [lvl for lvl, _ in lines] == [logging.INFO, logging.INFO], lines  # both wait
        import later_pair.proposer as proposer

        assert not hasattr(proposer.Proposer.note, "fastdeploy_mtp_patch")
        assert [lvl for lvl, _ in reported] == [logging.WARNING, logging.WARNING], reported
        assert "it needs patch writer" in reported[1][1], reported
    finally:
        sys.meta_path[:] = before
        for name in ("later_pair", "later_pair.proposer"):
            sys.modules.pop(name, None)


# --- The chunk patch's rule ----------------------------------------------------

class Prefill:
    value = "prefill"


class Decode:
    value = "decode"


def request(idx, start, end, prompt, output=(), task=Prefill):
    return types.SimpleNamespace(idx=idx, prefill_start_index=start, prefill_end_index=end,
                                 prompt_token_ids=list(prompt), output_token_ids=list(output),
                                 task_type=task)


@pytest.fixture
def prefill_is(monkeypatch):
    monkeypatch.setattr(chunk_next_token, "_prefill_value", lambda: "prefill")


def test_a_chunk_before_the_prompt_s_end_notes_the_next_token(prefill_is):
    prompt = [10 + j for j in range(20)]
    reqs = [request(3, 0, 8, prompt), request(5, 8, 20, prompt), request(6, 16, 20, prompt, [99]),
            request(7, 0, 8, prompt, task=Decode)]
    got = chunk_next_token.chunk_next_tokens(reqs, lambda r: r.idx, decode_node=False)
    # [0, 8): its last input (column 7) is the prompt's token 8; [8, 20) ends
    # the prompt, [16, 20) with an output token after it is a re-prefill that
    # is not the last: its next token is the output's; a decode task: none.
    assert got == {3: (7, 18), 6: (3, 99)}
    assert chunk_next_token.chunk_next_tokens(reqs, lambda r: r.idx, decode_node=True) == {}


def test_the_noted_tokens_are_written_after_the_preprocess_and_forgotten(prefill_is):
    """The wrappers around FastDeploy's methods, on a stand-in proposer: the
    insert notes, the preprocess method's wrapper writes after it ran."""
    prompt = list(range(100, 116))

    class Proposer:
        def __init__(self):
            self.model_inputs = {"input_ids": np.zeros((4, 16), np.int64)}
            self.fd_config = types.SimpleNamespace(
                scheduler_config=types.SimpleNamespace(splitwise_role="mixed"))

        def insert_tasks_v1(self, req_dicts, num_running_requests):
            for r in req_dicts:  # the chunk shifted by one, as FastDeploy's insert does
                n = r.prefill_end_index - r.prefill_start_index
                self.model_inputs["input_ids"][r.idx, :n - 1] = \
                    prompt[r.prefill_start_index + 1:r.prefill_end_index]
            return "inserted"

        def _prepare_inputs(self, hidden):
            self.model_inputs["input_ids"][1, 7] = -5  # the preprocess's sample
            return "prepared"

    insert = chunk_next_token._wrap_insert(Proposer.insert_tasks_v1)
    prepare = chunk_next_token._wrap_preprocess(Proposer._prepare_inputs)
    p = Proposer()
    assert insert(p, [request(1, 0, 8, prompt)], 1) == "inserted"
    assert prepare(p, None) == "prepared"
    np.testing.assert_array_equal(p.model_inputs["input_ids"][1, :8], prompt[1:9])
    assert getattr(p, chunk_next_token.PENDING) == {}
    assert prepare(p, None) == "prepared"  # nothing noted: the sample stays
    assert p.model_inputs["input_ids"][1, 7] == -5


def test_the_wrappers_never_raise_into_fastdeploy(prefill_is, caplog):
    class Broken:
        model_inputs = {}  # no input_ids to write into
        fd_config = None   # no role to read

        def insert_tasks_v1(self, req_dicts, num_running_requests):
            return "inserted"

        def _prepare_inputs(self, hidden):
            return "prepared"

    b = Broken()
    with caplog.at_level(logging.WARNING, logger="fastdeploy_mtp"):
        assert chunk_next_token._wrap_insert(Broken.insert_tasks_v1)(
            b, [request(0, 0, 4, range(9))], 1) == "inserted"
        setattr(b, chunk_next_token.PENDING, {0: (3, 4)})
        assert chunk_next_token._wrap_preprocess(Broken._prepare_inputs)(b, None) == "prepared"
    assert len(caplog.records) == 2 and all(r.levelname == "WARNING" for r in caplog.records)


# --- The v0 scheduler's chunk path ----------------------------------------------

def v0_request(idx, prompt, chunks, role=None, chunk_idx=0):
    return types.SimpleNamespace(idx=idx, prompt_token_ids=list(prompt), prefill_chunk_info=chunks,
                                 chunk_idx=chunk_idx,
                                 disaggregate_info=None if role is None else {"role": role})


def test_the_v0_insert_notes_its_first_chunk_unless_it_is_the_prompt_s_last():
    prompt = [10 + j for j in range(20)]
    first = chunk_next_token_v0.first_chunk
    assert first(v0_request(0, prompt, [8, 8, 4])) == (7, 18)
    assert first(v0_request(0, prompt, [20])) is None  # the whole prompt in one chunk
    # A list of one chunk short of the prompt: FastDeploy's runner decodes
    # after it (gpu_model_runner.py 9018ccf74 line 2078), from the base
    # model's sample, which stays.
    assert first(v0_request(0, prompt, [8])) is None
    assert first(v0_request(0, prompt, None)) is None  # no chunks
    assert first(v0_request(0, prompt, [8, 12], role="decode")) is None
    assert first(v0_request(0, prompt, [8, 12], role="prefill")) == (7, 18)


def test_a_v0_chunk_notes_its_next_token_unless_it_is_the_prompt_s_last():
    prompt = [10 + j for j in range(20)]
    later = chunk_next_token_v0.later_chunk
    # chunk_idx is the chunk update_task_chunk_prefill sets up: [8, 16) is
    # followed by the prompt's token 16; [16, 20) is the last; past it, the
    # first decode.
    assert later(v0_request(0, prompt, [8, 8, 4], chunk_idx=1)) == (7, 26)
    assert later(v0_request(0, prompt, [3, 5, 12], chunk_idx=1)) == (4, 18)
    assert later(v0_request(0, prompt, [8, 8, 4], chunk_idx=2)) is None
    assert later(v0_request(0, prompt, [8, 8, 4], chunk_idx=3)) is None


class _Inputs(dict):
    """A proposer's buffers, by name as FastDeploy's code reads them."""


class V0Proposer:
    """FastDeploy's two v0 methods as they write the draft's inputs (mtp.py
    9018ccf74 lines 654-665 and 1110-1128), and a preprocess that puts the
    base model's sample at each prefill's last input (lines 204-213 of the
    kernel)."""

    def __init__(self, chunked=True, index=None):
        self.model_inputs = _Inputs(input_ids=np.zeros((4, 24), np.int64),
                                    seq_lens_encoder=np.zeros(4, np.int64))
        if index is not None:  # a batch that may reorder (2178f2829)
            self.model_inputs.get_index_by_batch_id = index
        self.cache_config = types.SimpleNamespace(enable_chunked_prefill=chunked)

    def insert_prefill_inputs(self, req_dicts, num_running_requests):
        ids, enc = self.model_inputs["input_ids"], self.model_inputs["seq_lens_encoder"]
        for r in req_dicts:
            n = len(r.prompt_token_ids)
            ids[r.idx, :n - 1] = r.prompt_token_ids[1:]
            enc[r.idx] = r.prefill_chunk_info[0] if self.cache_config.enable_chunked_prefill else n
        return "inserted"

    def update_task_chunk_prefill(self, task):
        ids, enc = self.model_inputs["input_ids"], self.model_inputs["seq_lens_encoder"]
        index = getattr(self.model_inputs, "get_index_by_batch_id", None)
        slot = index(task.idx) if index else task.idx
        chunks, i = task.prefill_chunk_info, task.chunk_idx
        start = sum(chunks[:i])
        if i < len(chunks):
            size = chunks[i] if i < len(chunks) - 1 else chunks[i] - 1
            ids[slot, :size] = task.prompt_token_ids[start + 1:start + size + 1]
            enc[slot] = chunks[i]
        else:
            enc[slot] = 0
        return "updated"

    def _prepare_inputs(self, hidden):
        ids, enc = self.model_inputs["input_ids"], self.model_inputs["seq_lens_encoder"]
        for b in np.nonzero(enc)[0]:
            ids[b, enc[b] - 1] = -5
        return "prepared"


def _v0_wrapped():
    insert = chunk_next_token_v0._wrap_insert(V0Proposer.insert_prefill_inputs)
    update = chunk_next_token_v0._wrap_chunk(V0Proposer.update_task_chunk_prefill)
    prepare = chunk_next_token._wrap_preprocess(V0Proposer._prepare_inputs)
    return insert, update, prepare


def test_each_v0_chunk_s_last_draft_input_is_the_prompt_s_next_token_after_the_preprocess():
    """A 20-token prompt in chunks of 8, 8 and 4 through the wrapped methods,
    in the runner's order (insert, preprocess; then per chunk: update,
    preprocess): after each preprocess the chunk's inputs are the prompt's
    next tokens, the last chunk's last input the base model's sample."""
    prompt = list(range(100, 120))
    insert, update, prepare = _v0_wrapped()
    p = V0Proposer()
    ids = p.model_inputs["input_ids"]
    task = v0_request(2, prompt, [8, 8, 4])
    assert insert(p, [task], 3) == "inserted"
    assert prepare(p, None) == "prepared"
    np.testing.assert_array_equal(ids[2, :8], prompt[1:9])
    for i, (start, size) in enumerate([(8, 8), (16, 4)], start=1):
        task.chunk_idx = i
        assert update(p, task) == "updated"
        assert prepare(p, None) == "prepared"
        last = i == 2
        want = prompt[start + 1:start + size + (0 if last else 1)] + ([-5] if last else [])
        np.testing.assert_array_equal(ids[2, :size], want)
    assert getattr(p, chunk_next_token.PENDING) == {}


def test_the_v0_wrappers_note_nothing_without_chunks_and_follow_the_slot_index():
    prompt = list(range(100, 120))
    insert, update, prepare = _v0_wrapped()
    p = V0Proposer(chunked=False)
    insert(p, [v0_request(1, prompt, [8, 12])], 2)
    assert getattr(p, chunk_next_token.PENDING, {}) == {}
    p = V0Proposer()
    setattr(p, chunk_next_token.PENDING, {1: (3, 7), 2: (5, 9)})
    insert(p, [v0_request(1, prompt, [20])], 2)  # a new request in slot 1
    assert getattr(p, chunk_next_token.PENDING) == {2: (5, 9)}
    q = V0Proposer(index=lambda idx: 3 - idx)  # a batch whose rows are not its ids
    update(q, v0_request(1, prompt, [8, 8, 4], chunk_idx=1))
    assert getattr(q, chunk_next_token.PENDING) == {2: (7, 116)}


def test_the_v0_wrappers_never_raise_into_fastdeploy(caplog):
    class Broken:
        cache_config = None  # no chunked-prefill switch to read
        model_inputs = None

        def insert_prefill_inputs(self, req_dicts, num_running_requests):
            return "inserted"

        def update_task_chunk_prefill(self, task):
            return "updated"

    b = Broken()
    with caplog.at_level(logging.WARNING, logger="fastdeploy_mtp"):
        assert chunk_next_token_v0._wrap_insert(Broken.insert_prefill_inputs)(
            b, [v0_request(0, range(9), [4, 5])], 1) == "inserted"
        assert chunk_next_token_v0._wrap_chunk(Broken.update_task_chunk_prefill)(
            b, types.SimpleNamespace(idx=0)) == "updated"
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"], caplog.records
    assert getattr(b, chunk_next_token.PENDING, {}) == {}


def test_the_v0_patches_go_with_the_forms_of_the_runners_that_call_them():
    names = {p.name for p in patches._all() if "pr5738" in p.forms}
    assert {"chunk-next-token-v0 (insert)", "chunk-next-token-v0 (chunk)"} <= names
    assert not any("v0" in p.name for p in patches._all() if "shadow" in p.forms)


# --- Against FastDeploy's own source --------------------------------------------

SRC = os.environ.get("FASTDEPLOY_SRC", "")
needs_src = pytest.mark.skipif(not SRC, reason="FASTDEPLOY_SRC names no FastDeploy checkout")


def method_digest(path: Path, owner: str, method: str):
    import hashlib

    tree = ast.parse(path.read_text())
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == owner:
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == method:
                    body = fn.body
                    if body and isinstance(body[0], ast.Expr) and \
                            isinstance(getattr(body[0], "value", None), ast.Constant):
                        fn.body = body[1:]
                    return hashlib.sha256(ast.dump(fn).encode()).hexdigest()[:16]
    return None


@needs_src
def test_each_patch_fits_the_checkout_s_method_or_says_why_not():
    """For the FastDeploy checkout FASTDEPLOY_SRC names: every patch target
    whose method is there hashes to a digest the patch lists, or is one the
    patch refuses (a version not read)."""
    root = Path(SRC)
    assert (root / "fastdeploy").is_dir(), f"{SRC} is no FastDeploy tree"
    found = 0
    for patch in patches._all():
        path = root / (patch.module.replace(".", "/") + ".py")
        if not path.exists():
            continue
        digest = method_digest(path, patch.owner, patch.method)
        if digest is not None and digest in patch.known:
            found += 1
    assert found >= 2, "neither the insert nor the preprocess method is one the patch was read at"
    forms = {f for p in patches._all() for f in p.forms}
    fitting = [line for form in sorted(forms)
               for level, line in patches.check((form,), root / "fastdeploy")
               if level == logging.INFO]
    assert len(fitting) >= 2, "check finds none of the patches fitting the tree"
    runner = (root / "fastdeploy" / "worker" / "gpu_model_runner.py").read_text()
    if "update_task_chunk_prefill(" in runner:  # the runner calls the v0 chunk path
        fits = [p.name for p in chunk_next_token_v0.PATCHES
                if method_digest(root / "fastdeploy/spec_decode/mtp.py", p.owner, p.method)
                in p.known]
        assert len(fits) == 2, f"the v0 chunk path's methods are not the ones read: {fits}"
        # ... and the preprocess method that writes their notes back.
        lines = patches.check(("pr5738",), root / "fastdeploy")
        assert len(lines) == 4 and all(level == logging.INFO for level, _ in lines), lines
