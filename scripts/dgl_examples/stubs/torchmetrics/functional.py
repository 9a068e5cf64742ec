"""``accuracy(preds, target, task="multiclass", num_classes=C)``: micro accuracy, as torchmetrics'."""
import torch


def accuracy(preds: torch.Tensor, target: torch.Tensor, task: str = "multiclass", num_classes=None) -> torch.Tensor:
    if task != "multiclass":
        raise ValueError(f"this stand-in supports task='multiclass' only (got {task!r}).")
    if preds.is_floating_point() and preds.dim() == target.dim() + 1:
        preds = preds.argmax(-1)
    return (preds == target).float().mean()
