"""The post-mortem page as one HTML string: static SVG for the timeline, the wait-for graph
and the cycle drawn in the browser from the facts embedded as JSON (so a browser test reads
what a person sees, not the file's bytes)."""

from __future__ import annotations

import html
import json
import os

from ppx.postmortem.facts import Facts, read

COLORS = {"compute": "#4c78a8", "recv": "#f58518", "flush": "#54a24b", "send": "#54a24b",
          "ready": "#b279a2", "pull": "#9d755d"}  # fmt: skip
ROW_H, LEFT, WIDTH = 26, 70, 900

STYLE = """body{font:14px sans-serif;margin:1.5em;max-width:1000px}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}code{background:#f3f3f3;padding:2px}
.blocked{fill:#d62728;opacity:.55}.edge{stroke:#999;stroke-width:2;fill:none}
.edge.cycle{stroke:#d62728;stroke-width:3}.node circle{fill:#4c78a8}.node.cycle circle{fill:#d62728}
.node text{fill:#fff;font-size:12px;text-anchor:middle}"""

# draws the wait-for graph and lists the cycle's ranks from the embedded facts
SCRIPT = """const f = JSON.parse(document.getElementById('facts').textContent);
const NS = 'http://www.w3.org/2000/svg', svg = document.getElementById('waitfor');
const n = f.graph.nodes.length || 1, R = 150, C = 200, onCycle = new Set();
f.cycle_edges.forEach(([a, b]) => { onCycle.add(a); onCycle.add(b); });
const pos = r => [C + R * Math.cos(2 * Math.PI * r / n - Math.PI / 2),
                  C + R * Math.sin(2 * Math.PI * r / n - Math.PI / 2)];
const inCycle = e => f.cycle_edges.some(([a, b]) => a === e.src && b === e.dst);
for (const e of f.graph.edges) {
  const [x0, y0] = pos(e.src), [x1, y1] = pos(e.dst);
  const p = document.createElementNS(NS, 'path');
  const mx = (x0 + x1) / 2 + (y1 - y0) * 0.15, my = (y0 + y1) / 2 - (x1 - x0) * 0.15;
  p.setAttribute('d', `M${x0},${y0} Q${mx},${my} ${x1},${y1}`);
  p.setAttribute('class', 'edge' + (inCycle(e) ? ' cycle' : ''));
  p.setAttribute('marker-end', 'url(#arrow)');
  svg.appendChild(p);
  const t = document.createElementNS(NS, 'text');
  t.setAttribute('x', mx); t.setAttribute('y', my); t.setAttribute('font-size', '11');
  t.textContent = e.label; svg.appendChild(t);
}
for (const r of f.graph.nodes) {
  const [x, y] = pos(r), g = document.createElementNS(NS, 'g');
  g.setAttribute('class', 'node' + (onCycle.has(r) ? ' cycle' : ''));
  g.setAttribute('data-rank', 'rank' + r);
  const c = document.createElementNS(NS, 'circle');
  c.setAttribute('cx', x); c.setAttribute('cy', y); c.setAttribute('r', 24);
  const t = document.createElementNS(NS, 'text');
  t.setAttribute('x', x); t.setAttribute('y', y + 4); t.textContent = 'rank' + r;
  g.append(c, t); svg.appendChild(g);
}
const list = document.getElementById('cycle-ranks');
f.cycle_edges.forEach(([a, b]) => {
  const li = document.createElement('li');
  li.className = 'cycle-rank'; li.textContent = `rank${a} waits on rank${b}`;
  list.appendChild(li);
});
if (!f.cycle_edges.length) list.outerHTML = '<p id="cycle-ranks">no cycle</p>';"""


def gantt(f: Facts) -> str:
    if not f.bars:
        return "<p>no operations recorded</p>"
    ranks = sorted({b.rank for b in f.bars})
    end = max(b.start_s + b.dur_s for b in f.bars) or 1.0
    x = lambda t: LEFT + (WIDTH - LEFT - 10) * t / end  # noqa: E731
    parts = [f'<svg id="gantt" width="{WIDTH}" height="{ROW_H * len(ranks) + 30}">']
    for i, r in enumerate(ranks):
        parts.append(f'<text x="4" y="{i * ROW_H + 17}">rank{r}</text>')
    for b in f.bars:
        y, w = ranks.index(b.rank) * ROW_H + 3, max(x(b.start_s + b.dur_s) - x(b.start_s), 1.5)
        cls = ' class="blocked"' if b.blocked else ""
        fill = "" if b.blocked else f' fill="{COLORS.get(b.op, "#888")}"'
        tip = html.escape(
            f"rank{b.rank} {b.label}: {b.start_s * 1e3:.2f} ms +{b.dur_s * 1e3:.2f} ms"
        )
        tip += " (blocked when the run was declared dead)" if b.blocked else ""
        parts.append(
            f'<rect x="{x(b.start_s):.1f}" y="{y}" width="{w:.1f}" height="{ROW_H - 6}"{cls}{fill}>'
            f"<title>{tip}</title></rect>"
        )
    parts.append(f'<text x="{LEFT}" y="{ROW_H * len(ranks) + 22}">0 ms</text>')
    parts.append(f'<text x="{WIDTH - 90}" y="{ROW_H * len(ranks) + 22}">{end * 1e3:.1f} ms</text>')
    return "".join(parts) + "</svg>"


def _table(head: list[str], rows: list[list]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def render(f: Facts) -> str:
    # "</" would end the script element early: JSON allows the escaped slash
    facts = json.dumps({"graph": f.graph, "cycle_edges": f.cycle_edges}).replace("</", "<\\/")
    missing = _table(
        ["process group", "op", "seq id", "state", "rank", "missing ranks"],
        [[m.process_group, m.profiling_name, m.seq, m.state, m.rank, list(m.missing_ranks)] for m in f.missing],
    ) if f.missing else "<p>no unfinished op is missing a rank</p>"  # fmt: skip
    counters = _table(["counter", "value"], [[k, v] for k, v in f.counters.items()])
    e = html.escape
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>ppx post-mortem: {e(f.verdict)}</title><style>{STYLE}</style></head><body>
<h1>ppx post-mortem: <span id="verdict">{e(f.verdict)}</span></h1>
<p>{e(f.run_dir)}</p><p id="reason">{e(f.reason)}</p>
<p>cycle: <code id="cycle">{e(f.cycle or "no cycle")}</code></p>
<h2>Timeline (passes and blocking operations per rank)</h2>{gantt(f)}
<h2>Wait-for graph</h2>
<svg id="waitfor" width="400" height="400"><defs><marker id="arrow" viewBox="0 0 10 10" refX="22"
refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/>
</marker></defs></svg><ol id="cycle-ranks"></ol>
<h2>First divergence</h2><p id="divergence">{e(f.divergence or "the ranks' batches and told rows agree on every recorded pass")}</p>
<h2>Missing ranks (Flight Recorder)</h2>{missing}
<p>dumps: <code>postmortem/flight_recorder/</code>; <code>torchfrtrace {e(f.run_dir)}/postmortem/flight_recorder -p ppx_fr_</code></p>
<h2>Counters</h2>{counters}
<h2>Replay</h2><pre id="replay">{e(f.replay)}</pre>
<script type="application/json" id="facts">{facts}</script>
<script>{SCRIPT}</script></body></html>
"""


def write_page(run_dir: str, out: str | None = None) -> str:
    """RUN_DIR/postmortem.html (or `out`); a bad run dir is refused before anything is written."""
    page = render(read(run_dir))
    path = out or os.path.join(run_dir, "postmortem.html")
    with open(path, "w") as f:
        f.write(page)
    return path
