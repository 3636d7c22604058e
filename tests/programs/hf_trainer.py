"""A Hugging Face Trainer script (tiny GPT-2 from a config, random tokens: no downloads) made
preemption-safe with hpcflow's callback. Rank 0 prints ``hf-done {"params_sha256", ...}``."""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from hpcflow.runtime import Run, params_sha256
from hpcflow.runtime.hf import HpcflowCallback, latest_checkpoint


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seq_len: int = 16, vocab: int = 64) -> None:
        data = torch.Generator().manual_seed(7)
        self.ids = torch.randint(0, vocab, (n, seq_len), generator=data)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Slow(TrainerCallback):
    def __init__(self, step_time_s: float) -> None:
        self.step_time_s = step_time_s

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        time.sleep(self.step_time_s)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-time-s", type=float, default=0.0)
    args = parser.parse_args()

    with Run.from_env(torch_env=True) as run:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2,
                                           n_head=2))
        targs = TrainingArguments(
            output_dir=str(run.config.checkpoint_dir), max_steps=args.steps,
            per_device_train_batch_size=4, learning_rate=1e-3, save_strategy="no",
            logging_strategy="no", report_to=[], use_cpu=True, seed=0, data_seed=0,
            ddp_backend="gloo", dataloader_num_workers=0, disable_tqdm=True,
        )
        trainer = Trainer(model=model, args=targs, train_dataset=Tokens(64),
                          callbacks=[Slow(args.step_time_s), HpcflowCallback(run)])
        trainer.train(resume_from_checkpoint=latest_checkpoint(targs.output_dir))
        digest = params_sha256(trainer.model)
        if run.env.is_rank0:
            print("hf-done " + json.dumps({"params_sha256": digest,
                                           "step": trainer.state.global_step}), flush=True)


if __name__ == "__main__":
    main()
