"""A Hugging Face Trainer under det: a tiny GPT-2 language model (built from a config, nothing
downloaded) learns a synthetic counting language, with DetCallback reporting metrics, storing
checkpoints and resuming after a pause.

Off-cluster: ``python train.py`` (checkpoints go to det's local storage).
On a master: ``det experiment create const.yaml .`` (or ``adaptive.yaml`` for an ASHA search).
"""

from __future__ import annotations

import argparse
import logging
import sys

import torch
import transformers

import determined as det
from determined.transformers import DetCallback

VOCAB = 32
SEQ_LEN = 16


class CountingData(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Sequences that count up by a random step modulo VOCAB: easy to learn, no download."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        start = torch.randint(0, VOCAB, (size, 1), generator=generator)
        step = torch.randint(1, 4, (size, 1), generator=generator)
        self.ids = (start + step * torch.arange(SEQ_LEN)) % VOCAB

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def build_model(hparams: dict) -> transformers.GPT2LMHeadModel:
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=SEQ_LEN,
        n_embd=int(hparams.get("n_embd", 32)),
        n_layer=2,
        n_head=2,
    )
    return transformers.GPT2LMHeadModel(config)


def main(core_context: det.core.Context, hparams: dict, max_steps: int) -> None:
    args = transformers.TrainingArguments(
        output_dir="hf-output",
        max_steps=max_steps,
        per_device_train_batch_size=8,
        learning_rate=float(hparams.get("learning_rate", 3e-3)),
        logging_steps=10,
        eval_strategy="steps",
        eval_steps=50,
        save_strategy="steps",
        save_steps=50,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=build_model(hparams),
        args=args,
        train_dataset=CountingData(512, seed=0),
        eval_dataset=CountingData(64, seed=1),
        callbacks=[DetCallback(core_context, args, user_data={"hparams": hparams})],
    )
    # DetCallback points resume_from_checkpoint at the trial's latest checkpoint, if any.
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=200)
    cli = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT, stream=sys.stdout)
    info = det.get_cluster_info()
    hparams = dict(info.trial.hparams) if info is not None else {}
    with det.core.init() as core_context:
        main(core_context, hparams, cli.max_steps)
