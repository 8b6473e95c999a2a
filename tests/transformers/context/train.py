"""A tiny BERT classifier (2 layers, built from a config: nothing downloaded) trained by the Hugging
Face Trainer on synthetic token ids, with det's DetCallback. The tests run it off-cluster (``main``)
and as an experiment's entrypoint (``python3 train.py``, hyperparameters from the trial).

``hold_at: N`` (a hyperparameter) makes the first run print HOLD_LINE after step N and wait there
until it is preempted, so a test can pause the trial at a step it chooses.
"""

from __future__ import annotations

import logging
import pathlib
import sys
import time
from typing import Any

import torch
import transformers

import determined as det
from determined.transformers import DetCallback

HOLD_LINE = "holding for a pause after step"
VOCAB = 24
SEQ_LEN = 8
DEFAULTS: dict[str, Any] = {"lr": 0.01, "max_steps": 16, "hold_at": None}


class TokenData(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Random token ids; the label says whether token 5 occurs more often than token 6."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(4, VOCAB, (size, SEQ_LEN), generator=generator)
        self.labels = ((self.ids == 5).sum(1) > (self.ids == 6).sum(1)).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[index],
            "attention_mask": torch.ones(SEQ_LEN, dtype=torch.long),
            "labels": self.labels[index],
        }


def build_model() -> transformers.PreTrainedModel:
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=SEQ_LEN,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=2,
    )
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(config)


class HoldForPause(transformers.TrainerCallback):  # type: ignore[misc]
    """After step ``hold_at`` of a run that starts from scratch, wait until preempted."""

    def __init__(self, core_context: det.core.Context, hold_at: int | None) -> None:
        self.core_context = core_context
        self.hold_at = hold_at
        info = det.get_cluster_info()
        self.first_run = info is None or info.latest_checkpoint is None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.hold_at is None or not self.first_run or state.global_step != self.hold_at:
            return
        print(f"{HOLD_LINE} {state.global_step}", flush=True)
        for _ in range(2400):  # a count, not a clock: gives up after about 4 minutes
            if self.core_context.preempt.should_preempt(auto_ack=False):
                return
            time.sleep(0.1)


def training_args(output_dir: str, hparams: dict[str, Any]) -> transformers.TrainingArguments:
    return transformers.TrainingArguments(
        output_dir=output_dir,
        max_steps=int(hparams["max_steps"]),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=16,
        learning_rate=float(hparams["lr"]),
        logging_steps=2,
        eval_strategy="steps",
        eval_steps=4,
        save_strategy="steps",
        save_steps=4,
        seed=3,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def main(core_context: det.core.Context, hparams: dict[str, Any], output_dir: str) -> None:
    hparams = {**DEFAULTS, **hparams}
    args = training_args(output_dir, hparams)
    callback = DetCallback(core_context, args, user_data={"lr": hparams["lr"]})
    trainer = transformers.Trainer(
        model=build_model(),
        args=args,
        train_dataset=TokenData(32, seed=1),  # 8 steps an epoch
        eval_dataset=TokenData(16, seed=2),
        callbacks=[HoldForPause(core_context, hparams["hold_at"]), callback],
    )
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT, stream=sys.stdout)
    info = det.get_cluster_info()
    hparams = dict(info.trial.hparams) if info is not None else {}
    with det.core.init() as core_context:
        main(core_context, hparams, str(pathlib.Path.cwd() / "hf-output"))
