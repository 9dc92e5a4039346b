"""Where the table graph's nodes go: a layered (Sugiyama-style) drawing of
the control-flow DAG, folded into rows.

A P4 program's tables form a long DAG: the 123-table switch program is 88
layers deep and mostly one table wide. Drawn left to right in one line it
would be unreadable, so the layers are laid out like text: ``per_row``
layers left to right, then the next row below. Steps:

1. layers: the longest path from a source (edges that close a cycle, which a
   CFG should not have but observed edges might, are ignored); a table with
   no edge at all (a scenario's independent tables) gets a layer of its own
   after the others', so many such tables fill rows like words, not one
   column 100 tables tall;
2. order inside a layer: barycentre sweeps (a node moves towards the mean
   position of its neighbours in the layers before and after), the classic
   crossing-reduction heuristic;
3. coordinates: layer ``k`` at column ``k % per_row`` of row ``k // per_row``,
   a layer's nodes one unit apart, centred in their row;
4. edge paths: a straight segment between neighbouring layers of a row; an
   arc over the row for an edge that skips layers (so it does not run
   through the tables in between); an S-curve for an edge to a later row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Layout:
    pos: dict[str, tuple[float, float]]  # node -> (x, y); y grows downwards (rows go down)
    layer: dict[str, int]
    per_row: int
    rows: int
    height: float  # in node units, all rows

    def path(self, s: str, t: str, n: int = 12) -> tuple[list[float], list[float]]:
        """Points of the drawn edge s -> t."""
        (x0, y0), (x1, y1) = self.pos[s], self.pos[t]
        ls, lt = self.layer[s], self.layer[t]
        same_row = ls // self.per_row == lt // self.per_row
        if same_row and lt == ls + 1:
            return [x0, x1], [y0, y1]
        u = np.linspace(0.0, 1.0, n)
        if same_row and lt > ls:
            # arc above the row's nodes, higher for longer skips
            cx, cy = (x0 + x1) / 2, min(y0, y1) - 0.6 - 0.12 * (lt - ls)
            xs = (1 - u) ** 2 * x0 + 2 * u * (1 - u) * cx + u ** 2 * x1
            ys = (1 - u) ** 2 * y0 + 2 * u * (1 - u) * cy + u ** 2 * y1
            return xs.tolist(), ys.tolist()
        # to another row (or backwards): leave to the right and down, arrive from the left and above
        p = [(x0, y0), (x0 + 0.8, y0 + 0.7), (x1 - 0.8, y1 - 0.7), (x1, y1)]
        xs = sum(c * (1 - u) ** (3 - i) * u ** i * px for i, (c, (px, _)) in enumerate(zip((1, 3, 3, 1), p)))
        ys = sum(c * (1 - u) ** (3 - i) * u ** i * py for i, (c, (_, py)) in enumerate(zip((1, 3, 3, 1), p)))
        return list(xs), list(ys)


def _acyclic(nodes: list[str], edges: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``edges`` without the ones a depth-first search finds closing a cycle."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for s, t in edges:
        if s != t:
            succ[s].append(t)
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    back: set[tuple[str, str]] = set()
    for root in nodes:
        if root in state:
            continue
        stack = [(root, iter(succ[root]))]
        state[root] = 1
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                state[v] = 2
                stack.pop()
            elif state.get(w) == 1:
                back.add((v, w))
            elif w not in state:
                state[w] = 1
                stack.append((w, iter(succ[w])))
    return [e for e in edges if e[0] != e[1] and e not in back]


def layout(nodes: list[str], edges: list[tuple[str, str]], per_row: int = 12, sweeps: int = 6) -> Layout:
    if not nodes:
        return Layout({}, {}, per_row, 0, 0.0)
    dag = _acyclic(nodes, list(dict.fromkeys(edges)))
    pred: dict[str, list[str]] = {n: [] for n in nodes}
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for s, t in dag:
        pred[t].append(s)
        succ[s].append(t)
    # 1. longest path from a source (Kahn's order)
    indeg = {n: len(pred[n]) for n in nodes}
    ready = [n for n in nodes if indeg[n] == 0]
    layer: dict[str, int] = {}
    while ready:
        v = ready.pop(0)
        layer[v] = max((layer[p] + 1 for p in pred[v]), default=0)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    alone = [n for n in nodes if not pred[n] and not succ[n]]
    if len(alone) < len(nodes):
        L = max(layer[n] for n in nodes if pred[n] or succ[n]) + 1
    else:
        L = 0
    for i, n in enumerate(alone):
        layer[n] = L + i
    L += len(alone)
    layers: list[list[str]] = [[] for _ in range(L)]
    for n in nodes:
        layers[layer[n]].append(n)
    # 2. barycentre sweeps, down then up
    idx = {n: float(i) for lay in layers for i, n in enumerate(lay)}
    for k in range(sweeps):
        rng = range(1, L) if k % 2 == 0 else range(L - 2, -1, -1)
        for li in rng:
            nb = pred if k % 2 == 0 else succ

            def bary(n: str) -> float:
                ps = [idx[p] for p in nb[n]]
                return sum(ps) / len(ps) if ps else idx[n]

            layers[li].sort(key=lambda n: (bary(n), idx[n]))
            for i, n in enumerate(layers[li]):
                idx[n] = float(i)
    # 3. rows of per_row layers
    per_row = max(1, min(per_row, L))
    rows = -(-L // per_row)
    pos: dict[str, tuple[float, float]] = {}
    top = 0.0
    for r in range(rows):
        lays = layers[r * per_row:(r + 1) * per_row]
        h = max(len(x) for x in lays)
        for c, lay in enumerate(lays):
            off = (h - len(lay)) / 2
            for i, n in enumerate(lay):
                pos[n] = (float(c), top + off + i)
        top += h + 1.2  # a gap for the arcs and the row change
    return Layout(pos, layer, per_row, rows, top - 1.2)
