"""``det experiment label`` and ``set``: change an experiment's labels, name, description, resources
and checkpoint GC policy."""

from __future__ import annotations

import argparse
import pprint
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError
from determined.cli._experiment_common import (
    experiment_id_arg,
    none_or_int,
)


def _patch(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    return _session.api(args).experiments.patch(args.experiment_id, body)


def add_label(args: argparse.Namespace) -> None:
    # One PUT of the label (upstream's route): two people labelling at once both keep theirs.
    _session.api(args).experiments.add_label(args.experiment_id, args.label)
    print(f"Added label '{args.label}' to experiment {args.experiment_id}")


def remove_label(args: argparse.Namespace) -> None:
    _session.api(args).experiments.remove_label(args.experiment_id, args.label)
    print(f"Removed label '{args.label}' from experiment {args.experiment_id}")


def set_description(args: argparse.Namespace) -> None:
    _patch(args, {"description": args.description})
    print(f"Set description of experiment {args.experiment_id} to '{args.description}'")


def set_name(args: argparse.Namespace) -> None:
    _patch(args, {"name": args.name})
    print(f"Set name of experiment {args.experiment_id} to '{args.name}'")


def set_max_slots(args: argparse.Namespace) -> None:
    _patch(args, {"resources": {"maxSlots": args.max_slots}})
    print(f"Set `max_slots` of experiment {args.experiment_id} to {args.max_slots}")


def set_weight(args: argparse.Namespace) -> None:
    _patch(args, {"resources": {"weight": args.weight}})
    print(f"Set `weight` of experiment {args.experiment_id} to {args.weight}")


def set_priority(args: argparse.Namespace) -> None:
    _patch(args, {"resources": {"priority": args.priority}})
    print(f"Set `priority` of experiment {args.experiment_id} to {args.priority}")


def set_gc_policy(args: argparse.Namespace) -> None:
    policy = {
        "save_experiment_best": args.save_experiment_best,
        "save_trial_best": args.save_trial_best,
        "save_trial_latest": args.save_trial_latest,
    }
    for name, value in policy.items():
        if value < 0:
            raise CliError(f"--{name.replace('_', '-')}: must be >= 0, got {value}")
    if args.yes or _render.yes_or_no(
        "Changing the checkpoint garbage collection policy of an experiment may result\n"
        "in the unrecoverable deletion of checkpoints.  Do you wish to proceed?"
    ):
        _patch(
            args,
            {
                "checkpointStorage": {
                    "saveExperimentBest": args.save_experiment_best,
                    "saveTrialBest": args.save_trial_best,
                    "saveTrialLatest": args.save_trial_latest,
                }
            },
        )
        print(f"Set GC policy of experiment {args.experiment_id} to\n{pprint.pformat(policy)}")
    else:
        print("Aborting operations.")


LABEL = Cmd(
    "label",
    None,
    "manage experiment labels",
    [
        Cmd("add", add_label, "add label", [experiment_id_arg(), Arg("label", help="label")]),
        Cmd(
            "remove",
            remove_label,
            "remove label",
            [experiment_id_arg(), Arg("label", help="label")],
        ),
    ],
)

SET = Cmd(
    "set",
    None,
    "set experiment attributes",
    [
        Cmd(
            "description",
            set_description,
            "set experiment description",
            [experiment_id_arg(), Arg("description", help="experiment description")],
        ),
        Cmd(
            "name",
            set_name,
            "set experiment name",
            [experiment_id_arg(), Arg("name", help="experiment name")],
        ),
        Cmd(
            "gc-policy",
            set_gc_policy,
            "set experiment GC policy",
            [
                experiment_id_arg(),
                Arg("--save-experiment-best", type=int, required=True),
                Arg("--save-trial-best", type=int, required=True),
                Arg("--save-trial-latest", type=int, required=True),
                Arg("--yes", action="store_true", help="answer yes to prompts"),
            ],
        ),
        Cmd(
            "max-slots",
            set_max_slots,
            "set `max_slots` of experiment",
            [experiment_id_arg(), Arg("max_slots", type=none_or_int, help="max slots")],
        ),
        Cmd(
            "weight",
            set_weight,
            "set `weight` of experiment",
            [experiment_id_arg(), Arg("weight", type=float, help="weight")],
        ),
        Cmd(
            "priority",
            set_priority,
            "set `priority` of experiment",
            [experiment_id_arg(), Arg("priority", type=int, help="priority")],
        ),
    ],
)
