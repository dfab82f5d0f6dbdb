"""course.stand_ins cuts each stand-in's text out of the setup cells as Python's own
ast.get_source_segment does (course._segment splits the setup once instead of once per cut)."""

from __future__ import annotations

import ast

import pytest

from autograder.course import ASSIGNMENTS, _segment, _source


@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if ASSIGNMENTS[a].source.is_file()])
def test_every_top_level_statement_of_the_setup_is_cut_as_python_cuts_it(assignment):
    setup = "\n\n".join(_source(assignment).setup)
    lines = setup.split("\n")
    for node in ast.parse(setup).body:
        assert _segment(lines, node) == ast.get_source_segment(setup, node)


def test_offsets_are_bytes_not_characters():
    source = 'x = "∂L/∂W"; y = 2\ndef f():\n    return "é"  # ∂\n'
    lines = source.split("\n")
    for node in ast.parse(source).body:
        assert _segment(lines, node) == ast.get_source_segment(source, node)
