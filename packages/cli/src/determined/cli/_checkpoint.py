"""``det checkpoint`` (alias ``c``): describe, download and delete checkpoints."""

from __future__ import annotations

import argparse
import json
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._download import MODES, download_checkpoint


def get_checkpoint(args: argparse.Namespace, uuid: str) -> dict[str, Any]:
    """The master's record of checkpoint ``uuid``."""
    return dict(_session.api(args).checkpoints.get(uuid).get("checkpoint") or {})


def render_checkpoint(checkpoint: dict[str, Any], path: str | None = None) -> None:
    """The one-row table upstream prints for a checkpoint (after its local path, if any)."""
    if path:
        print("Local checkpoint path:")
        print(path, "\n")
    training = checkpoint.get("training") or {}
    metadata = checkpoint.get("metadata") or {}
    validation = (training.get("validationMetrics") or {}) if training else None
    rows = [
        ("Experiment ID", training.get("experimentId")),
        ("Trial ID", training.get("trialId")),
        ("Steps Completed", metadata.get("steps_completed")),
        ("Report Time", _render.format_time(checkpoint.get("reportTime"))),
        ("Checkpoint UUID", checkpoint.get("uuid")),
        ("Validation Metrics", json.dumps(validation, indent=4) if training else None),
        ("Metadata", json.dumps(metadata, indent=4)),
    ]
    _render.print_table([r[0] for r in rows], [[r[1] for r in rows]])


def describe(args: argparse.Namespace) -> None:
    checkpoint = get_checkpoint(args, args.uuid)
    if args.json:
        _render.print_json(checkpoint)
        return
    render_checkpoint(checkpoint)


def download(args: argparse.Namespace) -> None:
    checkpoint = get_checkpoint(args, args.uuid)
    path = download_checkpoint(_session.setup_session(args), checkpoint, args.output_dir, args.mode)
    if args.quiet:
        print(path)
    else:
        render_checkpoint(checkpoint, str(path))


def delete(args: argparse.Namespace) -> None:
    uuids = [u.strip() for u in args.checkpoints_uuids.split(",") if u.strip()]
    if args.yes or _render.yes_or_no(
        "Deleting checkpoints will result in deletion of all data associated\n"
        "with each checkpoint in the checkpoint storage. Do you still want to proceed?"
    ):
        _session.api(args).checkpoints.delete(uuids)
        print(f"Deletion of checkpoints {','.join(uuids)} is in progress")
    else:
        print("Stopping deletion of checkpoints.")


def remove_files(args: argparse.Namespace) -> None:
    uuids = [u.strip() for u in args.checkpoints_uuids.split(",") if u.strip()]
    if (
        args.yes
        or not args.glob
        or _render.yes_or_no(
            "All files matching specified globs will be deleted in all checkpoints provided\n"
            "in checkpoint storage. Do you still want to proceed?"
        )
    ):
        _session.api(args).checkpoints.remove_files(uuids, args.glob)
        if args.glob:
            print(f"Removal of files from checkpoints {','.join(uuids)} is in progress.")
        else:
            print(
                "No glob patterns provided, "
                f"refreshing resources of checkpoints {','.join(uuids)} is in progress."
            )
    else:
        print("Stopping removal of files from checkpoints.")


COMMANDS = [
    Cmd(
        "c|heckpoint",
        None,
        "manage checkpoints",
        [
            Cmd(
                "describe",
                describe,
                "describe checkpoint",
                [
                    Arg("uuid", help="checkpoint uuid to describe"),
                    Arg("--json", action="store_true", help="print as JSON"),
                ],
            ),
            Cmd(
                "download",
                download,
                "download checkpoint from persistent storage",
                [
                    Arg("uuid", help="the UUID of the checkpoint to download"),
                    Arg("-o", "--output-dir", help="directory to download the checkpoint into"),
                    Arg("-q", "--quiet", action="store_true", help="only print the path"),
                    Arg(
                        "--mode",
                        choices=MODES,
                        default="auto",
                        help="'direct': read the checkpoint storage from here; 'master': download "
                        "through the master; 'auto': direct, else through the master",
                    ),
                ],
            ),
            Cmd(
                "delete",
                delete,
                "delete checkpoints",
                [
                    Arg("checkpoints_uuids", help="comma-separated list of checkpoints to delete"),
                    Arg("--yes", action="store_true", help="automatically answer yes to prompts"),
                ],
            ),
            Cmd(
                "rm",
                remove_files,
                "remove files from checkpoints",
                [
                    Arg("checkpoints_uuids", help="comma-separated list of checkpoints"),
                    Arg(
                        "--glob",
                        action="append",
                        default=[],
                        help="files to delete (repeat for several); none: refresh the recorded files",
                    ),
                    Arg("--yes", action="store_true", help="automatically answer yes to prompts"),
                ],
            ),
        ],
    )
]
