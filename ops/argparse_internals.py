"""The one private part of argparse the project relies on, here alone: a parser's ``_actions``, to take back the
type check of an option another package's command added (argparse has no public way to find an option by its
destination). tests/test_argparse_internals.py fails when argparse changes it."""

from argparse import ArgumentParser


def take_as_given(parser: ArgumentParser, dest: str) -> None:
    """The option stored under ``dest`` takes its value as it is written, without the type its adder gave it."""
    found = [action for action in parser._actions if action.dest == dest]
    if not found:
        raise LookupError(f"the parser has no option stored under {dest!r}")
    for action in found:
        action.type = str
