"""simple_switch's packet flow around a program's pipelines, for the interpreter.

BMv2's ``targets/simple_switch/simple_switch.cpp`` runs each received
packet through these steps; :class:`Flow` does the same, one input packet
at a time, every copy it makes processed before the next packet (copies in
the order they are made):

1. **ingress**: metadata zeroed, ``ingress_port``, ``packet_length``,
   ``instance_type`` and the global timestamp set; the parser runs, then
   the checksums marked ``verify`` (``standard_metadata.checksum_error``);
   then the ingress pipeline.
2. after ingress, in BMv2's order: an **ingress clone** (``clone``/``clone3``
   I2E) whose mirroring session is configured re-parses the packet as it
   arrived, zeroes the metadata, copies the clone's field list from the
   ingress packet and goes to the session's port and/or multicast group
   (instance type 1); a **digest** (``generate_digest``) records its learn
   list's fields; a **resubmit** sends the packet as it arrived back to
   ingress with the metadata zeroed but its field list (instance type 6) and
   the packet goes no further; a **multicast group** (``mcast_grp`` != 0)
   makes one copy per replica of the group, each with its ``egress_rid``
   (instance type 5), and the packet goes no further; ``egress_spec`` equal
   to the drop port (``mark_to_drop``) drops it; else it goes to
   ``egress_spec``.
3. **enqueue**: a packet whose priority (``intrinsic_metadata.priority``) is
   not below the number of priority queues is dropped ("Priority out of
   range").
4. **egress**: ``egress_port`` set, ``egress_spec`` set to drop port + 1,
   ``packet_length`` the packet's current length (headers added or removed
   in ingress count); the egress pipeline; an **egress clone** (E2E) copies
   the packet as egress left it, metadata zeroed but its field list
   (instance type 2), to the session's port or group; ``egress_spec`` equal
   to the drop port drops the packet; else the deparser runs (the checksums
   marked ``update`` first) and a **recirculate** sends the deparsed bytes
   back to ingress with the metadata zeroed but its field list (instance
   type 4); else the packet leaves on ``egress_port``.

A packet that resubmits or recirculates forever is stopped after
:data:`MAX_PASSES` passes and counted as dropped ("pass limit"); BMv2 would
loop. Time: a packet's arrival time (microseconds from the run's start) is
its ``ingress_global_timestamp`` and ``egress_global_timestamp`` and the
meters' clock; queueing takes no time (``deq_timedelta`` 0, queue depths 0).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from synapse_vmt.errors import UserError
from synapse_vmt.p4.externs import Meter, SplitMix64, SwitchConfig, SwitchOptions
from synapse_vmt.p4.hashes import hasher, known, pack_bits

MAX_PASSES = 64  # ingress + egress passes of one input packet (and its copies)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6


@dataclass
class Counts:
    """What the run's externs did, summed over the run."""

    drops: dict[str, int] = field(default_factory=dict)  # reason -> packets (copies included)
    out_ports: dict[int, int] = field(default_factory=dict)  # egress port -> packets sent
    copies: dict[str, int] = field(default_factory=dict)  # ingress_clone, egress_clone, resubmit, recirculate, replication
    counters: dict[str, dict[int, list[int]]] = field(default_factory=dict)  # counter -> index -> [packets, bytes]
    direct: dict[str, dict[int, list[int]]] = field(default_factory=dict)  # table -> entry -> [packets, bytes]
    digests: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # (learn list, field values)
    meter_colors: dict[str, list[int]] = field(default_factory=dict)  # meter -> [green, yellow, red]
    rejects: dict[str, int] = field(default_factory=dict)  # parser error name -> packets


