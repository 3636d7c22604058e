"""Training text for the byte-level model: files, globs, a pre-tokenized ``.bin``, or the stdlib.

Every source becomes one flat token stream (a numpy array, memory-mapped for ``.bin``). A sample
is a window of ``L + 1`` tokens starting at a multiple of ``L``: the model reads ``tokens[:L]`` and
predicts ``tokens[1:]``. Which samples a step takes is the sampler's job
(:class:`hpcflow.runtime.sampler.ResumableSampler`), so the data position in a checkpoint is just
the sampler's ``(epoch, batch)``.

Sources (``--data``):

- ``stdlib`` (the default): the Python standard library's own ``.py`` files under
  ``sysconfig.get_paths()["stdlib"]``, in sorted path order, without ``site-packages`` /
  ``dist-packages``. Real text that exists on every machine with Python; it differs between
  Python versions, so compare runs on one interpreter.
- text files or globs, comma-separated (``"data/*.txt,notes.md"``), read as bytes in sorted order.
- one ``*.bin`` file of little-endian uint16 token ids (the nanoGPT / llm.c layout without a
  header), memory-mapped.

Shape legend: ``B`` samples, ``L`` sequence length.
"""

from __future__ import annotations

import glob
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpcflow.examples.choices import DEFAULT_MAX_BYTES, STDLIB

_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}


@dataclass(frozen=True)
class TokenData:
    """A token stream cut into fixed-length samples.

    Attributes:
        tokens: 1-D array of token ids (uint8 for text, uint16 for ``.bin``).
        seq_len: ``L``, tokens a sample feeds to the model.
        source: what was read, for logs (paths are not stored in checkpoints).
        num_files: files read.
    """

    tokens: Any
    seq_len: int
    source: str
    num_files: int

    @property
    def num_samples(self) -> int:
        """Whole windows of ``L + 1`` tokens starting at multiples of ``L``."""
        return max(0, (len(self.tokens) - 1) // self.seq_len)

    def batch(self, indices: Any, vocab_size: int) -> tuple[Any, Any]:
        """Inputs and targets of the samples ``indices``.

        Args:
            indices: sample indices, any integer sequence of length ``B``.
            vocab_size: the model's vocabulary; every id must be below it.

        Returns:
            ``(inputs_BL, targets_BL)``, int64 CPU tensors.

        Raises:
            ValueError: an index is out of range or a token id is not below ``vocab_size``.
        """
        import torch

        rows = []
        for index in [int(i) for i in indices]:
            if not 0 <= index < self.num_samples:
                raise ValueError(f"sample {index} is not in [0, {self.num_samples})")
            start = index * self.seq_len
            rows.append(np.asarray(self.tokens[start : start + self.seq_len + 1], dtype=np.int64))
        window_BL1 = torch.from_numpy(np.stack(rows))
        top = int(window_BL1.max())
        if top >= vocab_size:
            raise ValueError(
                f"{self.source}: token id {top} is not below the vocabulary size {vocab_size}; "
                "set a model with a larger vocabulary for this .bin"
            )
        return window_BL1[:, :-1].contiguous(), window_BL1[:, 1:].contiguous()


def stdlib_files() -> list[Path]:
    """The standard library's ``.py`` files in sorted order (no third-party packages)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in root.rglob("*.py"):
        if _SKIP_DIRS.isdisjoint(path.relative_to(root).parts) and path.is_file():
            files.append(path)
    return sorted(files)


def resolve_files(spec: str) -> list[Path]:
    """Files named by ``spec``: ``stdlib``, or comma-separated paths and globs, sorted.

    Raises:
        ValueError: the spec is empty, or a path or glob matches no file.
    """
    if spec == STDLIB:
        return stdlib_files()
    files: list[Path] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        matched = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
        if not matched:
            raise ValueError(f"--data {item!r} matches no file")
        files.extend(matched)
    if not files:
        raise ValueError(f"--data {spec!r} names no file; give paths, globs or 'stdlib'")
    return files


def load_tokens(spec: str, seq_len: int, max_bytes: int = DEFAULT_MAX_BYTES) -> TokenData:
    """Read the token stream ``spec`` names (cost: reads up to ``max_bytes`` of text, or maps a
    ``.bin`` without reading it).

    Args:
        spec: ``stdlib``, a ``.bin`` path, or text paths/globs (see the module docstring).
        seq_len: ``L``.
        max_bytes: text sources stop after this many bytes (files are taken whole, in order,
            and the last one is cut); ignored for ``.bin``.

    Returns:
        The tokens and their source description.

    Raises:
        ValueError: no file matches, a ``.bin`` has an odd byte count, or the data holds fewer
            than one sample of ``seq_len + 1`` tokens.
    """
    if seq_len < 1 or max_bytes < 1:
        raise ValueError(f"seq_len={seq_len} and max_bytes={max_bytes} must be positive")
    if spec.endswith(".bin") and "," not in spec:
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"--data {spec!r}: no such file")
        if path.stat().st_size % 2:
            raise ValueError(f"{spec}: {path.stat().st_size} bytes is not a whole number of uint16")
        data = TokenData(np.memmap(path, dtype="<u2", mode="r"), seq_len, str(path), 1)
    else:
        chunks, total, files = [], 0, resolve_files(spec)
        used = 0
        for path in files:
            if total >= max_bytes:
                break
            blob = path.read_bytes()[: max_bytes - total]
            chunks.append(blob)
            total += len(blob)
            used += 1
        tokens = np.frombuffer(b"".join(chunks), dtype=np.uint8)
        data = TokenData(tokens, seq_len, spec, used)
    if data.num_samples < 1:
        raise ValueError(
            f"--data {spec!r} holds {len(data.tokens)} tokens, fewer than one sample of "
            f"seq_len + 1 = {seq_len + 1}"
        )
    return data
