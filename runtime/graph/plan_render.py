"""Pictures of a JobGraph: Graphviz DOT, a self-drawn SVG, and an HTML page holding both the SVG and
the text plan (`millrace plan --format dot|svg|html`). The SVG needs no system package: vertices
(chains) are laid out in layers by longest path from the sources, ordered within a layer by the mean
position of their inputs (one barycentre sweep), edges drawn as curves labelled with their
partitioner; blocking edges dashed. Each node names its chain's operators, its parallelism and its
slot sharing group (with the group's declared resources).
"""
from __future__ import annotations

import html
from dataclasses import dataclass

from runtime.graph.job_graph import JobGraph, JobVertex, ResultPartitionType

NODE_W, LINE_H, PAD, GAP_X, GAP_Y = 260, 16, 10, 90, 28
GROUP_COLORS = ("#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3", "#e0e7ff", "#ccfbf1", "#fee2e2", "#f3e8ff")


@dataclass
class _Node:
    vertex: JobVertex
    number: int
    layer: int
    lines: list[str]
    x: float = 0.0
    y: float = 0.0

    @property
    def height(self) -> float:
        return 2 * PAD + LINE_H * len(self.lines)


def _lines(job_graph: JobGraph, v: JobVertex, number: int, live: bool = False) -> list[str]:
    spec = job_graph.group_resources().get(v.slot_sharing_group)
    parallelism = f"parallelism from the data, at most {v.parallelism}" if v.dynamic_parallelism else f"parallelism {v.parallelism}"
    lines = [f"[{number}] " + " -> ".join(v.operator_names)]
    wrapped: list[str] = []
    for line in lines:  # long chains wrap at operator boundaries
        while len(line) > 38:
            cut = line.rfind(" -> ", 0, 38)
            cut = cut if cut > 0 else 38
            wrapped.append(line[:cut])
            line = "   " + line[cut:].removeprefix(" ")
        wrapped.append(line)
    group = f"group '{v.slot_sharing_group}'" + (f": {spec.describe()}" if spec is not None else "")
    return [*wrapped, parallelism, group, *([""] if live else [])]  # live: a line the dashboard fills with figures


def layout(job_graph: JobGraph, live: bool = False) -> list[_Node]:
    vertices = job_graph.topological_vertices()
    number = {v.id: i + 1 for i, v in enumerate(vertices)}
    layer: dict[str, int] = {}
    for v in vertices:  # topological: inputs first
        layer[v.id] = max((layer[e.source_vertex_id] + 1 for e in v.inputs), default=0)
    nodes = {v.id: _Node(v, number[v.id], layer[v.id], _lines(job_graph, v, number[v.id], live)) for v in vertices}
    by_layer: dict[int, list[_Node]] = {}
    for n in nodes.values():
        by_layer.setdefault(n.layer, []).append(n)
    order: dict[str, float] = {}
    for k in sorted(by_layer):
        row = by_layer[k]
        # barycentre of the inputs' positions keeps edges from crossing where it can
        row.sort(key=lambda n: (sum(order[e.source_vertex_id] for e in n.vertex.inputs) / len(n.vertex.inputs)) if n.vertex.inputs else n.number)
        for i, n in enumerate(row):
            order[n.vertex.id] = i
    for k, row in by_layer.items():
        y: float = PAD
        for n in row:
            n.x, n.y = PAD + k * (NODE_W + GAP_X), y
            y += n.height + GAP_Y
    return sorted(nodes.values(), key=lambda n: n.number)


