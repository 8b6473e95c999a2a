"""YAML text from users (experiment configs, templates, overrides), parsed defensively.

``yaml.safe_load`` constructs no Python objects, but it still (1) recurses once per nesting level,
so a document of 5,000 nested ``[`` ends in ``RecursionError``, and (2) shares aliased nodes, so a
"billion laughs" document of a few hundred bytes (each anchor a list of nine aliases of the
previous one) loads cheaply and then explodes when the master walks or serializes it. Here the
document is first composed into its node graph (linear in its size), the size it expands to is
counted with every alias followed (memoized, so counting stays linear too), and only a document
that expands to at most :data:`MAX_EXPANDED_NODES` nodes is constructed.
"""

from __future__ import annotations

from typing import Any

import yaml

from determined.master._wire import APIError

MAX_EXPANDED_NODES = 1_000_000
"""The most YAML nodes a document may expand to with its aliases followed."""


def _expanded_size(root: yaml.Node, field: str) -> int:
    """Nodes ``root`` stands for once every alias is expanded; 400 for a recursive alias."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if children_done:
            in_progress.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if key in in_progress:
            raise APIError(400, f"{field}: a YAML alias refers to a node that contains it")
        in_progress.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in in_progress:
                raise APIError(400, f"{field}: a YAML alias refers to a node that contains it")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def load_yaml(text: Any, field: str) -> Any:
    """``text`` parsed as YAML (safe tags only); APIError 400 naming ``field`` for text that is not
    a string, invalid YAML, nesting too deep to parse, recursive aliases, or aliases expanding
    past :data:`MAX_EXPANDED_NODES` nodes."""
    if not isinstance(text, str):
        raise APIError(400, f"{field}: must be YAML text, got {type(text).__name__}")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        raise APIError(400, f"{field}: invalid YAML: {e}") from None
    except RecursionError:
        raise APIError(400, f"{field}: the YAML document is nested too deeply") from None
    if node is None:
        return None
    if _expanded_size(node, field) > MAX_EXPANDED_NODES:
        raise APIError(
            400,
            f"{field}: the YAML document's aliases expand to more than {MAX_EXPANDED_NODES}"
            " nodes (an alias bomb)",
        )
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise APIError(400, f"{field}: invalid YAML: {e}") from None
    except RecursionError:
        raise APIError(400, f"{field}: the YAML document is nested too deeply") from None
