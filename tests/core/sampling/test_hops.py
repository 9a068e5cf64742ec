"""``dgl_accel.core.sampling.neighbor.hops`` (hop-by-hop sampling in PyG's layout, the PyG sampler's
pipeline): its device pipeline reads the host at most :func:`host_read_bound` times, for one
relation and for two relations into two node types, uniform and weighted, and gives the CPU
path's samples; its induced subgraph of the sampled nodes (``induced_hops``) likewise.  (Its
output contract through PyG's loaders: tests/pyg/test_sampler.py.)"""
import dataclasses

import pytest
import torch

import dgl_accel
from dgl_accel.core.csr import Structure, sort_by_row
from dgl_accel.core.sampling.induced.subgraph_device import HOST_READS as INDUCED_READS
from dgl_accel.core.sampling.neighbor import choice_device as weighted_device
from dgl_accel.core.sampling.neighbor import sample_device as neighbor_device
from dgl_accel.core.sampling.neighbor.choice import WeightTables
from dgl_accel.core.sampling.neighbor.hops import Relation, host_read_bound, induced_hops, sample_hops
from dgl_accel.testing.host_reads import HostReads


def _relation(num_src, num_dst, num_edges, seed, src_type=0, dst_type=0):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges,), generator=gen)
    dst = torch.randint(0, num_dst, (num_edges,), generator=gen)
    indptr, order = sort_by_row(dst, num_dst)
    csr = Structure(indptr=indptr, indices=src[order], eids=order, num_rows=num_dst, num_cols=num_src,
                    device=torch.device("cpu"))
    return Relation(csr, src_type, dst_type)


CASES = {  # name: (relations, seeds per node type, node counts)
    "homogeneous": (lambda: [_relation(60, 60, 400, 1)], [torch.arange(0, 60, 7)], [60]),
    "two types": (lambda: [_relation(50, 30, 300, 2, 0, 1), _relation(30, 50, 200, 3, 1, 0)],
                  [torch.tensor([], dtype=torch.int64), torch.arange(0, 30, 4)], [50, 30]),
}


def _weighted(rel: Relation, seed: int) -> Relation:
    w = torch.rand(rel.csr.num_edges, generator=torch.Generator().manual_seed(seed))
    w[::4] = 0
    return dataclasses.replace(rel, weights=WeightTables(rel.csr.indptr.numpy(), rel.csr.eids.numpy(), w))


@pytest.mark.interpreter
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fanouts", [[4, 3], [-1, 2]])
@pytest.mark.parametrize("weighted", [False, True])
def test_device_pipeline_reads_the_host_at_most_its_bound_and_samples_as_the_cpu(case, fanouts, weighted):
    build, seeds, num_nodes = CASES[case]
    rels = [_weighted(r, i) for i, r in enumerate(build())] if weighted else build()
    per_rel = [fanouts] * len(rels)
    with dgl_accel.use_backend("native"):
        cpu = sample_hops(rels, seeds, per_rel, key=5, replace=False, num_nodes=num_nodes)
    # the interpreter reads the kernel's arguments on the host; a compiled launch does not
    # (and the CPU's Philox of the weighted choice runs in numpy; on a GPU, torch ops without a read)
    with HostReads(leave_out=[(neighbor_device, "neighbor_choice_triton"), (weighted_device, "philox_uniform")]) \
            as reads:
        with dgl_accel.use_backend("triton"):
            dev = sample_hops(rels, seeds, per_rel, key=5, replace=False, num_nodes=num_nodes)
    assert 0 < len(reads.events) <= host_read_bound(len(rels), len(num_nodes), len(fanouts), weighted), reads.events
    for name in ("nodes", "row", "col", "edge"):
        assert all(torch.equal(a, b) for a, b in zip(getattr(cpu, name), getattr(dev, name))), name
    assert cpu.num_sampled_nodes == dev.num_sampled_nodes and cpu.num_sampled_edges == dev.num_sampled_edges


@pytest.mark.parametrize("case", CASES)
def test_induced_hops_on_the_device_read_twice_per_relation_and_give_the_cpus_edges(case):
    """PyG's induced subgraph of the sampled nodes (no kernel: torch ops on the Triton path)."""
    build, seeds, num_nodes = CASES[case]
    rels = build()
    nodes = sample_hops(rels, seeds, [[3, 2]] * len(rels), key=1, replace=False, num_nodes=num_nodes).nodes
    with dgl_accel.use_backend("native"):
        cpu = induced_hops(rels, nodes)
    with HostReads() as reads, dgl_accel.use_backend("triton"):
        dev = induced_hops(rels, nodes)
    assert 0 < len(reads.events) <= INDUCED_READS * len(rels), reads.events
    assert all(torch.equal(a, b) for x, y in zip(cpu, dev) for a, b in zip(x, y))
    for rel, row, col, edge in zip(rels, *cpu):  # every edge between the two node lists, each once
        src, dst = nodes[rel.src], nodes[rel.dst]
        pos = torch.repeat_interleave(torch.arange(rel.csr.num_rows), rel.csr.indptr.diff())  # each entry's row
        among = torch.isin(rel.csr.indices, src) & torch.isin(pos, dst)
        assert sorted(edge.tolist()) == sorted(rel.csr.eids[among].tolist()) and edge.numel() > 0
        assert torch.equal(src[row], rel.csr.indices[torch.argsort(rel.csr.eids)][edge])
        assert torch.equal(dst[col], pos[torch.argsort(rel.csr.eids)][edge])
