"""PyTorch Flight Recorder dumps of a run that did not serve, from ppx's own record.

One pickle per rank, `postmortem/flight_recorder/<prefix><rank>` (prefix `ppx_fr_`), in the
format torch's analyzer reads (`torchfrtrace DIR -p ppx_fr_`, torch/distributed/
flight_recorder): `version`, `pg_config`, `pg_status` and `entries` (record_id, pg_id,
process_group, collective_seq_id, p2p_seq_id, op_id, profiling_name, sizes, dtypes, state,
timing, frames, is_p2p).

What ppx knows and how it maps:
- Every message is on a wire (src -> dst, kind); the status board counts what each rank
  posted (`sent`) and took (`consumed`) on it, so message k of a wire is a `send` on src and
  a `recv` on dst, `completed` once dst consumed it. Each wire is a two-rank process group
  named `<kind>:<src>-><dst>` with the message's seq as its sequence id: the analyzer then
  pairs every send with its recv exactly as it pairs NCCL's per-pair p2p communicators.
- A rank blocked on a wire (its blocked-on record) has its pending op `started`: a flush
  leaves the sends its peer never took, a receive the one message it waits for. The analyzer
  reports such an op as a collective "not all ranks joining" with the missing rank: the
  wait-for edge, in its words.
- Collectives (the TP phase's broadcast and all-reduce, the cutover's all-gathers) are in
  each rank's op ring only; they form the world group, numbered by (pass, order in pass).
Timing comes from the op ring where it still holds the op (it keeps each rank's last 256).
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

from ppx.core import Kind
from ppx.engine.board import Board, F
from ppx.engine.channels import HEADER_LEN
from ppx.watch.flight_recorder_read import PREFIX

VERSION = "2.10"  # the entry layout of torch's recorder with p2p sequence ids and is_p2p
WIRE_WINDOW = 64  # messages kept per wire (torch's recorder keeps a ring too)
WORLD_PG = "0"


@dataclass(frozen=True)
class Op:
    """One operation of one rank, before it becomes a Flight Recorder entry."""

    pg: str
    seq: int
    name: str  # send 0->1 (group-local ranks) | recv 1<-0 | broadcast | all_reduce | ...
    state: str  # completed | started
    t_start_ns: int
    t_end_ns: int
    frame: str  # what ppx was doing: the op, its kind, slot and pass
    is_p2p: bool


def wire_pg(kind: int, src: int, dst: int) -> str:
    return f"{Kind(kind).label}:{src}->{dst}"


def _ring_times(board: Board, rank: int) -> dict[tuple, tuple[int, int, dict]]:
    """(op, peer, kind, seq) -> (start, end, ring row) for the ring's wire ops; a flush covers
    every seq up to its own."""
    out = {}
    for o in board.ops(rank):
        t0, t1 = o["t_ns"], o["t_ns"] + int(o["dur_s"] * 1e9)
        out[(o["op"], o["peer"], o["kind"], o["seq"])] = (t0, t1, o)
    return out


def _wire_ops(board: Board, blocked: list[dict | None]) -> dict[int, list[Op]]:
    ops: dict[int, list[Op]] = {r: [] for r in range(board.world)}
    rings = {r: _ring_times(board, r) for r in range(board.world)}
    for src in range(board.world):
        for dst in range(board.world):
            if src == dst:
                continue
            for kind in Kind:
                sent = int(board.sent(src)[dst, int(kind)])
                taken = int(board.consumed(dst)[src, int(kind)])
                rec = blocked[dst]
                waiting = (
                    rec is not None and rec["op"] in ("recv", "ready") and rec["peer"] == src
                    and rec["kind"] == kind.label
                )  # fmt: skip
                top = max(sent, taken + int(waiting))
                if top == 0:
                    continue
                pg = wire_pg(int(kind), src, dst)
                lo, hi = sorted((src, dst))
                s, d = (0, 1) if src == lo else (1, 0)  # group-local ranks
                for seq in range(max(0, top - WIRE_WINDOW), top):
                    done = seq < taken
                    if seq < sent:
                        t = _flush_time(rings[src], dst, kind.label, seq)
                        ops[src].append(
                            Op(pg, seq, f"send {s}->{d}", "completed" if done else "started",
                               t[0], t[1] if done else 0, f"send {kind.label} seq={seq} to rank{dst}", True)
                        )  # fmt: skip
                    t = rings[dst].get(("recv", src, kind.label, seq), (0, 0, None))
                    if done or (waiting and seq == taken):
                        start = t[0] or (_since(rec) if not done else 0)
                        ops[dst].append(
                            Op(pg, seq, f"recv {d}<-{s}", "completed" if done else "started",
                               start, t[1] if done else 0, f"recv {kind.label} seq={seq} from rank{src}", True)
                        )  # fmt: skip
    return ops


def _flush_time(ring: dict, dst: int, kind: str, seq: int) -> tuple[int, int]:
    best = None
    for (op, peer, k, s), (t0, t1, _) in ring.items():
        if op == "flush" and peer == dst and k == kind and s >= seq:
            if best is None or s < best[0]:
                best = (s, t0, t1)
    return (best[1], best[2]) if best else (0, 0)


def _since(rec: dict | None) -> int:
    return 0 if rec is None else max(0, int(rec.get("since_ns", 0)))


COLLECTIVE = {  # how each collective is written in the op ring (see engine/tp_phase, flip, carry)
    ("recv", 0, "tp"): "broadcast",
    ("recv", -1, "tp"): "all_reduce",
    ("recv", -1, "any"): "all_gather",
    ("recv", -1, ""): "all_gather",
}


def _collective_ops(board: Board, blocked: list[dict | None]) -> dict[int, list[Op]]:
    """The world group's collectives, numbered by (pass, order within the pass) over every
    rank, from the passes every rank's ring still covers."""
    per_rank: dict[int, list[tuple[tuple[int, int], Op]]] = {}
    first_pass = []
    for r in range(board.world):
        rows, order = [], {}
        found = [(o, "completed") for o in board.ops(r)]
        rec = blocked[r]
        if rec is not None:
            found.append(({**rec, "t_ns": _since(rec), "dur_s": 0.0}, "started"))
        for o, state in found:
            peer = -1 if o["peer"] == -1 else (0 if o["kind"] == "tp" else o["peer"])
            name = COLLECTIVE.get((o["op"], peer, o["kind"]))
            if name is None or (name == "broadcast" and o["peer"] not in (0, -1)):
                continue
            k = order[o["pass_id"]] = order.get(o["pass_id"], -1) + 1
            t1 = o["t_ns"] + int(o["dur_s"] * 1e9) if state == "completed" else 0
            frame = f"{name} (ppx {o['op']} {o['kind'] or 'any'} pass={o['pass_id']})"
            rows.append(((o["pass_id"], k), Op(WORLD_PG, 0, name, state, o["t_ns"], t1, frame, False)))  # fmt: skip
        per_rank[r] = rows
        if rows:
            first_pass.append(rows[0][0][0])
    start = max(first_pass, default=0)
    keys = sorted({key for rows in per_rank.values() for key, _ in rows if key[0] >= start})
    number = {key: i for i, key in enumerate(keys)}
    return {
        r: [_with_seq(op, number[key]) for key, op in rows if key in number]
        for r, rows in per_rank.items()
    }