class Compiled:
    """What :class:`Flow` needs of a program, resolved once: calculations,
    checksums, field and learn lists, selectors, the deparser's order and
    the slots simple_switch reads by name."""

    def __init__(self, prog):
        doc, phv, path = prog.doc, prog.phv, prog.path
        self.phv = phv
        tf = phv.target_field
        self.s_port = tf("standard_metadata.ingress_port")
        self.s_len = tf("standard_metadata.packet_length")
        self.s_inst = tf("standard_metadata.instance_type")
        self.s_espec = tf("standard_metadata.egress_spec")
        self.s_eport = tf("standard_metadata.egress_port")
        self.s_perr = tf("standard_metadata.parser_error")
        self.s_cerr = tf("standard_metadata.checksum_error")
        self.s_mcast = tf("intrinsic_metadata.mcast_grp")
        self.s_rid = tf("intrinsic_metadata.egress_rid")
        self.s_prio = tf("intrinsic_metadata.priority")
        self.s_times = [s for s in (tf("intrinsic_metadata.ingress_global_timestamp"),) if s is not None]
        self.s_etimes = [s for s in (tf("intrinsic_metadata.egress_global_timestamp"),) if s is not None]
        q = [tf(f"queueing_metadata.{f}") for f in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")]
        self.s_queue = q if all(s is not None for s in q) else None  # BMv2 sets them only if all four exist
        self.regs = phv.regs
        self.metadata = [s for h in phv.headers.values() if h.metadata for _, _, s in h.fields]
        # a program without v1model's standard metadata (a hand-written test
        # program) gets hidden fields in their place
        for name in ("port", "len", "inst", "espec", "eport"):
            if getattr(self, f"s_{name}") is None:
                setattr(self, f"s_{name}", phv._new(f"$std.{name}", 32))

        def inputs(items: list, where: str) -> list[tuple]:
            out = []
            for x in items:
                t = x.get("type") if isinstance(x, dict) else None
                if t == "field":
                    s = phv.field_slot(x.get("value"))
                    h = phv.headers[x["value"][0]]
                    out.append(("f", s, phv.widths[s], None if h.metadata else h.valid))
                elif t == "hexstr":
                    v, bw = x.get("value"), x.get("bitwidth")
                    if not isinstance(bw, int):
                        raise UserError(f"{path}: {where}: expected a bitwidth for constant {v!r}")
                    out.append(("c", int(v, 16), bw))
                elif t == "header":
                    h = phv.header(x.get("value"))
                    out.append(("h", tuple((s, w) for _, w, s in h.fields), h.valid))
                elif t == "payload":
                    out.append(("payload",))
                else:
                    raise UserError(f"{path}: {where}: expected inputs of type field, hexstr, header or payload, found {t!r}")
            return out

        self.calcs: list[tuple[str, str, list]] = []  # (name, algo, inputs), in Objects.calcs order
        for i, c in enumerate(doc.get("calculations", []) or []):
            where = f"calculations[{i}] ({c.get('name')})"
            if not known(str(c.get("algo"))) and c.get("algo") != "random":
                raise UserError(f"{path}: {where}: expected a hash algorithm simple_switch knows, found {c.get('algo')!r}")
            self.calcs.append((c["name"], c["algo"], inputs(c.get("input", []), where)))
        calc_k = {n: k for k, (n, _, _) in enumerate(self.calcs)}
        # verification only matters to a program that reads checksum_error
        self.verify = self.s_cerr is not None and _refers_to(
            [doc.get(k) for k in ("actions", "pipelines")], phv, {self.s_cerr})
        self.checksums: list[tuple] = []  # (name, target slot, its header's valid slot, calc k, verify, update, cond src)
        for i, c in enumerate(doc.get("checksums", []) or []):
            where = f"checksums[{i}] ({c.get('name')})"
            if c.get("type", "generic") != "generic" or c.get("calculation") not in calc_k:
                raise UserError(f"{path}: {where}: expected a generic checksum over a calculation of the program")
            s = phv.field_slot(c.get("target"))
            cond = prog.cg.expr(c["if_cond"]) if c.get("if_cond") else "True"
            self.checksums.append((c["name"], s, phv.headers[c["target"][0]].valid, calc_k[c["calculation"]],
                                   c.get("verify", True), c.get("update", True), cond))
        self.field_lists: dict[int, list[int]] = {}
        for fl in doc.get("field_lists", []) or []:
            self.field_lists[int(fl["id"])] = [phv.field_slot(e["value"]) for e in fl.get("elements", []) if e.get("type") == "field"]
        self.learn_lists: dict[int, tuple[str, list[int]]] = {}
        for ll in doc.get("learn_lists", []) or []:
            self.learn_lists[int(ll["id"])] = (ll["name"], [phv.field_slot(e["value"]) for e in ll.get("elements", [])])
        self.selectors: dict[str, tuple[str, list]] = {}
        for pl in doc["pipelines"]:
            for ap in pl.get("action_profiles", []) or []:
                if isinstance(ap.get("selector"), dict):
                    sel = ap["selector"]
                    if not known(str(sel.get("algo"))):
                        raise UserError(f"{path}: action profile {ap['name']}: expected a hash algorithm simple_switch knows, "
                                        f"found {sel.get('algo')!r}")
                    self.selectors[ap["name"]] = (sel["algo"], inputs(sel.get("input", []), f"action profile {ap['name']}"))
        deps = doc.get("deparsers") or []
        self.deparse_order = [phv.header(h) for h in (deps[0].get("order", []) if deps else [])]
        pipes = [pl.get("name") for pl in doc["pipelines"]]
        self.ingress = pipes.index("ingress") if "ingress" in pipes else 0
        self.egress = pipes.index("egress") if "egress" in pipes else (1 if len(pipes) > 1 else None)
        # the frame cache is wrong for a program whose packets depend on time: one that reads a timestamp
        times = set(self.s_times + self.s_etimes + (self.s_queue[:1] if self.s_queue else []))
        self.reads_time = bool(times) and _refers_to(
            [doc.get(k) for k in ("actions", "pipelines", "parsers", "calculations", "checksums")], phv, times)


def _refers_to(node: object, phv, slots: set[int]) -> bool:
    """Whether a JSON tree names a field (``[header, field]``) held in one of ``slots``."""
    if isinstance(node, list):
        if len(node) == 2 and all(isinstance(x, str) for x in node):
            return phv.slot.get((node[0], node[1])) in slots
        return any(_refers_to(x, phv, slots) for x in node)
    if isinstance(node, dict):
        return any(_refers_to(x, phv, slots) for x in node.values())
    return False


def _buffer(inputs: list, p: list, ctx: list) -> bytes:
    """BMv2's ``BufBuilder`` over the PHV ``p`` (``ctx``: the packet's bytes and where its payload starts)."""
    parts: list[tuple[int, int]] = []
    tail = b""
    for x in inputs:
        t = x[0]
        if t == "f":
            if x[3] is None or p[x[3]]:  # a field of an invalid header adds nothing
                parts.append((p[x[1]], x[2]))
        elif t == "c":
            parts.append((x[1], x[2]))
        elif t == "h":
            if p[x[2]]:
                parts.extend((p[s], w) for s, w in x[1])
        else:
            tail = bytes(ctx[0][ctx[1]:])
    return pack_bits(parts) + tail


class Flow:
    """One run's switch: the externs' state and the packet flow of the
    module doc. ``run_pass(stage, p, ...)`` is supplied by the interpreter
    (it runs a pipeline and the parser over a PHV)."""

    def __init__(self, c: Compiled, objects, config: SwitchConfig, options: SwitchOptions, seed: int, rng):
        self.c, self.cfg, self.opt = c, config, options
        self.counts = Counts()
        doc_regs = objects.registers
        self.registers: dict[str, list[int]] = {}
        for name, (k, size, bw) in doc_regs.items():
            cells = [0] * size
            for i, v in config.registers.get(name, {}).items():
                cells[i] = v & ((1 << bw) - 1)
            self.registers[name] = cells
        self.ctx = [b"", 0, 0, 0]  # the current pass: frame, payload offset, ingress length, now (us)
        self.effects: list[tuple] | None = None  # the current packet's, for the frame cache
        self.drop_pipe: int | None = None  # the pipeline whose mark_to_drop dropped the current packet
        self.rng = SplitMix64(seed)  # random() and the random algorithm: the Rust executor's generator
        crc = config.crc_params
        self.hash_fns = [self._calc(algo, inputs, crc.get(name)) for name, algo, inputs in c.calcs]
        self.selector_fns = {n: self._calc(a, inp, None) for n, (a, inp) in c.selectors.items()}
        # meters: per array, a cell per configured index (unconfigured cells are GREEN)
        self.meters: dict[str, tuple[int, dict[int, Meter]]] = {}
        self.configured_meters = False
        for name, k in objects.meters.items():
            self.meters[name] = (k, {})
            self.counts.meter_colors[name] = [0, 0, 0]

    def _calc(self, algo: str, inputs: list, crc):
        ctx = self.ctx
        if algo == "random":  # not a BMv2 algorithm: the run's seeded draws
            rng = self.rng
            return lambda p: rng.next()
        h = hasher(algo, crc)
        return lambda p: h(_buffer(inputs, p, ctx))

    def effect(self, e: tuple) -> None:
        """Applies one of a packet's effects on the run's counts (and keeps it for the frame cache)."""
        if self.effects is not None:
            self.effects.append(e)
        kind = e[0]
        cs = self.counts
        if kind == "c":
            cell = cs.counters.setdefault(e[1], {}).setdefault(e[2], [0, 0])
            cell[0] += 1
            cell[1] += e[3]
        elif kind == "dc":
            cell = cs.direct.setdefault(e[1], {}).setdefault(e[2], [0, 0])
            cell[0] += 1
            cell[1] += e[3]
        elif kind == "drop":
            cs.drops[e[1]] = cs.drops.get(e[1], 0) + 1
        elif kind == "out":
            cs.out_ports[e[1]] = cs.out_ports.get(e[1], 0) + 1
        elif kind == "copy":
            cs.copies[e[1]] = cs.copies.get(e[1], 0) + 1
        elif kind == "digest":
            cs.digests.append((e[1], e[2]))
        elif kind == "color":
            cs.meter_colors[e[1]][e[2]] += 1
        elif kind == "reject":
            cs.rejects[e[1]] = cs.rejects.get(e[1], 0) + 1

    # ---- the externs the generated code calls ---------------------------------

    def _meter_cell(self, name: str, cells: dict, i: int, packets: bool) -> Meter | None:
        m = cells.get(i)
        if m is None:
            rates = self.cfg.meter_rates.get(name, {})
            r = rates.get(i, rates.get(None))
            if r is None:
                return None
            m = cells[i] = Meter(packets)
            m.set_rates(r)
        return m

    def bindings(self, objects, doc: dict) -> dict[str, object]:
        """The names the generated code calls: ``_RG{k}`` (register cells),
        ``_CT{k}`` (count), ``_MT{k}`` (execute_meter), ``_HS{k}`` (a
        calculation's hash of the PHV), ``_RNG`` (random)."""
        ns: dict[str, object] = {}
        ctx, effect = self.ctx, self.effect
        for name, (k, _size, _bw) in objects.registers.items():
            ns[f"_RG{k}"] = self.registers[name]
        sizes = {c["name"]: int(c.get("size", 0)) for c in doc.get("counter_arrays", []) or []}
        for name, k in objects.counters.items():
            size = sizes.get(name, 0)

            def count(i, name=name, size=size):
                if i < size:  # out of bounds: BMv2 logs an error and counts nothing
                    effect(("c", name, i, ctx[2]))
            ns[f"_CT{k}"] = count
        kinds = {m["name"]: m.get("type") == "packets" for m in doc.get("meter_arrays", []) or []}
        msizes = {m["name"]: int(m.get("size", 0)) for m in doc.get("meter_arrays", []) or []}
        for name, (k, cells) in self.meters.items():
            def meter(i, name=name, cells=cells, packets=kinds.get(name, False), size=msizes.get(name, 0)):
                m = self._meter_cell(name, cells, i, packets) if i < size else None
                color = m.execute(ctx[2], ctx[3]) if m is not None else 0
                effect(("color", name, color))
                return color
            ns[f"_MT{k}"] = meter
        for k, fn in enumerate(self.hash_fns):
            ns[f"_HS{k}"] = fn
        ns["_RNG"] = self.rng.range
        return ns

    def direct_meter(self, name: str, packets: bool):
        """A direct meter's execute for a table: entry handle -> colour."""
        cells: dict[int, Meter] = {}
        ctx, effect = self.ctx, self.effect

        def run(handle: int) -> int:
            m = self._meter_cell(name, cells, handle, packets)
            color = m.execute(ctx[2], ctx[3]) if m is not None else 0
            effect(("color", name, color))
            return color
        return run

    @property
    def stateful(self) -> bool:
        """Whether a frame's fate can depend on the packets before it or on time."""
        return bool(self.cfg.meter_rates) or self.c.reads_time

    # ---- the packet flow -------------------------------------------------------

    def _reset_metadata(self, p: list, keep_from: list | None, fl: int) -> None:
        """BMv2's ``reset_metadata`` and ``copy_fields_between_phvs``: metadata
        zeroed, then the field list's fields copied from ``keep_from``; the
        packet's registers cleared."""
        for s in self.c.metadata:
            p[s] = 0
        if keep_from is not None:
            for s in self.c.field_lists.get(fl, ()):
                p[s] = keep_from[s]
        for r in ("clone", "clone_fl", "resubmit", "recirculate", "learn"):
            p[self.c.regs[r]] = 0

    def _dropped_in(self, pipeline: int) -> None:
        """The first mark_to_drop of the received frame's copies names its pipeline (Trace.drop_pipeline)."""
        if self.drop_pipe is None:
            self.drop_pipe = pipeline

    def process(self, buf: bytes, port: int, now_us: int, tmpl: list, parse, pipe, deparse) -> int:
        """Runs one received frame and every copy it makes; returns how many
        packets left the switch. ``parse(p, buf[, count])`` -> payload offset,
        ``pipe(index, p)`` runs a pipeline, ``deparse(p, buf, pos)`` -> bytes."""
        c, regs, effect = self.c, self.c.regs, self.effect
        drop_port = self.opt.drop_port
        work: deque = deque()
        work.append(("i", buf, None, NORMAL, len(buf)))
        outputs = passes = 0
        while work:
            passes += 1
            if passes > MAX_PASSES:
                effect(("drop", "pass limit (resubmit/recirculate loop)"))
                break
            item = work.popleft()
            if item[0] == "i":
                self._ingress(item, port, now_us, tmpl, parse, pipe, work)
                continue
            _, eport, p, ilen, frame, pos = item
            self.ctx[0], self.ctx[1], self.ctx[2] = frame, pos, ilen
            p[c.s_eport] = eport
            p[c.s_espec] = drop_port + 1
            p[c.s_len] = p[regs["length"]]
            for s in c.s_etimes:
                p[s] = now_us
            if c.egress is not None:
                pipe(c.egress, p)
            if p[regs["clone"]]:
                cfg = self.cfg.mirroring.get(p[regs["clone"]] & 0xFFFF)
                if cfg is not None:
                    q = p[:]
                    self._reset_metadata(q, p, p[regs["clone_fl"]])
                    q[c.s_inst] = EGRESS_CLONE
                    effect(("copy", "egress_clone"))
                    self._send(q, cfg, ilen, frame, pos, work)
                p[regs["clone"]] = 0
            if p[c.s_espec] == drop_port:
                effect(("drop", "egress: mark_to_drop"))
                self._dropped_in(1)
                continue
            if p[regs["recirculate"]]:
                out = deparse(p, frame, pos)
                effect(("copy", "recirculate"))
                work.append(("i", out, (p, p[regs["recirculate"]]), RECIRC, len(out)))
                continue
            effect(("out", eport))
            outputs += 1
        return outputs

    def _ingress(self, item, port, now_us, tmpl, parse, pipe, work) -> None:
        c, regs, effect = self.c, self.c.regs, self.effect
        _, frame, keep, inst, ilen = item
        p = tmpl[:]
        if keep is not None:  # resubmitted or recirculated: metadata zeroed but the field list
            src, fl = keep
            for s in c.field_lists.get(fl, ()):
                p[s] = src[s]
        else:
            p[c.s_port] = port
        p[c.s_len] = len(frame)
        p[regs["length"]] = len(frame)
        p[c.s_inst] = inst
        for s in c.s_times:
            p[s] = now_us
        if c.s_queue is not None:
            p[c.s_queue[0]] = now_us
        self.ctx[0], self.ctx[2], self.ctx[3] = frame, ilen, now_us
        pos = parse(p, frame)
        self.ctx[1] = pos
        pipe(c.ingress, p)
        espec = p[c.s_espec]
        mgid = p[c.s_mcast] if c.s_mcast is not None else 0
        if p[regs["clone"]]:
            cfg = self.cfg.mirroring.get(p[regs["clone"]] & 0xFFFF)
            if cfg is not None:
                # the packet as it arrived, parsed again, its metadata zeroed but the clone's field list
                q = tmpl[:]
                q[c.s_port] = p[c.s_port]
                q[c.s_len] = len(frame)
                qpos = parse(q, frame, False)
                self._reset_metadata(q, p, p[regs["clone_fl"]])
                q[c.s_inst] = INGRESS_CLONE
                q[regs["length"]] = len(frame)
                effect(("copy", "ingress_clone"))
                self._send(q, cfg, ilen, frame, qpos, work)
                self.ctx[1] = pos
            p[regs["clone"]] = 0
        if p[regs["learn"]]:
            name, slots = c.learn_lists.get(p[regs["learn"]], (f"learn list {p[regs['learn']]}", []))
            effect(("digest", name, tuple(p[s] for s in slots)))
        if p[regs["resubmit"]]:
            effect(("copy", "resubmit"))
            work.append(("i", frame, (p, p[regs["resubmit"]]), RESUBMIT, ilen))
            return
        if mgid:
            p[c.s_inst] = REPLICATION
            self._multicast(p, mgid, ilen, frame, pos, work)
            return
        if espec == self.opt.drop_port:
            effect(("drop", "ingress: mark_to_drop"))
            self._dropped_in(0)
            return
        p[c.s_inst] = NORMAL
        self._enqueue(espec, p, ilen, frame, pos, work)

    def _send(self, q, cfg, ilen, frame, pos, work) -> None:
        port, mgid = cfg
        if mgid is not None:
            self._multicast(q, mgid, ilen, frame, pos, work)
        if port is not None:
            self._enqueue(port, q, ilen, frame, pos, work)

    def _multicast(self, p, mgid, ilen, frame, pos, work) -> None:
        reps = self.cfg.mc_groups.get(mgid)
        if not reps:
            self.effect(("drop", "multicast group without replicas"))
            return
        for port, rid in reps:
            q = p[:]
            if self.c.s_rid is not None:
                q[self.c.s_rid] = rid
            self.effect(("copy", "replication"))
            self._enqueue(port, q, ilen, frame, pos, work)

    def _enqueue(self, port, p, ilen, frame, pos, work) -> None:
        s = self.c.s_prio
        if s is not None and p[s] >= self.opt.priority_queues:
            self.effect(("drop", "Priority out of range"))
            return
        work.append(("e", port, p, ilen, frame, pos))
