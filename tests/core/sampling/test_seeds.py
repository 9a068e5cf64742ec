"""Per-call seeds (``core/sampling/seeds.py``): the one counter every sampler of both adapters keys its
calls by.  The keys are ``call_seed(seed, call, worker + offset)`` call for call; a call counts from
``next_key`` on, or only once a ``counted_call`` block completes; ``reset`` rewinds; and no other module
of the package moves a per-call counter."""
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dgl_accel.core.sampling.rng import call_seed
from dgl_accel.core.sampling.seeds import CallSeeds

PACKAGE = Path(__file__).resolve().parents[3] / "dgl_accel"


def _seeds(seed, offset=1):
    s = CallSeeds()
    s.WORKER_OFFSET = offset
    s.init_seeds(seed)
    return s


@pytest.mark.parametrize("offset", [1, 0])
def test_keys_follow_seed_call_and_worker(offset, monkeypatch):
    s = _seeds(2**64 - 3, offset)
    assert s.calls == 0
    assert [s.next_key() for _ in range(3)] == [call_seed(2**64 - 3, c, 0) for c in range(3)]
    assert s.calls == 3
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: SimpleNamespace(id=4))
    assert s.call_keys(3, 2) == [call_seed(2**64 - 3, c, 4 + offset) for c in (3, 4)]
    assert s.calls == 3  # call_keys only reads


def test_default_seed_comes_from_torchs_generator():
    torch.manual_seed(0)
    a = _seeds(None)
    torch.manual_seed(0)
    b = _seeds(None)
    assert a.seed == b.seed and [a.next_key(), a.next_key()] == [b.next_key(), b.next_key()]


def test_only_a_call_that_sampled_counts():
    s = _seeds(7)
    with s.counted_call() as key:
        assert key == call_seed(7, 0, 0) and s.calls == 0  # counted once the block completes
    assert s.calls == 1
    with pytest.raises(ValueError):
        with s.counted_call() as key:
            raise ValueError("refused")
    assert s.calls == 1  # the refused call left the counter as it was
    with s.counted_call() as again:
        pass
    assert again == key == call_seed(7, 1, 0)


def test_claim_and_reset():
    s = _seeds(11)
    assert s.claim_calls(4) == 0 and s.calls == 4
    assert s.claim_calls() == 4 and s.next_key() == call_seed(11, 5, 0)
    s.reset(2)
    assert s.calls == 2 and s.next_key() == call_seed(11, 2, 0)
    s.reset()
    assert s.calls == 0


def test_the_per_call_counter_moves_in_one_module():
    """``grep`` finds the per-call counter's increments only in core/sampling/seeds.py (policies'
    ``session.calls`` counts aggregations and ``spgemm``'s its products: other counters)."""
    moves = re.compile(r"\b(calls|call_index)\s*(\+=|=\s*first)")
    found = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if moves.search(p.read_text()))
    assert found == ["core/sampling/seeds.py", "distributed/spgemm.py", "policies/exec_paths/session.py"], found
