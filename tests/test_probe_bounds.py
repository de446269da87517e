"""tests/probe_bounds.py cuts parts out of the mask kernel by their text: a
refactor of the kernel that moves that text must fail here, not leave the
tool measuring nothing."""

import probe_bounds
import pytest


def kernel_text():
    return (probe_bounds.REPO / probe_bounds.MASK_KERNEL).read_text()


@pytest.mark.parametrize("bound", probe_bounds.BOUNDS, ids=lambda b: b.name)
def test_every_bound_cuts_exactly_its_part(bound):
    text = kernel_text()
    cut = probe_bounds.cut_source(bound, text)
    for original, _ in bound.edits:
        assert original not in cut
    assert len(text) - len(cut) == sum(len(o) - len(c) for o, c in bound.edits)


def test_a_bound_whose_text_moved_is_refused():
    for b in probe_bounds.BOUNDS:
        for original, _ in b.edits:
            with pytest.raises(ValueError, match="not in .* exactly once"):
                probe_bounds.cut_source(b, kernel_text().replace(original, ""))
            with pytest.raises(ValueError, match="exactly once"):
                probe_bounds.cut_source(b, kernel_text() + original)


def test_the_names_are_unique():
    names = [b.name for b in probe_bounds.BOUNDS]
    assert len(set(names)) == len(names)
