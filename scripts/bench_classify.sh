#!/usr/bin/env bash
# Single-core lookups per second and bytes per rule of the ELU's lookup
# structures (trie, dtree), the linear oracle, and DPDK's rte_acl
# (dpdk-test-acl) measured in the same run on the same rule and trace files:
# generated acl/fw/ipc sets of 1K, 10K and 100K rules and, when
# ../shared/data is present, the real ClassBench 1K sets.
#
# Not part of CI: it installs Debian's dpdk-dev (needs root and the network)
# and takes minutes. Release builds only.
#
#   scripts/bench_classify.sh            # everything, table in $OUT/table.md
#   SIZES="1000 10000" SECS=0.5 RUNS=1 scripts/bench_classify.sh
#
# Every rate is the median of RUNS (default 3) rounds, ours and rte_acl
# taking turns, because a shared machine's load moves single runs a lot.
#
# rte_acl's answers (dpdk-test-acl --verbose=2) are compared with ours line
# by line: a second oracle.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-target/bench-classify}
SECS=${SECS:-1}          # seconds per rate measurement (ours)
ITER=${ITER:-20}         # passes over the trace (rte_acl)
SIZES=${SIZES:-"1000 10000 100000"}
KINDS=${KINDS:-"acl fw ipc"}
RUNS=${RUNS:-3}
SHARED=${SYNAPSE_SHARED:-../shared}
mkdir -p "$OUT"

if ! command -v dpdk-test-acl >/dev/null; then
    apt-get update && apt-get install -y dpdk-dev
fi

cargo build --release -p synapse-core --example classify_table
BIN=target/release/examples/classify_table

inputs=()
for kind in $KINDS; do
    for n in $SIZES; do inputs+=("gen:$kind:$n:1"); done
done
for s in acl1_1k fw1_1k ipc1_1k; do
    src="$SHARED/data/classbench/sets/$s"
    if [ -f "$src" ]; then
        cp "$src" "$src"_trace "$OUT/"
        inputs+=("$OUT/$s:$OUT/${s}_trace")
    fi
done

for run in $(seq 1 "$RUNS"); do
R="$OUT/run$run"
mkdir -p "$R"
echo "== round $run: ours (trie, dtree, linear)" >&2
"$BIN" --secs "$SECS" --budget-mb "${BUDGET_MB:-128}" --write "$OUT" "${inputs[@]}" | tee "$R/ours.tsv"

echo "== round $run: rte_acl (dpdk-test-acl)" >&2
printf 'set\trules\tmlps\tbytes\tagree\n' > "$R/rte_acl.tsv"
for name in $(cut -f1 "$R/ours.tsv" | tail -n +2 | sort -u); do
    rules="$OUT/$name"
    trace="$OUT/${name}_trace"
    [ -f "$rules" ] && [ -f "$trace" ] || continue
    n=$(grep -c '^@' "$rules")
    t=$(grep -c . "$trace")
    eal=(--no-huge --no-pci -l 0 -m 2048 --log-level=lib.acl:debug)
    app=(--rulesf="$rules" --tracef="$trace" --rulenum=$((n + 1)) --tracenum="$t")
    if ! dpdk-test-acl "${eal[@]}" -- "${app[@]}" --iter="$ITER" --verbose=0 > "$R/$name.rte_acl.log" 2>&1; then
        printf '%s\t%s\t-\t-\tfailed (see %s)\n' "$name" "$n" "$R/$name.rte_acl.log" >> "$R/rte_acl.tsv"
        continue
    fi
    pps=$(sed -n 's/.* \([0-9.]*\) pkt\/sec.*/\1/p' "$R/$name.rte_acl.log" | tail -1)
    bytes=$(sed -n 's/^total: \([0-9]*\) bytes.*/\1/p' "$R/$name.rte_acl.log" | tail -1)
    agree=-
    if [ "$run" = 1 ]; then
        # Second oracle: rte_acl prints userdata-1 = the 0-based rule, or 2^32-1.
        dpdk-test-acl "${eal[@]}" -- "${app[@]}" --iter=1 --verbose=2 2>/dev/null \
            | awk '/ipv4_5tuple:/ { r = $NF; print (r == 4294967295 ? -1 : r) }' > "$OUT/$name.rte_acl.answers"
        agree=$(paste "$OUT/$name.answers" "$OUT/$name.rte_acl.answers" | awk '$1 == $2 { a++ } END { print a + 0 "/" NR }')
    fi
    printf '%s\t%s\t%.3f\t%s\t%s\n' "$name" "$n" "$(echo "$pps / 1000000" | bc -l)" "$bytes" "$agree" >> "$R/rte_acl.tsv"
done
cat "$R/rte_acl.tsv"
done

python3 - "$OUT" "$RUNS" <<'EOF'
import csv, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
load = lambda f: list(csv.DictReader(open(f), delimiter="\t"))
ours = [load(f"{out}/run{r}/ours.tsv") for r in range(1, runs + 1)]
rte = [{x["set"]: x for x in load(f"{out}/run{r}/rte_acl.tsv")} for r in range(1, runs + 1)]
sets = list(dict.fromkeys(x["set"] for x in ours[0]))


def vals(s, algo, key):
    return [x[key] for o in ours for x in o if x["set"] == s and x["algo"] == algo]


def med(v):
    v = [float(x) for x in v if x not in ("", "-")]
    return statistics.median(v) if v else None


def fmt(v, p=1):
    return "over budget" if v is None else f"{v:.{p}f}"


lines = ["| set | rules | trie Ml/s | trie B/rule | dtree Ml/s | dtree B/rule (sw / FACL) | linear Ml/s "
         "| rte_acl Ml/s | rte_acl B/rule | rte_acl = ours |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s in sets:
    n = vals(s, "linear", "rules")[0]
    tb = med(vals(s, "trie", "bytes_per_rule"))
    rr = [r.get(s, {}) for r in rte]
    rb = rr[0].get("bytes", "-")
    sw, hw = med(vals(s, "dtree", "sw_bytes_per_rule")), med(vals(s, "dtree", "bytes_per_rule"))
    lines.append("| " + " | ".join([
        s, n, fmt(med(vals(s, "trie", "mlps_batch"))), "—" if tb is None else f"{tb:.0f}",
        fmt(med(vals(s, "dtree", "mlps_batch"))), "—" if sw is None else f"{sw:.0f} / {hw:.0f}",
        fmt(med(vals(s, "linear", "mlps_batch")), 3), fmt(med([r.get("mlps", "-") for r in rr])),
        f"{int(rb) / int(n):.0f}" if rb not in ("-", "") else "-", rr[0].get("agree", "-"),
    ]) + " |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
