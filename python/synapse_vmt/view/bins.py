"""Statistics windows folded into a bounded number of bins: what the report
and run.png draw of a run of any length.

A run writes a row per (window, table) (windows.csv); a capture's run lasts
as long as the capture, so its windows grow with it. The figures draw at
most :data:`CAP` columns: the windows are folded, in time order, into bins
of ``k`` whole windows, ``k`` doubling (neighbouring bins merging) each time
the bins reach the cap. Per (table, bin) a :class:`WindowBins` keeps

- the counters summed (hits, misses, HBM bytes, arrived, processed) and the
  lookup time (the window's mean latency x its lookups);
- the latencies and PMUs held as the mean of the bin's windows that have them;
- per figure the smallest and the largest window (hit rate, processed,
  arrived, HBM bytes, latencies, PMUs), so that a spike in one window stays
  visible in a wide bin.

A run of at most :data:`CAP` windows has one window per bin: its figures are
the windows' own, bit for bit. Memory: tables x CAP x 31 floats, whatever the
run's length.
"""

from __future__ import annotations

import numpy as np

#: Bins per table at most (a run of up to CAP windows is drawn window by window).
CAP = 2048

SUMS = ("hits", "misses", "hbm_bytes", "arrived", "processed")
MEANS = ("lat_mean_ns", "lat_p50_ns", "lat_p99_ns", "pmus")
#: Per-window figures whose smallest and largest window a bin keeps.
RANGE = ("hit_rate", "processed", "arrived", "hbm_bytes", "lat_mean_ns", "lat_p50_ns", "lat_p99_ns", "pmus")

# columns of a (table, bin) cell
_S = {c: i for i, c in enumerate(SUMS)}
_LOOKUP_TIME = len(SUMS)
_ROWS = _LOOKUP_TIME + 1
_MSUM = {c: _ROWS + 1 + 2 * i for i, c in enumerate(MEANS)}  # sum of the finite values; +1: their count
_LO = {c: _ROWS + 1 + 2 * len(MEANS) + i for i, c in enumerate(RANGE)}
_HI = {c: _LO[RANGE[-1]] + 1 + i for i, c in enumerate(RANGE)}
NCOL = _HI[RANGE[-1]] + 1
_ADD = list(range(_LO[RANGE[0]]))  # the columns that add up (sums and counts); the rest: min, max


class OutOfOrder(Exception):
    """A row earlier than the window before it (rows must come in time order unless ``ends`` is given)."""


