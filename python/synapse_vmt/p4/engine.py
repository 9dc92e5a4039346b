"""The Rust executor of a compiled P4 program, seen from Python.

:class:`RustProgram` compiles a program and its entries once
(:func:`synapse_vmt.p4.compile.compile_program`) and runs frames through
``_core.P4Program`` in batches: :meth:`RustProgram.columns` gives the
executor's numpy columns, :meth:`RustProgram.run` the same
:class:`~synapse_vmt.p4.interp.Trace` the interpreter gives, so the two
engines are compared (and printed) the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Iterable, Iterator, Mapping

import numpy as np

from synapse_vmt import _core
from synapse_vmt.errors import UserError
from synapse_vmt.p4.compile import compile_program
from synapse_vmt.p4.interp import Program, Trace
from synapse_vmt.p4.switch import Counts

NO_ACTION = 2**32 - 1
BATCH = 1 << 16  # frames per call into Rust


def pack(frames: Iterable[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Frames as one uint8 array and int64 offsets (one more than frames)."""
    fs = [bytes(f) for f in frames]
    offsets = np.zeros(len(fs) + 1, dtype=np.int64)
    np.cumsum([len(f) for f in fs], out=offsets[1:])
    data = np.frombuffer(b"".join(fs), dtype=np.uint8) if fs else np.zeros(0, dtype=np.uint8)
    return data, offsets


def _chunks(frames: Iterable[bytes], n: int) -> Iterator[list[bytes]]:
    buf: list[bytes] = []
    for f in frames:
        buf.append(f)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf


def _step_keys(table: np.ndarray, key_start: np.ndarray, key_words: np.ndarray,
               layouts: list[list[int]]) -> list[tuple[int, ...]]:
    """Each visit's key as field values (the interpreter's ``step_keys``):
    the words of field of n words joined, big-endian. Per table at once."""
    keys: list = [()] * len(table)
    starts = key_start[:-1].astype(np.int64)
    for ti in np.unique(table).tolist():
        sel = np.nonzero(table == ti)[0]
        lay = layouts[ti]
        if not lay:
            continue
        w = key_words[starts[sel][:, None] + np.arange(sum(lay))]
        cols, at = [], 0
        for n in lay:
            if n == 1:
                cols.append(w[:, at].tolist())
            elif n == 2:
                cols.append(((w[:, at].astype(np.uint64) << np.uint64(32)) | w[:, at + 1]).tolist())
            else:
                cols.append([int.from_bytes(r.astype(">u4").tobytes(), "big") for r in w[:, at:at + n]])
            at += n
        for j, k in zip(sel.tolist(), zip(*cols)):
            keys[j] = k
    return keys


class StepKeys(Sequence):
    """``Trace.step_keys`` of a Rust run, made on first use: most callers
    read the executor's key words (``Trace.key_rows``) and never these
    field values, which cost a Python tuple per visit."""

    def __init__(self, table: np.ndarray, key_start: np.ndarray, key_words: np.ndarray, layouts: list[list[int]]):
        self._args: tuple | None = (table, key_start, key_words, layouts)
        self._keys: list[tuple[int, ...]] = []

    def _all(self) -> list[tuple[int, ...]]:
        if self._args is not None:
            self._keys, self._args = _step_keys(*self._args), None
        return self._keys

    def __len__(self) -> int:
        return len(self._args[0]) if self._args is not None else len(self._keys)

    def __getitem__(self, i):
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # a list's equality, so not hashable either

    def __repr__(self) -> str:
        return f"StepKeys({self._all()!r})"


