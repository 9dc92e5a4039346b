"""Tables written from the data plane: PNA add-on-miss tables, the
interpreter's side (the test oracle of ``crates/synapse-core/src/program/learn.rs``,
whose module doc states the rules both follow).

A BMv2 JSON table object opts in with three attributes beside BMv2's own
(p4c's BMv2 back end has no PNA, so a program using them is written by
hand, as P4-DPDK's ``add_on_miss = true`` tables would be lowered):

- ``"add_on_miss": true`` (exact keys only);
- ``"expire_time_profiles_us"``: the expire time of each profile id, in µs
  (PNA leaves their values to the target; P4-DPDK configures them per table);
- BMv2's ``"max_size"``: most entries, fixed and learned together.

Actions call ``add_entry`` (parameters: the action's name as a string, one
value per action parameter, the expire time profile id) in the table's
default action, and ``restart_expire_timer`` / ``set_entry_expire_time``
(a profile id) in a hit action.
"""

from __future__ import annotations

import heapq

from synapse_vmt.errors import UserError


def add_on_miss(t: dict, path: str) -> tuple[list[int], int] | None:
    """A table's ``(profiles_us, max_size)`` if it is an add-on-miss table, else None."""
    if not t.get("add_on_miss"):
        return None
    name = t.get("name")
    prof = t.get("expire_time_profiles_us", [])
    if not isinstance(prof, list) or not prof or not all(type(x) is int and x >= 0 for x in prof):
        raise UserError(f"{path}: table {name}: add_on_miss: expected expire_time_profiles_us, "
                        f"a non-empty list of integers >= 0 (µs)")
    size = t.get("max_size", 1024)
    if type(size) is not int or size < 0:
        raise UserError(f"{path}: table {name}: expected max_size, an integer >= 0")
    if any(k.get("match_type") != "exact" for k in t.get("key", [])) or not t.get("key"):
        raise UserError(f"{path}: table {name}: add_on_miss: expected a keyed table with exact keys only (PNA)")
    if t.get("with_counters") or t.get("direct_meters") or t.get("action_profile"):
        raise UserError(f"{path}: table {name}: add_on_miss: direct counters, meters and action selectors "
                        f"are not supported on it")
    return prof, size


class Learner:
    """The learned entries of one add-on-miss table (as ``learn::Learner``).

    ``acts``: action name -> ``(fn, action index, parameter widths, next
    node on a hit)``; ``fixed``: the control plane's entries."""

    def __init__(self, profiles_us: list[int], max_size: int, fixed: int, acts: dict):
        self.profiles = profiles_us
        self.max_size = max_size
        self.fixed = fixed
        self.acts = acts
        self.entries: dict[tuple, list] = {}  # key -> [number, fn, data, next, action index, profile, expires]
        self.heap: list[tuple[int, int, tuple]] = []
        self.next_number = fixed
        self.now = 0
        self.adds = self.full = self.expired = self.restarts = self.refused = self.hits = 0

    def age(self, now_us: int) -> None:
        """The packet arrives at ``now_us``: entries whose time is up go."""
        self.now = now_us
        heap = self.heap
        while heap and heap[0][0] <= now_us:
            t, number, key = heapq.heappop(heap)
            e = self.entries.get(key)
            if e is not None and e[0] == number and e[6] == t:
                del self.entries[key]
                self.expired += 1

    def lookup(self, key: tuple) -> list | None:
        e = self.entries.get(key)
        if e is not None:
            self.hits += 1
        return e

    def add(self, key: tuple, action: str, data: tuple, profile: int) -> None:
        act = self.acts.get(action)
        if act is None or not 0 <= profile < len(self.profiles):
            self.refused += 1
            return
        if key in self.entries:
            return
        if self.fixed + len(self.entries) >= self.max_size:
            self.full += 1
            return
        fn, ai, widths, nxt = act
        data = tuple(v & ((1 << w) - 1) for v, w in zip(data, widths))
        expires = self.now + self.profiles[profile]
        number = self.next_number
        self.next_number += 1
        self.entries[key] = [number, fn, data, nxt, ai, profile, expires]
        heapq.heappush(self.heap, (expires, number, key))
        self.adds += 1

    def restart(self, key: tuple, profile: int | None = None) -> None:
        e = self.entries.get(key)
        if e is None:
            return
        if profile is not None:
            if not 0 <= profile < len(self.profiles):
                return
            e[5] = profile
        e[6] = self.now + self.profiles[e[5]]
        heapq.heappush(self.heap, (e[6], e[0], key))
        self.restarts += 1

    def stats(self) -> dict:
        return {"adds": self.adds, "full": self.full, "expired": self.expired, "restarts": self.restarts,
                "hits": self.hits, "entries": len(self.entries)}


class Context:
    """Which add-on-miss table's action runs (the generated code sets it):
    its learner, the packet's key there and whether a learned entry hit."""

    __slots__ = ("learner", "key", "hit")

    def __init__(self):
        self.learner: Learner | None = None
        self.key: tuple = ()
        self.hit = False

    def add(self, action: str, data: tuple, profile: int) -> None:
        lr = self.learner
        if lr is None or self.hit:
            if lr is not None:
                lr.refused += 1
            return
        lr.add(self.key, action, data, profile)

    def restart(self, profile: int | None = None) -> None:
        if self.learner is not None and self.hit:
            self.learner.restart(self.key, profile)
