"""The report's windows folded into bounded bins (synapse_vmt.view.bins):
a run of up to CAP windows is drawn window by window, exactly as the
per-window grid (report.table_grid) has it; a longer run in at most CAP bins
whose counters keep their sums and whose range keeps a one-window spike; and
windows.csv streamed, in time order or not."""

import csv

import numpy as np
import pytest

from synapse_vmt import report
from synapse_vmt.view import rundir
from synapse_vmt.view.bins import WindowBins


def _windows(W: int, T: int, seed: int = 1, skip: bool = True) -> dict[str, np.ndarray]:
    """W windows of T tables with random counters; with ``skip`` table 1 has
    no row in every third window, and a few latencies are missing."""
    rng = np.random.default_rng(seed)
    t = np.repeat(np.arange(1, W + 1) * 1e4, T)
    tab = np.tile(np.arange(T), W)
    keep = ~((tab == 1) & (np.arange(len(t)) // T % 3 == 0)) if skip else np.ones(len(t), bool)
    n = int(keep.sum())
    w = {"t_ns": t[keep], "table": tab[keep]}
    for c in ("arrived", "processed", "hits", "misses", "hbm_bytes", "pmus"):
        w[c] = rng.integers(0, 100, n).astype(float)
    w["lat_mean_ns"] = rng.uniform(20, 2000, n)
    w["lat_mean_ns"][rng.random(n) < 0.1] = np.nan
    w["lat_p50_ns"] = w["lat_mean_ns"] * 0.9
    w["lat_p99_ns"] = w["lat_mean_ns"] * 3
    return w


def _folded(w: dict, cap: int = 2048, batch: int = 7) -> WindowBins:
    b = WindowBins(cap=cap)
    for i in range(0, len(w["t_ns"]), batch):  # batches that split windows
        b.add(w["t_ns"][i:i + batch], w["table"][i:i + batch], {k: v[i:i + batch] for k, v in w.items()})
    return b


def test_a_run_within_the_cap_is_drawn_window_by_window_exactly():
    """Up to CAP windows, every bin is one window: the grid equals the
    per-window grid of report.table_grid bit for bit (NaN where a table has
    no row), and each window's range is its own value."""
    W, T, window_ns = 300, 3, 1e4
    w = _windows(W, T)
    bins = _folded(w)
    assert bins.k == 1 and bins.bins == W == bins.windows
    t_ns, want = report.table_grid(w, T, window_ns)
    got, lo, hi = bins.grid(window_ns)
    assert np.array_equal(bins.ends_ns(), t_ns)
    for k, g in want.items():
        assert np.array_equal(got[k], g, equal_nan=True), k
        assert np.array_equal(lo[k], g, equal_nan=True) and np.array_equal(hi[k], g, equal_nan=True), k


def test_a_long_run_is_folded_into_at_most_cap_bins_keeping_sums_and_spikes():
    W, T, cap = 1000, 3, 16
    w = _windows(W, T)
    spike = np.flatnonzero((w["table"] == 0) & (w["t_ns"] == 5e4 * 101))[0]
    w["lat_p99_ns"][spike] = 1e6  # one window's spike
    bins = _folded(w, cap=cap)
    assert bins.k == 64 and bins.bins == -(-W // 64) <= cap  # 1000 windows: doubled until they fit in 16 bins
    assert bins.cell.shape[2] == cap
    for j in range(T):
        m = w["table"] == j
        tb = bins.table(j)
        for c in ("hits", "misses", "hbm_bytes", "arrived", "processed", "pmus"):
            assert tb[c if c != "pmus" else "pmus/sum"].sum() == pytest.approx(w[c][m].sum(), rel=1e-12), c
        assert tb["rows"].sum() == m.sum()
        assert tb["lat_p99_ns_max"].max() == np.nanmax(w["lat_p99_ns"][m])
    g, lo, hi = bins.grid(1e4)
    b = int((5e4 * 101 / 1e4 - 1) // 64)  # the spike's bin
    assert hi["lat_p99_ns"][0, b] == 1e6 and g["lat_p99_ns"][0, b] < 1e6 / 10  # the mean hides it, the range shows it
    # each bin's figure lies within its windows' range; rates over the windows the table has rows in
    for k in g:
        ok = np.isfinite(g[k])
        assert np.all(lo[k][ok] <= g[k][ok] * (1 + 1e-12)) and np.all(g[k][ok] <= hi[k][ok] * (1 + 1e-12)), k
    m = (w["table"] == 1) & (w["t_ns"] <= 64 * 1e4)
    assert g["throughput_mpps"][1, 0] == pytest.approx(w["processed"][m].sum() / (m.sum() * 1e4) * 1e3)
    # the last bin (1000 = 15 x 64 + 40 windows) ends at the last window
    assert bins.ends_ns()[-1] == W * 1e4
    # run.png's rows: the bins of whole windows only
    rows = bins.windows_dict()
    assert len(rows["t_ns"]) == T * (W // 64) and rows["t_ns"][-1] == 15 * 64 * 1e4


def test_rows_out_of_time_order_raise_unless_the_ends_are_given():
    from synapse_vmt.view.bins import OutOfOrder

    w = _windows(50, 2, skip=False)
    o = np.random.default_rng(3).permutation(len(w["t_ns"]))
    shuffled = {k: v[o] for k, v in w.items()}
    with pytest.raises(OutOfOrder):
        _folded(shuffled, cap=8)
    b = WindowBins(cap=8, ends=np.unique(w["t_ns"]))
    b.add(shuffled["t_ns"], shuffled["table"], shuffled)
    a = _folded(w, cap=8)
    assert (a.k, a.bins) == (b.k, b.bins) == (8, 7)
    ga, gb = a.grid(1e4)[0], b.grid(1e4)[0]
    for k in ga:
        assert np.allclose(ga[k], gb[k], equal_nan=True, rtol=1e-12), k


@pytest.mark.parametrize("shuffle", [False, True])
def test_load_streams_windows_csv_into_bins(tmp_path, shuffle, monkeypatch):
    """rundir.load folds windows.csv as it reads it (in rows of CHUNK): the
    per-table totals are the file's; a file not in time order gives the same."""
    monkeypatch.setattr(rundir, "CHUNK", 64)
    monkeypatch.setattr("synapse_vmt.view.bins.CAP", 32)
    W, T = 400, 3
    w = _windows(W, T)
    names = ["a", "b", "c"]
    order = np.random.default_rng(5).permutation(len(w["t_ns"])) if shuffle else np.arange(len(w["t_ns"]))
    with (tmp_path / "windows.csv").open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(rundir.NEEDED)
        for i in order:
            wr.writerow([names[int(w["table"][i])] if c == "table" else f"{w[c][i]:.17g}" for c in rundir.NEEDED])
    run = rundir.load(tmp_path)
    assert sorted(run.names) == names and run.windows == W and run.bin_windows == 16 and len(run.t_ns) == 25
    assert run.window_ns == 1e4  # no run.json: the step between window ends
    for j, n in enumerate(names):
        m = w["table"] == j
        t = run.tables[n]
        assert t["arrived"] == w["arrived"][m].sum() and t["lookups"] == (w["hits"] + w["misses"])[m].sum()
        assert t["throughput_mpps"] == pytest.approx(w["processed"][m].sum() / (W * 1e4) * 1e3)
        assert t["p99_latency_ns"] == np.nanmax(w["lat_p99_ns"][m])  # no latency.csv: the worst window
        assert t["pmus_max"] == w["pmus"][m].max()
        assert t["mean_latency_ns"] == pytest.approx((np.nan_to_num(w["lat_mean_ns"]) * (w["hits"] + w["misses"]))[m].sum()
                                                     / (w["hits"] + w["misses"])[m].sum())
