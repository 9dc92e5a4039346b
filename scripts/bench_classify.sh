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
#   SIZES="1000 10000" SECS=0.5 scripts/bench_classify.sh
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

echo "== ours (trie, dtree, linear)" >&2
"$BIN" --secs "$SECS" --budget-mb "${BUDGET_MB:-128}" --write "$OUT" "${inputs[@]}" | tee "$OUT/ours.tsv"

echo "== rte_acl (dpdk-test-acl)" >&2
printf 'set\trules\tmlps\tbytes\tagree\n' > "$OUT/rte_acl.tsv"
for line in $(cut -f1 "$OUT/ours.tsv" | tail -n +2 | sort -u); do
    name=$line
    rules="$OUT/$name"
    trace="$OUT/${name}_trace"
    [ -f "$rules" ] && [ -f "$trace" ] || continue
    n=$(grep -c '^@' "$rules")
    t=$(grep -c . "$trace")
    eal=(--no-huge --no-pci -l 0 -m 2048 --log-level=lib.acl:debug)
    app=(--rulesf="$rules" --tracef="$trace" --rulenum=$((n + 1)) --tracenum="$t")
    if ! dpdk-test-acl "${eal[@]}" -- "${app[@]}" --iter="$ITER" --verbose=0 > "$OUT/$name.rte_acl.log" 2>&1; then
        printf '%s\t%s\t-\t-\tfailed (see %s)\n' "$name" "$n" "$OUT/$name.rte_acl.log" >> "$OUT/rte_acl.tsv"
        continue
    fi
    pps=$(sed -n 's/.* \([0-9.]*\) pkt\/sec.*/\1/p' "$OUT/$name.rte_acl.log" | tail -1)
    bytes=$(sed -n 's/^total: \([0-9]*\) bytes.*/\1/p' "$OUT/$name.rte_acl.log" | tail -1)
    # Second oracle: rte_acl prints userdata-1 = the 0-based rule, or 2^32-1.
    dpdk-test-acl "${eal[@]}" -- "${app[@]}" --iter=1 --verbose=2 2>/dev/null \
        | awk '/ipv4_5tuple:/ { r = $NF; print (r == 4294967295 ? -1 : r) }' > "$OUT/$name.rte_acl.answers"
    agree=$(paste "$OUT/$name.answers" "$OUT/$name.rte_acl.answers" | awk '$1 == $2 { a++ } END { print a + 0 "/" NR }')
    printf '%s\t%s\t%.3f\t%s\t%s\n' "$name" "$n" "$(echo "$pps / 1000000" | bc -l)" "$bytes" "$agree" >> "$OUT/rte_acl.tsv"
done
cat "$OUT/rte_acl.tsv"

python3 - "$OUT" <<'EOF'
import csv, sys
out = sys.argv[1]
ours = list(csv.DictReader(open(f"{out}/ours.tsv"), delimiter="\t"))
rte = {r["set"]: r for r in csv.DictReader(open(f"{out}/rte_acl.tsv"), delimiter="\t")}
sets = list(dict.fromkeys(r["set"] for r in ours))
def cell(s, algo, key):
    for r in ours:
        if r["set"] == s and r["algo"] == algo:
            return r[key] if r[key] != "-" else "fails"
    return ""
lines = ["| set | rules | trie Ml/s | trie B/rule | dtree Ml/s | dtree B/rule (sw / FACL) | linear Ml/s | rte_acl Ml/s | rte_acl B/rule | rte_acl = ours |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s in sets:
    n = cell(s, "dtree", "rules") or cell(s, "linear", "rules")
    r = rte.get(s, {})
    rb = r.get("bytes", "")
    rbpr = f"{int(rb) / int(n):.0f}" if rb and rb != "-" and n else "-"
    trie_bpr = cell(s, "trie", "bytes_per_rule")
    lines.append("| " + " | ".join([
        s, n, cell(s, "trie", "mlps_batch"), trie_bpr,
        cell(s, "dtree", "mlps_batch"),
        f"{cell(s, 'dtree', 'sw_bytes_per_rule')} / {cell(s, 'dtree', 'bytes_per_rule')}",
        cell(s, "linear", "mlps_batch"), r.get("mlps", "-"), rbpr, r.get("agree", "-"),
    ]) + " |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
