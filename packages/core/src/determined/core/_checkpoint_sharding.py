"""How ranks share the work of one checkpoint: who uploads which file, and what local ranks download.

Both decisions are collectives: every rank (or every local rank) calls in the same order and reaches
the same answer, so no rank uploads a file twice and no local rank downloads what another fetched.
"""

from __future__ import annotations

import hashlib
import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from determined.core._distributed import DistributedContext
    from determined.storage import StorageManager

Selector = Callable[[str], bool]
METADATA_FILE = "metadata.json"


def list_resources(storage: StorageManager, root: pathlib.Path) -> dict[str, int]:
    """``{relpath: size}`` of the files and directories under ``root`` (directories end in ``/``)."""
    return dict(storage.list_directory(root))


def select_resources(resources: dict[str, int], selector: Selector | None) -> dict[str, int]:
    """The entries of ``resources`` that ``selector`` keeps (all of them without a selector)."""
    if selector is None:
        return resources
    return {path: size for path, size in resources.items() if selector(path)}


def _md5(path: pathlib.Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def plan_sharded_upload(
    dist: DistributedContext,
    storage: StorageManager,
    root: pathlib.Path | None,
    selector: Selector | None,
) -> dict[str, int]:
    """The files this rank uploads of a sharded checkpoint; every rank must call, in step.

    Ranks pointing at one directory upload it once (the lowest rank does), unless they use selectors;
    a file held by several ranks is uploaded by the lowest of them. RuntimeError on every rank when a
    path is a file on one rank and a directory on another, or when two ranks' copies differ.
    """
    identity = None
    listing: dict[str, int] = {}
    if root is not None:
        st = root.stat()
        identity = (st.st_dev, st.st_ino)
        listing = select_resources(list_resources(storage, root), selector)
        listing.pop(METADATA_FILE, None)
    identities = dist.allgather((identity, selector is not None))
    if identity is not None and selector is None:
        first = next(r for r, (ident, _) in enumerate(identities) if ident == identity)
        if first != dist.rank:
            listing = {}
    listings = dist.allgather(listing)
    owners: dict[str, list[int]] = {}
    for rank, other in enumerate(listings):
        for path in other:
            owners.setdefault(path, []).append(rank)
    errors = []
    dirs = {p for p in owners if p.endswith("/")}
    for path in owners:
        if not path.endswith("/") and path + "/" in dirs:
            errors.append(f"{path} is a file on one rank and a directory on another")
    shared = sorted(p for p, ranks in owners.items() if len(ranks) > 1 and not p.endswith("/"))
    digests: dict[str, str] = {}
    if root is not None:
        digests = {p: _md5(root / p) for p in shared if p in listing}
    all_digests = dist.allgather(digests)
    for path in shared:
        if len({d[path] for d in all_digests if path in d}) > 1:
            errors.append(f"{path} differs between ranks {owners[path]}")
    if errors:
        raise RuntimeError("refusing to upload with files conflicts: " + "; ".join(sorted(errors)))
    return {p: s for p, s in listing.items() if owners[p][0] == dist.rank}


def shared_download_selector(
    dist: DistributedContext, storage: StorageManager, storage_id: str, selector: Selector | None
) -> Selector | None:
    """One selector for every local rank: a file is fetched when any local rank wants it.

    Every local rank must call, in step; ``None`` when no local rank passed a selector.
    """
    any_selector = any(dist.allgather_local(selector is not None))
    if not any_selector:
        return None
    candidates = None
    if dist.local_rank == 0:
        candidates = sorted(storage.list_files(storage_id))
    candidates = dist.broadcast_local(candidates)
    mine = {p for p in candidates if selector is None or selector(p)}
    union: set[str] = set().union(*dist.allgather_local(mine))
    return lambda path: path in union
