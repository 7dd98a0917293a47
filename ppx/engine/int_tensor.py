"""Integer tensors from flat Python lists, at a third of `torch.tensor`'s cost.

`torch.tensor(list)` inspects every element for its type: ~9 us for a 26-int header on a
2-core CI machine, where a tensor over an `array`'s buffer costs ~3 us. A simulated schedule
builds ~400 of them (headers, forward inputs, KV rows, the hash model's reads and writes),
so this is ~2 ms of a ~15 ms schedule (benchmarks/profile_schedules.py, docs/simulation.md).
The values, dtype and shape are those `torch.tensor(values, dtype=dtype)` gives.
"""

from __future__ import annotations

from array import array

import torch

_CODES = {torch.int64: "q", torch.int32: "i"}
assert array("q").itemsize == 8 and array("i").itemsize == 4, "array's C sizes"


def int_tensor(values: list[int], dtype: torch.dtype = torch.int64, device=None) -> torch.Tensor:
    """`torch.tensor(values, dtype=dtype, device=device)` for a flat list of ints. The tensor
    owns a fresh buffer (the array it was read from is referenced by nothing else)."""
    if not values:  # frombuffer refuses an empty buffer
        return torch.empty(0, dtype=dtype, device=device)
    t = torch.frombuffer(array(_CODES[dtype], values), dtype=dtype)
    return t if device is None or getattr(device, "type", device) == "cpu" else t.to(device)
