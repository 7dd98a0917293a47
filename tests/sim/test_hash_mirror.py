"""The hash model's Python mirror of its pool (ppx/engine/model/hash_mirror.py) reads what the
torch decode would: random prefills and decodes, with the pool written behind the stage's back
between them, give the same outputs as a stage whose pools keep no version counter (inference
tensors: no mirror, every read through torch). Red arm: a write the version counter does not
see (through `.data`) leaves the mirror stale, and the outputs move -- the counter is what the
mirror's correctness rests on."""

from __future__ import annotations

import random
from functools import cache

import torch
from ppx_helpers import compose

from ppx.core import ForwardInputs
from ppx.engine.model.factory import build_stage
from ppx.engine.model.hash_mirror import PoolMirror

SLOTS, ROWS, CTX = 96, 4, 32


def pools(inference: bool):
    with torch.inference_mode(inference):
        k, v = torch.zeros(SLOTS, 12, 1), torch.zeros(SLOTS, 12, 1)
        return [k], [v], torch.zeros(ROWS, CTX, dtype=torch.int32)


def forward(stage, pool, rows: list[int], starts: list[int], n: int, rng: random.Random):
    """n new tokens of each request `rows[b]` from position starts[b], slots drawn fresh."""
    k, v, r2t = pool
    locs = []
    for r, s in zip(rows, starts, strict=True):
        fresh = rng.sample(range(SLOTS), n)
        r2t[r, s : s + n] = torch.tensor(fresh, dtype=torch.int32)
        locs += fresh
    fi = ForwardInputs(
        "prefill",
        torch.tensor([p for s in starts for p in range(s, s + n)]),
        torch.arange(0, len(rows) * n + 1, n),
        torch.tensor(starts),
        torch.tensor(rows),
        torch.tensor(locs),
        torch.arange(n - 1, len(rows) * n, n),
        input_ids=torch.tensor([rng.randrange(128) for _ in range(len(rows) * n)]),
    )
    return stage.forward(fi, k, v, r2t).tolist()


def spoil(pool, rng: random.Random, untracked: bool) -> None:
    """Another writer: a few slots of k or v rewritten (a host load-back, a carry, a fault)."""
    k, v, _ = pool
    for _ in range(3):
        t = rng.choice([k[0], v[0]])
        (t.data if untracked else t)[rng.randrange(SLOTS)] = float(rng.randrange(1 << 20))


@cache
def config():
    return compose("model=hash", "pp=1")


def run(inference: bool, untracked: bool = False) -> list:
    cfg = config()
    stage = build_stage(cfg, "pp", 0, 1, None, "cpu")
    pool, rng, out = pools(inference), random.Random(7), []
    with torch.inference_mode():  # as the simulator and the rank processes run a forward
        for step in range(12):
            rows = rng.sample(range(ROWS), 2)
            start = 2 * step + 2 if step else 0
            out.append(forward(stage, pool, rows, [start, start], 2, rng))
            if step % 3 == 2:
                spoil(pool, rng, untracked)
    return out


def test_the_mirror_reads_what_torch_reads_with_others_writing_the_pool():
    assert run(inference=False) == run(inference=True)


def test_red_a_write_the_version_counter_misses_leaves_the_mirror_stale():
    assert run(inference=False, untracked=True) != run(inference=True, untracked=True)


def test_the_mirror_knows_only_exact_single_writes():
    m = PoolMirror()
    k, v = torch.zeros(8, 2, 1), torch.zeros(8, 2, 1)
    assert m.bind(k, v)
    m.wrote_ids([1, 2], [5, 1 << 25], 0, 128)  # the second would round in float32
    assert m.ids[1] == 5 and m.ids[2] is None
    m.wrote_ids([3, 3], [4, 6], 0, 128)  # which one the pool kept is not the mirror's guess
    assert m.ids == [None] * 8
    fetched = []
    assert m.read_hashes([4, 4], lambda s: fetched.append(s) or [9] * len(s)) == [9, 9]
    assert fetched == [[4, 4]] and m.read_hashes([4], None) == [9]  # known now: no fetch
    m.seal()
    k[0] = 1.0  # anyone's write: the next bind forgets every slot
    assert m.bind(k, v) and m.hashes == [None] * 8
    with torch.inference_mode():
        assert not m.bind(torch.zeros(8, 2, 1), v)  # no version counter: no mirror
    assert not m.bind(k.double(), v)


def test_a_small_write_built_in_python_is_the_tensor_arithmetic_bit_for_bit():
    from ppx.engine.int_tensor import int_tensor
    from ppx.engine.model.hashed import MOD, _rows, head_tags

    k_tag, v_tag = head_tags(128, list(range(12)))
    rng = random.Random(5)
    for _ in range(300):  # ids far out of range too: where float32 rounds, it rounds alike
        ids = [rng.choice([rng.randrange(128), rng.randrange(-(2**51), 2**51)]) for _ in range(3)]
        want = (int_tensor(ids)[:, None] + k_tag).to(torch.float32)
        assert torch.equal(_rows(ids, k_tag.tolist(), k_tag, None, torch.float32), want)
        g = [rng.randrange(MOD) for _ in range(3)]
        want = ((int_tensor(g)[:, None] + v_tag) % MOD).to(torch.float32)
        assert torch.equal(_rows(g, v_tag.tolist(), v_tag, MOD, torch.float32), want)
    # red arm: above 2^53 a sum is no exact double, and through a double it rounds twice
    # (2^54 + 2^30 + 1: to 2^54 + 2^30, a float32 tie, to even), where int64 -> float32
    # rounds once (up): that is why such a write takes the tensor path
    x = (1 << 54) + (1 << 30) + 1
    once = int_tensor([x]).to(torch.float32)
    assert not torch.equal(torch.tensor([float(x)], dtype=torch.float32), once)
    assert torch.equal(
        _rows([x], [0], torch.zeros(1, dtype=torch.int64), None, torch.float32)[0], once
    )
