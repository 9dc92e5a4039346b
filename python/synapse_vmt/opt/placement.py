"""Which PMUs a table gets: turn per-table PMU counts into PMU ids (paper §4.4, §6).

The optimizer decides how many PMUs each table holds; this decides which,
moving as few PMUs as possible and keeping each table's PMUs on as few
interconnect channels as possible: with segmented channels, two tables whose
PMUs share a channel contend for it, so the paper's OPT maximises intra-channel
allocation per VMT.

Input is the simulator's ``pmu_states()`` list (``id``, ``state`` in
free/associated/transient, ``table`` owning or draining from, ``channel``).
"""

from __future__ import annotations

from collections import Counter


def current_sets(states: list[dict], names: list[str]) -> dict[str, list[int]]:
    """The PMUs associated with each table now (transient ones are leaving)."""
    out: dict[str, list[int]] = {n: [] for n in names}
    for s in states:
        if s["state"] == "associated" and s["table"] in out:
            out[s["table"]].append(int(s["id"]))
    return out


def plan(states: list[dict], target: dict[str, int]) -> dict[str, list[int]]:
    """New PMU sets for the tables whose set changes.

    1. A table above its target releases PMUs from the channels where it has
       the fewest (so what stays is concentrated).
    2. A table below its target takes PMUs, preferring the channel where it
       already has the most, then a free PMU over one being released or
       draining (those must drain first), then the lowest id.
    Raises ValueError if the targets need more PMUs than exist."""
    chan = {int(s["id"]): int(s["channel"]) for s in states}
    names = list(target)
    have = current_sets(states, names)
    if sum(target.values()) > len(states):
        raise ValueError(f"targets need {sum(target.values())} PMUs, only {len(states)} exist")
    rank = {}  # availability rank of a PMU that may be handed out: 0 free, 1 released now, 2 draining
    for s in states:
        if s["state"] == "free":
            rank[int(s["id"])] = 0
        elif s["state"] == "transient":
            rank[int(s["id"])] = 2
    new = {n: list(have[n]) for n in names}
    for n in names:
        extra = len(new[n]) - target[n]
        if extra > 0:
            per = Counter(chan[p] for p in new[n])
            drop = sorted(new[n], key=lambda p: (per[chan[p]], -p))[:extra]
            for p in drop:
                new[n].remove(p)
                rank[p] = 1
    # Biggest deficits first: they benefit most from a whole channel.
    for n in sorted(names, key=lambda n: -(target[n] - len(new[n]))):
        need = target[n] - len(new[n])
        if need <= 0:
            continue
        per = Counter(chan[p] for p in new[n])
        for _ in range(need):  # one at a time: each pick pulls the next to its channel
            free_per = Counter(chan[p] for p in rank)
            p = min(rank, key=lambda p: (-per[chan[p]], rank[p], -free_per[chan[p]], p))
            new[n].append(p)
            per[chan[p]] += 1
            del rank[p]
    return {n: sorted(new[n]) for n in names if sorted(new[n]) != sorted(have[n])}


def initial(n_pmus: int, channels: int, target: dict[str, int]) -> dict[str, list[int]]:
    """PMU ids for a fresh start: each table fills whole channels in turn
    (PMUs split into equal contiguous channel groups, as the simulator does)."""
    per_chan = max(1, -(-n_pmus // max(channels, 1)))
    states = [{"id": i, "state": "free", "table": None, "channel": i // per_chan} for i in range(n_pmus)]
    return {n: ids for n, ids in plan(states, target).items()} | {n: [] for n in target if target[n] == 0}


def candidate_sets(states: list[dict], name: str, n_max: int) -> list[list[int]]:
    """The PMU ids table ``name`` would hold at each count 1..``n_max``, as
    :func:`plan` gives them with every other table's target unchanged:
    below its count, what it keeps after releasing (nested: each count drops
    one more); above, the PMUs it takes next (free ones first). Past what the
    free pool and the draining PMUs give, it goes on from there as if the
    other tables' PMUs were draining (they must be released first). Lists
    sorted; ``n_max`` at most the PMUs there are."""
    held = current_sets(states, [name])[name]
    avail = len(held) + sum(s["state"] in ("free", "transient") for s in states)
    out = [plan(states, {name: n}).get(name, sorted(held)) for n in range(1, min(n_max, avail) + 1)]
    if n_max > avail:
        top = set(out[-1]) if out else set()
        rest = [dict(s, state="associated", table=name) if int(s["id"]) in top
                else dict(s, state="transient") if s["state"] == "associated" else s for s in states]
        out += [plan(rest, {name: n})[name] for n in range(avail + 1, min(n_max, len(states)) + 1)]
    return out
