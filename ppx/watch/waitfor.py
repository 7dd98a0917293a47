"""The wait-for graph from the blocked-on records, and the cycle named in one line."""

from __future__ import annotations


def edge_label(rec: dict) -> str:
    # a world collective waits on its missing members, no message kind
    label = "collective" if rec["op"] == "collective" else f"{rec['op']} {rec['kind']}"
    if rec.get("slot", -1) >= 0:
        label += f" slot={rec['slot']}"
    return label


ALL_PEERS = -2  # ppx/engine/board.py's: a record that waits on every other rank


def _peers(r: dict, records: list[dict | None]) -> list[int]:
    """Whom a blocked rank waits on: its one peer; in a world collective, every rank that
    has not entered the same one (those inside it wait together, on nobody of theirs)."""
    if r["peer"] != ALL_PEERS:
        return [r["peer"]] if r["peer"] >= 0 else []
    same = {
        o["rank"]
        for o in records
        if o is not None and o["op"] == r["op"] and o["seq"] == r["seq"] and o["peer"] == ALL_PEERS
    }
    return [q for q in range(len(records)) if q not in same]


def graph(records: list[dict | None]) -> dict:
    """An edge rank -> peer for each wait, labelled op/kind: one per point-to-point wait,
    one per missing member of a collective."""
    nodes = list(range(len(records)))
    edges = [
        {
            "src": r["rank"],
            "dst": peer,
            "label": edge_label(r),
            "pass_id": r["pass_id"],
            "seq": r["seq"],
        }
        for r in records
        if r is not None
        for peer in _peers(r, records)
    ]
    return {"nodes": nodes, "edges": edges}


def find_cycle(g: dict) -> list[dict] | None:
    """The first cycle of waits, searched depth-first from the lowest rank (with one wait
    per rank: follow the out-edges until a rank repeats)."""
    out: dict[int, list[dict]] = {}
    for e in g["edges"]:
        out.setdefault(e["src"], []).append(e)
    done: set[int] = set()

    def dfs(node: int, path: list[dict], on_path: dict[int, int]) -> list[dict] | None:
        for e in out.get(node, []):
            nxt = e["dst"]
            if nxt in on_path:
                return [*path, e][on_path[nxt] :]
            if nxt in done:
                continue
            on_path[nxt] = len(path) + 1
            found = dfs(nxt, [*path, e], on_path)
            if found is not None:
                return found
            del on_path[nxt]
            done.add(nxt)
        return None

    for start in sorted(out):
        if start not in done:
            found = dfs(start, [], {start: 0})
            if found is not None:
                return found
            done.add(start)
    return None


def cycle_text(cycle: list[dict] | None) -> str | None:
    """e.g. `rank0 -[flush chain]-> rank1 -[recv decision slot=1]-> rank0`."""
    if not cycle:
        return None
    parts = [f"rank{cycle[0]['src']}"]
    for e in cycle:
        parts.append(f"-[{e['label']}]-> rank{e['dst']}")
    return " ".join(parts)


def mismatch(records: list[dict | None]) -> str | None:
    """Both ends of one channel blocked on it with different seq or width: a protocol
    mismatch rather than an ordering wedge."""
    by = {r["rank"]: r for r in records if r is not None}
    for a, ra in by.items():
        rb = by.get(ra["peer"])
        if rb is None or rb["peer"] != a or ra["kind"] != rb["kind"]:
            continue
        if ra["op"] == "recv" and rb["op"] in ("flush", "send") and ra["seq"] != rb["seq"]:
            return (
                f"rank{a} waits {ra['kind']} seq={ra['seq']} from rank{rb['rank']}, "
                f"which is sending seq={rb['seq']}"
            )
        if (
            ra["op"] == "recv"
            and rb["op"] == "recv"
            and ra["width"] != rb["width"]
            and ra["width"] >= 0 <= rb["width"]
        ):
            return f"rank{a} and rank{rb['rank']} both receive {ra['kind']} with widths {ra['width']} != {rb['width']}"
    return None
