"""ops/argparse_internals.py reaches into argparse's list of a parser's actions: an option's type, taken back there,
no longer checks what is written, and an unknown destination is said as such."""

from argparse import ArgumentParser

import pytest

from ops.argparse_internals import take_as_given


def test_an_options_type_is_taken_back():
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--backend", type=int, dest="backend_name", default="default")
    take_as_given(parser, "backend_name")
    assert parser.parse_args([]).backend_name == "default"
    assert parser.parse_args(["--backend", "database"]).backend_name == "database"


def test_an_unknown_destination_is_refused():
    with pytest.raises(LookupError):
        take_as_given(ArgumentParser(), "backend_name")