def to_svg(job_graph: JobGraph, live: bool = False) -> str:
    """`live`: each node gets an empty last line (class "live") for figures a page writes into it."""
    nodes = layout(job_graph, live)
    by_id = {n.vertex.id: n for n in nodes}
    groups = list(dict.fromkeys(v.slot_sharing_group for v in job_graph.topological_vertices()))
    width = max(n.x + NODE_W for n in nodes) + PAD
    height = max(n.y + n.height for n in nodes) + PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f"<title>{html.escape(job_graph.job_name)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" fill="#475569"/></marker></defs>',
    ]
    for n in nodes:
        for e in n.vertex.inputs:
            src = by_id[e.source_vertex_id]
            x1, y1 = src.x + NODE_W, src.y + src.height / 2
            x2, y2 = n.x, n.y + n.height / 2
            blocking = job_graph.dataset(e.dataset_id).result_type is ResultPartitionType.BLOCKING
            dash = ' stroke-dasharray="6 4"' if blocking else ""
            mid = (x1 + x2) / 2
            label = e.partitioner.value.upper() + (" (blocking)" if blocking else "")
            out.append(
                f'<path class="edge" data-source="{src.number}" data-target="{n.number}" d="M {x1:.0f} {y1:.0f} C {mid:.0f} {y1:.0f}, '
                f'{mid:.0f} {y2:.0f}, {x2:.0f} {y2:.0f}" fill="none" stroke="#475569" stroke-width="1.5"{dash} marker-end="url(#arrow)"/>'
            )
            out.append(f'<text x="{mid:.0f}" y="{(y1 + y2) / 2 - 5:.0f}" text-anchor="middle" fill="#334155">{html.escape(label)}</text>')
    for n in nodes:
        fill = GROUP_COLORS[groups.index(n.vertex.slot_sharing_group) % len(GROUP_COLORS)]
        out.append(f'<g class="node" data-vertex="{html.escape(n.vertex.id)}" data-number="{n.number}">')
        out.append(f'<rect x="{n.x:.0f}" y="{n.y:.0f}" width="{NODE_W}" height="{n.height:.0f}" rx="8" fill="{fill}" stroke="#1e293b"/>')
        for i, line in enumerate(n.lines):
            weight = ' font-weight="bold"' if i == 0 or line.startswith("   ") and i < len(n.lines) - 2 else ""
            cls = ' class="live"' if live and i == len(n.lines) - 1 else ""
            out.append(f'<text{cls} x="{n.x + PAD:.0f}" y="{n.y + PAD + LINE_H * (i + 1) - 4:.0f}"{weight}>{html.escape(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _dot_id(v: JobVertex) -> str:
    return '"' + v.id.replace('"', "") + '"'


def to_dot(job_graph: JobGraph) -> str:
    """Graphviz DOT (`dot -Tpng`): one box per chain, clusters per slot sharing group."""
    vertices = job_graph.topological_vertices()
    number = {v.id: i + 1 for i, v in enumerate(vertices)}
    specs = job_graph.group_resources()
    lines = [f"digraph {_quote(job_graph.job_name)} {{", "  rankdir=LR;", '  node [shape=box, style="rounded,filled", fillcolor="#f8fafc"];']
    for i, g in enumerate(dict.fromkeys(v.slot_sharing_group for v in vertices)):
        spec = specs.get(g)
        label = f"slot sharing group '{g}'" + (f"\\n{spec.describe()}" if spec is not None else "")
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_quote(label)}; style=filled; fillcolor={_quote(GROUP_COLORS[i % len(GROUP_COLORS)])};")
        for v in vertices:
            if v.slot_sharing_group == g:
                label = f"[{number[v.id]}] " + " -> ".join(v.operator_names) + f"\\nparallelism {v.parallelism}"
                lines.append(f"    {_dot_id(v)} [label={_quote(label)}];")
        lines.append("  }")
    for v in vertices:
        for e in v.inputs:
            blocking = job_graph.dataset(e.dataset_id).result_type is ResultPartitionType.BLOCKING
            style = ", style=dashed" if blocking else ""
            label = e.partitioner.value.upper() + (" (blocking)" if blocking else "")
            lines.append(f"  {_dot_id(job_graph.vertex(e.source_vertex_id))} -> {_dot_id(v)} [label={_quote(label)}{style}];")
    lines.append("}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'


def to_html(job_graph: JobGraph) -> str:
    """One self-contained page: the picture and the text plan."""
    from runtime.graph.plan import format_plan

    return (
        "<!doctype html><html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(job_graph.job_name)}: plan</title>"
        "<style>body{font-family:Helvetica,Arial,sans-serif;margin:24px}pre{background:#f1f5f9;padding:12px}</style>"
        f"</head><body><h1>{html.escape(job_graph.job_name)}</h1>{to_svg(job_graph)}"
        f"<pre>{html.escape(format_plan(job_graph))}</pre></body></html>"
    )


FORMATS = ("text", "dot", "svg", "html")


def render(job_graph: JobGraph, fmt: str) -> str:
    from runtime.graph.plan import format_plan

    if fmt == "text":
        return format_plan(job_graph)
    return {"dot": to_dot, "svg": to_svg, "html": to_html}[fmt](job_graph)


__all__ = ["FORMATS", "layout", "render", "to_dot", "to_html", "to_svg"]
