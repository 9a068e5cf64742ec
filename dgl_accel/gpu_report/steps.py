"""One training step of the training section in a precision: a dtype (weights and features in it)
or ``autocast-<dtype>`` (fp32 weights and features, forward and loss under ``torch.autocast``, a
GradScaler for fp16, as users train in mixed precision)."""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

__all__ = ["Step", "full_epoch", "label", "precision", "sync"]


def precision(case_dtype) -> tuple[torch.dtype, torch.dtype | None]:
    """(storage dtype, autocast dtype or None) of a case's precision: a torch dtype, or a string
    ``autocast-bfloat16`` / ``autocast-float16`` (fp32 weights and features, forward under autocast).

    >>> precision("autocast-float16")
    (torch.float32, torch.float16)
    """
    if isinstance(case_dtype, torch.dtype):
        return case_dtype, None
    kind, _, name = str(case_dtype).partition("-")
    if kind != "autocast" or not isinstance(getattr(torch, name, None), torch.dtype):
        raise ValueError(f"expected a torch dtype or 'autocast-<dtype>' (got {case_dtype!r}). "
                         f"Fix: torch.float32, 'autocast-bfloat16' or 'autocast-float16'.")
    return torch.float32, getattr(torch, name)


def label(case_dtype) -> str:
    """The precision's name in rows and ``--training-cases`` (``float32``, ``autocast-bfloat16``)."""
    return str(case_dtype).replace("torch.", "")


class Step:
    """Forward and loss (under autocast where the precision says), backward and the optimiser step,
    with a GradScaler for fp16 autocast."""

    def __init__(self, opt, device: torch.device, amp: torch.dtype | None):
        self.opt, self.device, self.amp = opt, device, amp
        self.scaler = torch.amp.GradScaler(device.type) if amp == torch.float16 else None

    def forward(self, fn):
        with torch.autocast(self.device.type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            return fn()

    def backward(self, loss) -> None:
        if self.scaler is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def full_epoch(model, step: Step, x, adjacency, y, mask) -> tuple[float, dict]:
    """One full-graph step (forward, loss on the training rows, backward, optimiser step)."""
    sync(x.device)
    start = time.perf_counter()
    step.opt.zero_grad()
    loss = step.forward(lambda: F.cross_entropy(model(x, adjacency)[mask].float(), y[mask]))
    step.backward(loss)
    sync(x.device)
    return float(loss), {"step": time.perf_counter() - start}