class RustProgram:
    """A program and its entries, compiled for the Rust executor."""

    def __init__(self, prog: Program, entries: Mapping[str, object] | None = None, seed: int = 0, options=None):
        self.prog = prog
        self.seed, self.options = seed, options
        self.description = compile_program(prog, entries, seed=seed, options=options)
        try:
            self.core = _core.P4Program(json.dumps(self.description, separators=(",", ":")))
        except ValueError as e:
            raise UserError(f"{prog.path}: {e}") from None

    @classmethod
    def load(cls, program: str, entries_file: str | None = None) -> "RustProgram":
        import os

        from synapse_vmt.p4.entries import load_entries

        prog = Program.load(program)
        return cls(prog, load_entries(entries_file or os.devnull, program))

    def columns(self, frames: Iterable[bytes], ingress_port: int = 0, outputs: bool = False,
                batch: int = BATCH) -> dict[str, np.ndarray]:
        """The executor's columns (``_core.P4Program.run_batch``) over all
        ``frames``, concatenated (indices rebased)."""
        parts: list[dict] = []
        t0: list[int] = []

        def timed(f):
            """(frame, time since the first packet in ps): a packet is a frame or (time_ps, frame)."""
            if isinstance(f, tuple):
                if not t0:
                    t0.append(int(f[0]))
                return f[1], int(f[0]) - t0[0]
            return f, 0
        for chunk in _chunks((timed(f) for f in frames), batch):
            data, offsets = pack([f for f, _ in chunk])
            times = np.array([t for _, t in chunk], dtype=np.uint64)
            parts.append(self.core.run_batch(data, offsets, ingress_port, outputs, times))
        if not parts:
            data, offsets = pack([])
            return self.core.run_batch(data, offsets, ingress_port, outputs)
        out: dict[str, np.ndarray] = {}
        for k in parts[0]:
            if k in ("key_start", "pkt_start", "out_start"):
                base = {"key_start": "key_words", "pkt_start": "table", "out_start": "out_bytes"}[k]
                acc, segs = 0, []
                for i, p in enumerate(parts):
                    segs.append(p[k][(1 if i else 0):].astype(np.int64) + acc)
                    acc += len(p[base])
                out[k] = np.concatenate(segs)
            elif k == "out_input":
                acc, segs = 0, []
                for p in parts:
                    segs.append(p[k].astype(np.int64) + acc)
                    acc += len(p["dropped"])
                out[k] = np.concatenate(segs)
            else:
                out[k] = np.concatenate([p[k] for p in parts])
        return out

    def run(self, packets: Iterable[bytes], ingress_port: int = 0) -> Trace:
        """Run ``packets``; the interpreter's :class:`Trace` of it (keys as
        field values; ``synthesized_fields`` and ``fallback_branches`` are
        the executor's events of those kinds)."""
        c = self.columns(packets, ingress_port)
        tables = list(self.prog.tables)
        t = c["table"].astype(np.int32)
        keys = StepKeys(t, c["key_start"], c["key_words"], [[(k.width + 31) // 32 for k in spec.key] for spec in tables])
        act = c["action"].astype(np.int64)
        act[act == NO_ACTION] = -1
        names = self.core.error_names
        rejects: dict[str, int] = {}
        for code, n in zip(*np.unique(c["parser_error"][c["parser_error"] != 0], return_counts=True)):
            nm = names.get(int(code), f"error {int(code)}")
            rejects[nm] = rejects.get(nm, 0) + int(n)
        perrs = [names.get(int(x), f"error {int(x)}") if x else "" for x in c["parser_error"].tolist()]
        ev = self.core.events()
        x = self.core.extern_state()
        counts = Counts(
            drops={k: v for k, v in x["flow"][:5] if v},
            copies={k: v for k, v in x["flow"][5:] if v},
            counters={n: {i: [pk, by] for i, pk, by in cells} for n, cells in x["counters"].items()},
            direct={n: {i: [pk, by] for i, pk, by in cells} for n, cells in x["direct"].items()},
            digests=[(n, ()) for n, k in x["digests"] for _ in range(k)],
            meter_colors={n: c for n, c in x["colors"]},
            out_ports=dict(x["out_ports"]),
        )
        return Trace(
            tables=tables,
            actions=list(self.core.actions),
            n_packets=len(c["dropped"]),
            pkt_start=c["pkt_start"].astype(np.int64),
            step_table=t,
            step_entry=c["entry"].astype(np.int32),
            step_action=act.astype(np.int32),
            step_keys=keys,
            dropped=c["dropped"].astype(bool),
            parser_error=c["parser_error"].astype(np.uint32),
            drop_pipeline=c["drop_pipeline"].astype(np.int8),
            synthesized_fields={k.split(": ", 1)[1]: v for k, v in ev.items() if k.startswith("synthesized field: ")},
            fallback_branches={k.split(": ", 1)[1]: v for k, v in ev.items() if k.startswith("fallback branch: ")},
            parser_rejects=rejects,
            unsupported=list(self.core.unsupported),
            externs=counts,
            registers=x["registers"],
            packet_errors=perrs,
            exec_key_start=c["key_start"],
            exec_key_words=c["key_words"],
        )
