"""A declarative command tree on top of argparse, with upstream's alias rules.

A command name like ``"e|xperiment"`` is reachable as ``experiment`` and as its prefix ``e``;
extra words are plain aliases (``"list ls"``). A command marked ``default`` runs when its parent is
given no sub-command (``det e`` lists experiments, as upstream's does).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

Handler = Callable[[argparse.Namespace], Any]


@dataclasses.dataclass
class Arg:
    """One ``add_argument`` call: positional flags and keyword options as argparse takes them."""

    flags: tuple[str, ...]
    options: dict[str, Any]

    def __init__(self, *flags: str, **options: Any) -> None:
        self.flags = flags
        self.options = options


@dataclasses.dataclass
class Group:
    """Mutually exclusive options (``--json`` or ``--csv``, ``--head`` or ``--tail``)."""

    args: tuple[Arg, ...]
    required: bool = False

    def __init__(self, *args: Arg, required: bool = False) -> None:
        self.args = args
        self.required = required


@dataclasses.dataclass
class Cmd:
    """A command: ``name`` (with ``|`` prefixes and space-separated aliases), a handler (``None``
    for a group of sub-commands), the help line and its arguments or sub-commands."""

    name: str
    func: Handler | None
    help: str
    subs: Sequence[Node] = ()
    default: bool = False


Node = Arg | Group | Cmd


def names(spec: str) -> tuple[str, list[str]]:
    """``"e|xperiment list"`` -> ``("experiment", ["e", "list"])``: the main name and its aliases.

    Each word's ``|`` pieces accumulate into prefixes; the longest prefix of the first word is the
    main name.
    """
    expanded: list[str] = []
    for word in spec.split():
        pieces = word.split("|")
        prefix = ""
        for piece in pieces:
            prefix += piece
            expanded.append(prefix)
    first_word_count = len(spec.split()[0].split("|"))
    main = expanded[first_word_count - 1]
    aliases = [n for i, n in enumerate(expanded) if i != first_word_count - 1]
    return main, aliases


def _print_help(parser: argparse.ArgumentParser) -> Handler:
    def show(_args: argparse.Namespace) -> int:
        parser.print_help()
        return 0

    return show


def _run_default(subparser: argparse.ArgumentParser, func: Handler) -> Handler:
    def run(args: argparse.Namespace) -> Any:
        filled = subparser.parse_args([], namespace=args)
        return func(filled)

    return run


def add_nodes(parser: argparse.ArgumentParser, nodes: Sequence[Node], depth: int = 0) -> None:
    """Add ``nodes`` (arguments, exclusive groups and sub-commands) to ``parser``."""
    subparsers: Any = None
    for node in sorted(nodes, key=lambda n: n.name if isinstance(n, Cmd) else ""):
        if isinstance(node, Arg):
            parser.add_argument(*node.flags, **node.options)
        elif isinstance(node, Group):
            group = parser.add_mutually_exclusive_group(required=node.required)
            for arg in node.args:
                group.add_argument(*arg.flags, **arg.options)
        else:
            if subparsers is None:
                subparsers = parser.add_subparsers(metavar="sub" * depth + "command")
                helper = subparsers.add_parser("help", help="show help for this command")
                helper.set_defaults(func=_print_help(parser))
            main, aliases = names(node.name)
            sub = subparsers.add_parser(
                main,
                aliases=aliases,
                help=node.help,
                description=node.help,
                formatter_class=argparse.ArgumentDefaultsHelpFormatter,
            )
            sub.set_defaults(func=node.func, action_help=node.help)
            add_nodes(sub, node.subs, depth + 1)
            if node.default and node.func is not None:
                parser.set_defaults(func=_run_default(sub, node.func), action_help=node.help)
    if subparsers is not None and parser.get_default("func") is None:
        parser.set_defaults(func=_print_help(parser))
