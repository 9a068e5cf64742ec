"""Second-order step statistics of node2vec walks on Cora, DGL's against ours (a direct check
behind the node2vec example's loss): for every step t -> v -> x, the share of returns (x == t,
weight 1/p), of steps to a neighbour of t (weight 1) and of steps farther out (weight 1/q).

    DGLBACKEND=pytorch DGL_ACCEL_DATASETS=/work/shared/datasets python scripts/dgl_examples/walk_stats.py
"""
import argparse

import dgl
import numpy as np
import torch

import dgl_accel.data
import dgl_accel.sampling


def step_shares(traces: np.ndarray, edges: set) -> tuple[float, float, float, int]:
    t, x = traces[:, :-2].ravel(), traces[:, 2:].ravel()
    keep = (t >= 0) & (x >= 0)
    t, x = t[keep], x[keep]
    ret = x == t
    near = np.fromiter(((a, b) in edges for a, b in zip(t.tolist(), x.tolist())), bool, len(t)) & ~ret
    return ret.mean(), near.mean(), (~ret & ~near).mean(), len(t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--p", type=float, default=0.25)
    p.add_argument("--q", type=float, default=4.0)
    p.add_argument("--walks-per-node", type=int, default=10)
    p.add_argument("--length", type=int, default=10)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    a = p.parse_args()
    g = dgl_accel.data.load("cora")
    src, dst = g.edges()
    edges = set(zip(src.tolist(), dst.tolist()))
    nodes = torch.arange(g.num_nodes()).repeat(a.walks_per_node)
    print("| provider | seed | return (1/p) | to a neighbour of t (1) | farther (1/q) | steps |")
    print("|---|---|---|---|---|---|")
    for name, walk in (("dgl", dgl.sampling.node2vec_random_walk), ("ours", dgl_accel.sampling.node2vec_random_walk)):
        for seed in a.seeds:
            torch.manual_seed(seed)
            dgl.seed(seed)
            shares = step_shares(walk(g, nodes, a.p, a.q, a.length).numpy(), edges)
            print(f"| {name} | {seed} | {shares[0]:.4f} | {shares[1]:.4f} | {shares[2]:.4f} | {shares[3]} |")


if __name__ == "__main__":
    main()
