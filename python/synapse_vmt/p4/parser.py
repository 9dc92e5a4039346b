"""The program's own parser, compiled from its BMv2 JSON, and the pcap reader.

``parsers[0].parse_states`` become one generated Python function per state:
``extract`` (a header, or the next element of a header stack), ``set``,
``verify``, ``advance``, ``primitive`` (e.g. ``setValid`` inside the parser),
and the ``transition_key`` select (fields, ``lookahead`` bits, stack fields)
matched against value/mask transitions in order, then ``default``. As in
BMv2, the select key concatenates its parts each padded to whole bytes.

A packet the parser rejects (too short for an ``extract`` or a lookahead, no
transition matches, a ``verify`` fails, a stack overflows) keeps the headers
extracted so far and goes on into ingress with ``standard_metadata.parser_error``
set, as simple_switch does; the interpreter counts it per error name.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator

from synapse_vmt.errors import UserError, open_binary
from synapse_vmt.p4.exprs import Codegen, Unsupported, _hex, located

MAX_STATES = 1000  # states visited per packet before ParserTimeout (a loop without extract)


class Reject(Exception):
    """The parser rejected the packet; ``args[0]`` is the BMv2 error id."""


def _byte_pad(w: int) -> int:
    return (w + 7) // 8 * 8


class ParserCompiler:
    def __init__(self, cg: Codegen, doc: dict, path: str):
        self.cg, self.phv, self.path = cg, cg.phv, path
        self.errors: dict[str, int] = {}
        for e in doc.get("errors", []) or []:
            if isinstance(e, list) and len(e) == 2:
                self.errors[str(e[0])] = int(e[1])
        # p4c numbers these; programs without an "errors" list still get names
        for n, i in (("NoError", 0), ("PacketTooShort", 1), ("NoMatch", 2), ("StackOutOfBounds", 3), ("HeaderTooShort", 4), ("ParserTimeout", 5)):
            self.errors.setdefault(n, 1000 + i)
        self.error_names = {v: k for k, v in self.errors.items()}
        self.unsupported_states: list[str] = []

    def fail(self, where: str, what: str):
        raise UserError(f"{self.path}: {where}: expected {what}")

    def extract_lines(self, hname: str, where: str) -> list[str]:
        h = self.phv.header(hname)
        if h.varbit:
            raise Unsupported(f"varbit header {hname}")
        bits = h.bits
        if bits % 8:
            self.fail(where, f"header {hname} a whole number of bytes, it has {bits} bits")
        nb = bits // 8
        lines = [f"e = pos + {nb}", f"if e > len(buf): raise Reject({self.errors['PacketTooShort']})"]
        if nb:
            lines.append("v = int.from_bytes(buf[pos:e], 'big')")
        shift = bits
        for _, w, s in h.fields:
            shift -= w
            lines.append(f"p[{s}] = (v >> {shift}) & {(1 << w) - 1}" if shift else f"p[{s}] = v & {(1 << w) - 1}")
        lines += [f"p[{h.valid}] = 1", *(f"p[{o}] = 0" for o in self.phv.union_siblings(hname)), "pos = e"]
        return lines

    def key_part(self, k: dict, where: str) -> tuple[str, int]:
        t, v = k.get("type"), k.get("value")
        if t == "field":
            s = self.phv.field_slot(v)
            return f"p[{s}]", _byte_pad(self.phv.widths[s])
        if t == "lookahead":
            return f"_look(buf, pos, {int(v[0])}, {int(v[1])})", _byte_pad(int(v[1]))
        if t == "stack_field":
            stack, fname = v
            slots = self.cg.stack_field(stack, fname)
            w = self.phv.widths[self.phv.field_slot([self.phv.stacks[stack][0], fname])]
            return f"p[{slots}[p[{self.phv.stack_next[stack]}] - 1]]", _byte_pad(w)
        raise Unsupported(f"select on {t!r}")

    def state(self, st: dict, index: dict[str, int], where: str) -> str:
        """Source of the function of one state: returns (next state index or -1, pos)."""
        lines: list[str] = []
        for oi, op in enumerate(st.get("parser_ops", [])):
            w = f"{where}.parser_ops[{oi}]"
            kind, params = op.get("op"), op.get("parameters", [])
            if kind == "extract":
                p0 = params[0]
                if p0.get("type") == "regular":
                    lines += self.extract_lines(p0.get("value"), w)
                elif p0.get("type") == "stack":
                    stack = p0.get("value")
                    if stack not in self.phv.stacks:
                        self.fail(w, f"a known header stack, found {stack!r}")
                    nx = self.phv.stack_next[stack]
                    lines += [f"i = p[{nx}]", f"if i >= {len(self.phv.stacks[stack])}: raise Reject({self.errors['StackOutOfBounds']})"]
                    for j, hname in enumerate(self.phv.stacks[stack]):
                        lines.append(f"{'if' if j == 0 else 'elif'} i == {j}:")
                        lines += ["    " + ln for ln in self.extract_lines(hname, w)]
                    lines.append(f"p[{nx}] = i + 1")
                else:
                    raise Unsupported(f"extract of {p0.get('type')!r}")
            elif kind == "set":
                s = self.phv.field_slot(params[0].get("value")) if params[0].get("type") == "field" else None
                if s is None:
                    raise Unsupported("set of a non-field")
                try:
                    lines += self.cg.assign_lines(s, self.cg.expr(params[1], parser=True))
                except Unsupported:
                    lines += self.cg.synthesize("parser set", s)
            elif kind == "verify":
                cond = self.cg.expr(params[0], parser=True)
                err = params[1]
                if err.get("type") == "hexstr":
                    code = str(_hex(err.get("value")))
                elif str(err.get("value")) in self.errors:  # an error named directly
                    code = str(self.errors[str(err.get("value"))])
                else:  # an error held in a variable
                    code = self.cg.expr(err, parser=True)
                lines.append(f"if not {cond}: raise Reject({code})")
            elif kind == "advance":
                bits = self.cg.expr(params[0], parser=True)
                lines += [f"e = pos + ({bits}) // 8", f"if e > len(buf): raise Reject({self.errors['PacketTooShort']})", "pos = e"]
            elif kind == "primitive":
                lines += self.cg.primitive(params[0], parser=True)
            else:
                raise Unsupported(f"parser op {kind!r}")
        parts = [self.key_part(k, where) for k in st.get("transition_key", [])]
        key, total = "0", 0
        for src, w in parts:
            key = f"(({key}) << {w}) | {src}" if total else src
            total += w
        if parts:
            lines.append(f"k = {key}")
        full = (1 << total) - 1
        for ti, t in enumerate(st.get("transitions", [])):
            ns = t.get("next_state")
            nxt = -1 if ns is None else index.get(ns)
            if nxt is None:
                self.fail(f"{where}.transitions[{ti}]", f"a known next_state, found {ns!r}")
            ty, val, mask = t.get("type"), t.get("value"), t.get("mask")
            if ty == "default" or (ty is None and val == "default"):
                lines.append(f"return {nxt}, pos")
                break
            if ty == "parse_vset":
                # a value set is filled by the control plane; none is configured here: it matches nothing
                self.cg.unsupported.add(f"parse_vset {val} (empty)")
                continue
            if ty not in ("hexstr", None):
                raise Unsupported(f"transition of type {ty!r}")
            if not parts:
                self.fail(f"{where}.transitions[{ti}]", "a transition_key for a value transition")
            v = _hex(val)
            m = full if mask is None else _hex(mask)
            lines.append(f"if (k & {m}) == {v & m}: return {nxt}, pos")
        else:
            lines.append(f"raise Reject({self.errors['NoMatch']})")
        return "\n".join("    " + ln for ln in lines)

    def compile(self, doc: dict) -> tuple[str, int]:
        """Source of functions ``_ps0.._psN`` and a tuple ``_PS`` of them; and the init state index."""
        parsers = doc.get("parsers") or []
        if not parsers:
            return "_PS = ()", -1
        pr = parsers[0]
        states = pr.get("parse_states", [])
        index = {s.get("name"): i for i, s in enumerate(states)}
        if pr.get("init_state") not in index:
            self.fail("parsers[0]", f"an init_state among the parse_states, found {pr.get('init_state')!r}")
        src = []
        for i, st in enumerate(states):
            where = f"parsers[0].parse_states[{i}] ({st.get('name')})"
            try:
                body = self.state(st, index, where)
            except Unsupported as e:
                # the state cannot be run: packets reaching it are rejected under this name
                self.unsupported_states.append(f"{st.get('name')}: {e}")
                code = self.errors.setdefault(f"Unsupported:{st.get('name')}", 2000 + i)
                self.error_names[code] = f"Unsupported:{st.get('name')}"
                body = f"    raise Reject({code})"
            except UserError as e:
                if f"{self.path}: parsers[" in str(e):
                    raise
                raise located(e, self.path, where) from None  # a name error deep in an op: say which state
            except (IndexError, KeyError, TypeError, AttributeError, ValueError):
                self.fail(where, "well-formed parser_ops, transition_key and transitions")
            src.append(f"def _ps{i}(p, buf, pos, T, a=()):\n{body}\n")
        src.append(f"_PS = ({''.join(f'_ps{i}, ' for i in range(len(states)))})")
        return "\n".join(src), index[pr["init_state"]]


def look(buf: bytes, pos: int, off: int, w: int, too_short: int = 1) -> int:
    """``w`` bits at bit ``off`` after byte ``pos``, without consuming them (lookahead)."""
    start = pos * 8 + off
    end = start + w
    if end > len(buf) * 8:
        raise Reject(too_short)
    b0, b1 = start // 8, (end + 7) // 8
    return (int.from_bytes(buf[b0:b1], "big") >> (b1 * 8 - end)) & ((1 << w) - 1)


# ---- capture files ---------------------------------------------------------

def read_packets(path: str | Path) -> Iterator[bytes]:
    """Frames of a pcap or pcapng file, in order. A truncated or corrupt
    file raises a one-line UserError naming the packet number (1-based)."""
    return (buf for _, buf in read_frames(path))


def read_frames(path: str | Path) -> Iterator[tuple[float, bytes]]:
    """(timestamp in seconds, frame) of each packet of a pcap or pcapng file."""
    import dpkt

    f = open_binary(path)
    with f:
        magic = f.read(4)
        f.seek(0)
        n = 0
        try:
            if magic == b"\x0a\x0d\x0d\x0a":
                records = ((ts, buf, None) for ts, buf in dpkt.pcapng.Reader(f))
            else:
                dpkt.pcap.Reader(f)  # checks the file header and leaves f at the first record
                little = magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
                nano = magic in (b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
                records = _pcap_records(f, dpkt.pcap.LEPktHdr if little else dpkt.pcap.PktHdr, 1e9 if nano else 1e6)
            for n, (ts, buf, caplen) in enumerate(records, 1):
                if caplen is not None and len(buf) < caplen:
                    raise UserError(f"{path}: packet {n}: expected {caplen} bytes of packet data, the file ends after {len(buf)}")
                yield ts, bytes(buf)
        except UserError:
            raise
        except (dpkt.NeedData, dpkt.UnpackError, ValueError, EOFError, struct.error) as e:
            what = str(e).strip() or type(e).__name__
            if n == 0 and f.tell() <= 64 and ("magic" in what.lower() or "invalid" in what.lower()):
                raise UserError(f"{path}: expected a pcap or pcapng file ({what})") from None
            raise UserError(f"{path}: packet {n + 1}: truncated or corrupt capture ({what})") from None


def _pcap_records(f, hdr_cls, divisor: float) -> Iterator[tuple[float, bytes, int]]:
    size = hdr_cls.__hdr_len__
    while True:
        raw = f.read(size)
        if not raw:
            return
        hdr = hdr_cls(raw)  # NeedData when the record header itself is cut
        yield hdr.tv_sec + hdr.tv_usec / divisor, f.read(hdr.caplen), hdr.caplen