class WindowBins:
    """Window rows folded into at most ``cap`` bins per table (see the module doc).

    Rows come in time order (:meth:`add`, as every writer of windows.csv
    writes them), or in any order when ``ends``, every window end, is given.
    Tables are indices (0, 1, ...), as in windows.csv's rows after naming."""

    def __init__(self, cap: int | None = None, ends: np.ndarray | None = None):
        cap = CAP if cap is None else cap
        if cap < 2 or cap % 2:
            raise ValueError("WindowBins: cap must be an even number >= 2")
        self.cap, self.k = int(cap), 1
        self.cell = np.zeros((NCOL, 0, self.cap))  # column x table x bin
        self.t_end = np.full(self.cap, np.nan)  # each bin's last window end
        self.windows = 0  # windows seen (distinct window ends)
        self.min_step = np.inf  # the smallest step between neighbouring window ends
        self._last = -np.inf  # the last window end seen (time order)
        self.ends = None if ends is None else np.asarray(ends, dtype=float)
        if self.ends is not None:
            self.windows = len(self.ends)
            while self.windows > self.cap * self.k:
                self.k *= 2
            if len(self.ends) > 1:
                self.min_step = float(np.min(np.diff(self.ends)))

    # ---------------------------------------------------------------- feeding

    def add(self, t_ns, table, cols: dict) -> None:
        """Rows: window end, table index, and the columns of :data:`SUMS` and
        :data:`MEANS` (a missing mean column: NaN). Raises :class:`OutOfOrder`
        on a row earlier than the last window (without ``ends``)."""
        t = np.asarray(t_ns, dtype=float)
        if not len(t):
            return
        ti = np.asarray(table, dtype=np.int64)
        if self.ends is not None:
            col = np.searchsorted(self.ends, t)
        else:
            prev = np.concatenate(([self._last], t[:-1]))
            if np.any(t < prev):
                raise OutOfOrder(float(t[np.argmax(t < prev)]))
            new = t != prev
            steps = (t - prev)[new & np.isfinite(prev)]
            if len(steps):
                self.min_step = min(self.min_step, float(steps.min()))
            col = self.windows - 1 + np.cumsum(new)
            self.windows = int(col[-1]) + 1
            self._last = float(t[-1])
        if int(ti.max()) >= self.cell.shape[1]:
            grow = np.zeros((NCOL, int(ti.max()) + 1 - self.cell.shape[1], self.cap))
            grow[_LO[RANGE[0]]:] = np.nan
            self.cell = np.concatenate([self.cell, grow], axis=1)
        f = {c: np.asarray(cols[c], dtype=float) for c in SUMS}
        for c in MEANS:
            f[c] = np.asarray(cols[c], dtype=float) if c in cols else np.full(len(t), np.nan)
        looked = f["hits"] + f["misses"]
        with np.errstate(invalid="ignore", divide="ignore"):
            f["hit_rate"] = np.where(looked > 0, f["hits"] / np.maximum(looked, 1), np.nan)
        per = {_S[c]: f[c] for c in SUMS}
        per[_LOOKUP_TIME] = np.nan_to_num(f["lat_mean_ns"]) * looked
        per[_ROWS] = np.ones(len(t))
        for c in MEANS:
            ok = np.isfinite(f[c])
            per[_MSUM[c]] = np.where(ok, f[c], 0.0)
            per[_MSUM[c] + 1] = ok.astype(float)
        # rows past the last bin: merge, then the rest (rows come in column order, or all fit: ends given)
        i = 0
        while i < len(t):
            b = col[i:] // self.k
            j = i + (int(np.searchsorted(b, self.cap)) if self.ends is None else len(b))
            if j == i:
                self._merge()
                continue
            bb, tt = b[:j - i], ti[i:j]
            for c, v in per.items():
                np.add.at(self.cell[c], (tt, bb), v[i:j])
            for c in RANGE:
                np.fmin.at(self.cell[_LO[c]], (tt, bb), f[c][i:j])
                np.fmax.at(self.cell[_HI[c]], (tt, bb), f[c][i:j])
            np.fmax.at(self.t_end, bb, t[i:j])
            i = j

    def _merge(self) -> None:
        """Neighbouring bins merge (bins twice as wide)."""
        h = self.cap // 2
        new = np.zeros_like(self.cell)
        new[_LO[RANGE[0]]:] = np.nan
        new[_ADD, :, :h] = self.cell[_ADD, :, 0::2] + self.cell[_ADD, :, 1::2]
        lo, hi = slice(_LO[RANGE[0]], _HI[RANGE[0]]), slice(_HI[RANGE[0]], NCOL)
        new[lo, :, :h] = np.fmin(self.cell[lo, :, 0::2], self.cell[lo, :, 1::2])
        new[hi, :, :h] = np.fmax(self.cell[hi, :, 0::2], self.cell[hi, :, 1::2])
        self.cell = new
        t = np.full(self.cap, np.nan)
        t[:h] = np.fmax(self.t_end[0::2], self.t_end[1::2])
        self.t_end = t
        self.k *= 2

    # ---------------------------------------------------------------- reading

    @property
    def bins(self) -> int:
        """Bins in use."""
        return -(-self.windows // self.k)

    @property
    def tables(self) -> int:
        return self.cell.shape[1]

    def ends_ns(self) -> np.ndarray:
        """Each bin's last window end."""
        return self.t_end[:self.bins].copy()

    def step_ns(self) -> float | None:
        """The smallest step between window ends (None: fewer than two windows)."""
        return self.min_step if np.isfinite(self.min_step) else None

    def grid(self, window_ns: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per metric of :func:`synapse_vmt.report.table_grid` an array (tables,
        bins): the bin's figure, and the smallest and largest of its windows'
        (NaN where a table has no row in a bin). Rates are over the windows
        the table has rows in."""
        B = self.bins
        c = self.cell[:, :, :B]
        rows = c[_ROWS]
        have = rows > 0
        span = rows * window_ns
        s = {k: c[_S[k]] for k in SUMS}
        looked = s["hits"] + s["misses"]

        def mean(k):
            n = c[_MSUM[k] + 1]
            return np.where(n > 0, c[_MSUM[k]] / np.maximum(n, 1), np.nan)

        def rate(x, per_us):
            return np.where(have, x / np.where(have, span, 1.0) * per_us, np.nan)

        lo = {k: c[_LO[k]] for k in RANGE}
        hi = {k: c[_HI[k]] for k in RANGE}
        with np.errstate(invalid="ignore", divide="ignore"):
            g = {
                "hit_rate": np.where(looked > 0, s["hits"] / np.maximum(looked, 1), np.nan),
                "throughput_mpps": rate(s["processed"], 1e3),
                "offered_mpps": rate(s["arrived"], 1e3),
                "lat_mean_ns": mean("lat_mean_ns"),
                "lat_p50_ns": mean("lat_p50_ns"),
                "lat_p99_ns": mean("lat_p99_ns"),
                "hbm_gbps": rate(s["hbm_bytes"], 1.0),
                "pmus": mean("pmus"),
            }
        # the windows' own extremes, as rates of one window
        scale = {"throughput_mpps": ("processed", 1e3), "offered_mpps": ("arrived", 1e3), "hbm_gbps": ("hbm_bytes", 1.0)}
        glo, ghi = {}, {}
        for k in g:
            src, f = scale.get(k, (k, None))
            glo[k] = lo[src] if f is None else lo[src] / window_ns * f
            ghi[k] = hi[src] if f is None else hi[src] / window_ns * f
        return g, glo, ghi

    def table(self, j: int) -> dict[str, np.ndarray]:
        """Table ``j``'s bins that have rows: per column of :data:`SUMS` and
        ``lookup_time``, ``rows`` the sums; per :data:`MEANS` column the bin
        mean (NaN: no finite value) and ``<col>_max`` the largest window."""
        c = self.cell[:, j, :self.bins] if j < self.tables else np.zeros((NCOL, 0))
        m = c[_ROWS] > 0
        out = {k: c[_S[k]][m] for k in SUMS}
        out["lookup_time"] = c[_LOOKUP_TIME][m]
        out["rows"] = c[_ROWS][m]
        with np.errstate(invalid="ignore", divide="ignore"):
            for k in MEANS:
                n = c[_MSUM[k] + 1][m]
                out[k] = np.where(n > 0, c[_MSUM[k]][m] / np.maximum(n, 1), np.nan)
                out[f"{k}/sum"] = c[_MSUM[k]][m]
                out[f"{k}_max"] = c[_HI[k]][m]
        return out

    def windows_dict(self) -> dict[str, np.ndarray]:
        """The bins of ``k`` whole windows as window rows (bin end, table, the
        summed counters, the mean latencies and PMUs), ordered by time then
        table: what :func:`synapse_vmt.report.plot_run` draws, with windows
        ``k`` times as long (a last bin of fewer windows is left out: its
        rates would read low)."""
        B = self.windows // self.k
        c = self.cell[:, :, :B]
        b, j = np.nonzero(c[_ROWS].T > 0)  # time-major
        out = {"t_ns": self.t_end[:B][b], "table": j.astype(np.int64)}
        for k in SUMS:
            out[k] = c[_S[k]][j, b]
        with np.errstate(invalid="ignore", divide="ignore"):
            for k in MEANS:
                n = c[_MSUM[k] + 1][j, b]
                out[k] = np.where(n > 0, c[_MSUM[k]][j, b] / np.maximum(n, 1), np.nan)
        return out
