"""The training loop that matches :class:`ReplicatedLoader`'s global batch semantics, and a
full-neighbourhood evaluation; shared by the example and the tests."""
from __future__ import annotations

import contextlib

import dgl
import torch
import torch.nn.functional as F

from ..core.sampling.rng import call_seed
from ..nn import SAGEConv

__all__ = ["SAGE", "train_epoch", "evaluate"]


class SAGE(torch.nn.Module):
    """GraphSAGE (mean aggregation) over a list of blocks, one dgl_accel SAGEConv per layer."""

    def __init__(self, in_feats: int, hidden: int, num_classes: int, num_layers: int = 2, dropout: float = 0.0):
        super().__init__()
        dims = [in_feats] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers = torch.nn.ModuleList(SAGEConv(a, b, "mean") for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, blocks, x):
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            x = layer(block, x)
            if i < len(self.layers) - 1:
                x = self.dropout(F.relu(x))
        return x


def train_epoch(model, loader, optimizer, feat, label, dropout_seed=None) -> float:
    """One epoch: per step, sum-of-losses x ``step.scale`` over this rank's minibatches (gradients
    accumulate; a DistributedDataParallel model syncs only on the last backward of the step), then
    one optimizer step.  ``model(blocks, x)`` returns logits of the blocks' output nodes.

    ``dropout_seed``: if given, each minibatch runs under torch's RNG seeded from (dropout_seed,
    global minibatch index), so dropout masks too are independent of the world size.
    Returns the mean training loss over the global steps (all-reduced when distributed).
    """
    model.train()
    total, seen = 0.0, 0
    no_sync = getattr(model, "no_sync", None)
    dev = feat.device
    for step in loader:
        optimizer.zero_grad(set_to_none=True)
        last = len(step.minibatches) - 1
        for t, (j, inp, outp, blocks) in enumerate(step.minibatches):
            ctx = no_sync() if (no_sync is not None and t < last) else contextlib.nullcontext()
            rng = torch.random.fork_rng(devices=[]) if dropout_seed is not None else contextlib.nullcontext()
            with ctx, rng:
                if dropout_seed is not None:
                    torch.manual_seed(call_seed(int(dropout_seed), j) >> 1)
                blocks = [b.to(dev) for b in blocks]
                x = feat[inp.to(dev).long()]
                logits = model(blocks, x)
                loss = F.cross_entropy(logits, label[outp.to(dev).long()], reduction="sum")
                (loss * step.scale).backward()
            total += float(loss)
        seen += step.global_size
        optimizer.step()
    if torch.distributed.is_initialized():
        # nccl reduces CUDA tensors only; gloo takes CPU ones.
        t = torch.tensor([total, float(seen) / torch.distributed.get_world_size()], dtype=torch.float64,
                         device=feat.device if torch.distributed.get_backend() == "nccl" else "cpu")
        torch.distributed.all_reduce(t)
        total, seen = float(t[0]), float(t[1])
    return total / max(seen, 1)


@torch.no_grad()
def evaluate(model, g, ids, feat, label, num_layers: int) -> float:
    """Accuracy on ``ids`` with full neighbourhoods (one batch; fine for graphs that fit memory)."""
    model.eval()
    module = getattr(model, "module", model)  # DDP: run the wrapped module, no collectives
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(num_layers)
    ids = torch.as_tensor(ids).to(g.device)
    if ids.dtype == torch.bool:
        ids = torch.nonzero(ids, as_tuple=True)[0]
    inp, outp, blocks = sampler.sample_blocks(g, ids)
    dev = feat.device
    logits = module([b.to(dev) for b in blocks], feat[inp.to(dev).long()])
    return float((logits.argmax(1) == label[outp.to(dev).long()]).float().mean())