def _with_seq(op: Op, seq: int) -> Op:
    return Op(op.pg, seq, op.name, op.state, op.t_start_ns, op.t_end_ns, op.frame, op.is_p2p)


def _entry(i: int, op: Op, backend: str, pg_ids: dict[str, int]) -> dict:
    size = [[HEADER_LEN]] if op.is_p2p else [[1]]
    return {
        "record_id": i,
        "pg_id": pg_ids[op.pg],
        "process_group": (op.pg, "ppx wire" if op.is_p2p else "default_pg"),
        "collective_seq_id": op.seq,
        "p2p_seq_id": op.seq if op.is_p2p else 0,
        "op_id": i,
        "profiling_name": f"{backend}:{op.name}",
        "time_created_ns": op.t_start_ns,
        "input_sizes": size,
        "input_dtypes": ["Long"],
        "output_sizes": size,
        "output_dtypes": ["Long"],
        "state": op.state,
        "time_discovered_started_ns": op.t_start_ns or None,
        "time_discovered_completed_ns": op.t_end_ns or None,
        "retired": op.state == "completed",
        "timeout_ms": 0,
        "is_p2p": op.is_p2p,
        "frames": [{"name": op.frame, "filename": "ppx", "line": 0}],
    }


def dumps(board: Board, records: list[dict | None], backend: str) -> dict[int, dict]:
    """Every rank's dump (the pickled dict), from the board and the blocked-on records."""
    blocked = [
        None if rec is None else {**rec, "since_ns": int(board.fields(r)[F.BLK_SINCE_NS])}
        for r, rec in enumerate(records)
    ]
    wire, coll = _wire_ops(board, blocked), _collective_ops(board, blocked)
    world = list(range(board.world))
    groups = {WORLD_PG: world} | {
        op.pg: sorted(int(x) for x in op.pg.split(":")[1].split("->"))
        for ops in wire.values() for op in ops
    }  # fmt: skip
    pg_ids = {pg: i for i, pg in enumerate(groups)}
    out = {}
    for r in world:
        ops = sorted(wire[r] + coll[r], key=lambda o: (o.t_start_ns or 1 << 62, o.pg, o.seq))
        entries = [_entry(i, op, backend, pg_ids) for i, op in enumerate(ops)]
        mine = {pg: ranks for pg, ranks in groups.items() if r in ranks}
        out[r] = {
            "version": VERSION,
            "pg_config": {
                pg: {
                    "name": pg,
                    "desc": "default_pg" if pg == WORLD_PG else "ppx wire",
                    "ranks": str(ranks),
                }  # fmt: skip
                for pg, ranks in mine.items()
            },
            "pg_status": {pg: _status(pg, ops) for pg in mine},
            "entries": entries,
        }
    return out


def _status(pg: str, ops: list[Op]) -> dict:
    mine = [o for o in ops if o.pg == pg]
    done = [o.seq for o in mine if o.state == "completed"]
    return {
        "last_enqueued_collective": max((o.seq for o in mine), default=-1),
        "last_started_collective": max((o.seq for o in mine), default=-1),
        "last_completed_collective": max(done, default=-1),
    }


def write(pm_dir: str, board: Board, records: list[dict | None], backend: str) -> str:
    """postmortem/flight_recorder/ppx_fr_<rank>, one per rank; returns the directory."""
    out = os.path.join(pm_dir, "flight_recorder")
    os.makedirs(out, exist_ok=True)
    for r, dump in dumps(board, records, backend).items():
        with open(os.path.join(out, f"{PREFIX}{r}"), "wb") as f:
            pickle.dump(dump, f)
    return out
