"""The `postmortem/` part of a synthetic run dir (see fake_runs.py): the wait-for graph,
cycle, stacks, last events, ledger and the per-rank channel-operation timeline."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ppx.watch import flight_recorder_read, torch_fr
from ppx.watch.waitfor import cycle_text, find_cycle, graph


def _png_1x1() -> bytes:
    # A valid one-pixel PNG, so `waitfor.png` exists without paying for matplotlib.
    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    raw = zlib.compress(b"\x00\xff\xff\xff")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def write_postmortem(run_dir: Path, pp: int, wall: float, blocked_on: list[dict]) -> None:
    """The files `ppx.watch.postmortem.write` leaves, with the graph and cycle built by the
    engine's own functions from the blocked-on records."""
    pm = run_dir / "postmortem"
    (pm / "stacks").mkdir(parents=True, exist_ok=True)
    g = graph(blocked_on)
    text = cycle_text(find_cycle(g))
    (pm / "cycle.txt").write_text((text or "no cycle") + "\n")
    (pm / "waitfor.json").write_text(json.dumps(g | {"cycle": text}))
    (pm / "waitfor.png").write_bytes(_png_1x1())
    (pm / "blocked_on.json").write_text(json.dumps(blocked_on))
    # the post-mortem is taken while the ranks are still blocked: none has reported yet
    blocked = "no report: the rank was blocked or killed (see stacks)"
    (pm / "ledger.json").write_text(json.dumps({f"rank{r}": blocked for r in range(pp)}))
    last = {}
    for r in range(pp):
        (pm / "stacks" / f"rank{r}.txt").write_text(f"Thread rank{r}:\n  File channels.py, recv\n")
        keys = ("t_s", "rank", "kind", "pass_id", "slot", "rid", "epoch", "detail")
        last[f"rank{r}"] = [
            dict(zip(keys, (wall - 0.1 * k, r, "pass", 100 - k, k % 2, -1, 0, "")))
            for k in range(3)
        ]
    (pm / "last_events.json").write_text(json.dumps(last))
    # one Flight Recorder dump per rank, ppx's and (a gloo run) torch's own, by name only
    fr = pm / "flight_recorder"
    fr.mkdir(exist_ok=True)
    for r in range(pp):
        for prefix in (flight_recorder_read.PREFIX, torch_fr.PREFIX):
            (fr / f"{prefix}{r}").write_bytes(b"")
    ops: dict[str, list] = {k: [] for k in ("rank", "op", "peer", "kind", "slot", "pass_id")}
    ops.update({"seq": [], "dur_s": [], "t_s": []})
    seq = 0
    for p in range(12):
        for r in range(pp):
            t0 = wall - 2.0 - 1.25 + p * 0.1 + r * 0.01  # blocked for since_s=2.0 at the end
            for op, kind, dur in (
                ("compute", "proxy", 0.03),
                ("send", "chain", 0.0),
                ("flush" if r == 0 else "recv", "chain", 0.01),
                ("recv", "decision", 0.05),
                ("pass", "", 0.08),
            ):
                for k, v in zip(ops, (r, op, (r + 1) % pp, kind, p % 2, p, seq, dur, t0)):
                    ops[k].append(v)
                seq += 1
                t0 += dur
    types = {"rank": pa.int64(), "peer": pa.int64(), "op": pa.large_string()}
    types["kind"] = pa.large_string()  # as pandas writes text
    pq.write_table(
        pa.table({k: pa.array(v, type=types.get(k)) for k, v in ops.items()}),
        pm / "ops.parquet",
        compression="none",
    )
