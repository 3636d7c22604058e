"""A Hugging Face Trainer script made preemption-safe with hpcflow's callback.

A tiny GPT-2 built from a config (no download) learns random token sequences. The lines marked
``# hpcflow`` are what hpcflow adds. Run with ``hpcflow submit hf-trainer.yaml``.
"""

from __future__ import annotations

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from hpcflow.runtime import Run  # hpcflow
from hpcflow.runtime.hf import HpcflowCallback, latest_checkpoint  # hpcflow


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq_len: int = 32, vocab: int = 128) -> None:
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()

    with Run.from_env(torch_env=True) as run:  # hpcflow: joins; exports RANK, WORLD_SIZE, ...
        model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=64,
                                           n_layer=2, n_head=2))
        targs = TrainingArguments(
            output_dir=str(run.config.checkpoint_dir or "checkpoints"),  # hpcflow: the job's
            max_steps=args.steps, per_device_train_batch_size=8, learning_rate=1e-3,
            save_strategy="no",  # hpcflow saves on the job spec's interval and when preempted
            logging_strategy="no", report_to=[], use_cpu=not torch.cuda.is_available(),
        )
        trainer = Trainer(model=model, args=targs, train_dataset=RandomTokens(512),
                          callbacks=[HpcflowCallback(run)])  # hpcflow
        trainer.train(resume_from_checkpoint=latest_checkpoint(targs.output_dir))  # hpcflow


if __name__ == "__main__":
    main()
