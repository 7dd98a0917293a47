"""The wait-for graph from the blocked-on records, and the cycle named in one line."""

from __future__ import annotations


def edge_label(rec: dict) -> str:
    label = f"{rec['op']} {rec['kind']}"
    if rec.get("slot", -1) >= 0:
        label += f" slot={rec['slot']}"
    return label


def graph(records: list[dict | None]) -> dict:
    """Each blocked rank waits on exactly one peer: an edge rank -> peer labelled op/kind."""
    nodes = list(range(len(records)))
    edges = [
        {
            "src": r["rank"],
            "dst": r["peer"],
            "label": edge_label(r),
            "pass_id": r["pass_id"],
            "seq": r["seq"],
        }
        for r in records
        if r is not None and r["peer"] >= 0
    ]
    return {"nodes": nodes, "edges": edges}


def find_cycle(g: dict) -> list[dict] | None:
    """Follow the out-edges (at most one per rank) until a rank repeats."""
    out = {e["src"]: e for e in g["edges"]}
    for start in sorted(out):
        path, seen, node = [], {}, start
        while node in out and node not in seen:
            seen[node] = len(path)
            path.append(out[node])
            node = out[node]["dst"]
        if node in seen:
            return path[seen[node] :]
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
