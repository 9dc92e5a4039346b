#!/usr/bin/env bash
# Single-core lookups per second, bytes per rule and build time of our
# classifiers (ptree, dtree, trie) and of DPDK's rte_acl (dpdk-test-acl,
# its default method: the widest the CPU has, named in the table's
# heading) on the same rule and trace
# files: generated acl/fw/ipc sets of 1K, 10K and 100K rules (fw: the
# many-wildcard kind) and, when ../shared/data is present, the real
# ClassBench 1K sets.
#
# Not part of CI: it installs Debian's dpdk-dev (needs root and the network)
# and takes minutes. Release builds only.
#
#   scripts/bench_classify.sh            # everything, table in $OUT/table.md
#   SIZES="1000 10000" SECS=0.5 RUNS=1 scripts/bench_classify.sh
#   RTE_ALG=avx512x32 RTE_SIMD=512 scripts/bench_classify.sh   # another rte_acl method
#   OURS_SET=ptree.avx512=0 RTE_ALG=avx2 scripts/bench_classify.sh   # both at AVX2
#
# rte_acl runs its default method unless RTE_ALG names one (scalar, sse,
# avx2, avx512x16, avx512x32); RTE_SIMD sets EAL's max SIMD width (512 lets
# it pick avx512x32). The method it ran is named in the table's heading.
# OURS_SET lists build parameters of ours (KEY=VALUE ..., `classify_table
# --set`; ptree.avx512=0: its AVX2 kernels), also named in the heading.
#
# Every number is the median of RUNS (default 3) rounds; within a round each
# set is measured by us and then by rte_acl, so both see the same load (the
# machine is shared), for about the same time: rte_acl makes as many passes
# over the trace as take SECS seconds at the rate we just measured (a short
# run would catch one phase of a host whose speed swings, ours an average).
# rte_acl's build time is the wall time of a dpdk-test-acl run on the set
# minus one on a one-rule set (EAL start-up and file reading cancel), both
# classifying one header, each the fastest of up to 5 runs.
#
# Answers: every structure is checked against the linear oracle on the
# trace (the first 20,000 headers) by classify_table, and rte_acl's answer
# for every header (dpdk-test-acl --verbose=2) is compared with ptree's.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-target/bench-classify}
SECS=${SECS:-1}          # seconds per rate measurement (ours)
ITER=${ITER:-}           # passes over the trace (rte_acl); default: about SECS seconds at our rate
SIZES=${SIZES:-"1000 10000 100000"}
KINDS=${KINDS:-"acl fw ipc"}
RUNS=${RUNS:-3}
OURS_SET=${OURS_SET:-}   # our build parameters, KEY=VALUE ...
ours_set=()
for kv in $OURS_SET; do ours_set+=(--set "$kv"); done
ALGOS=${ALGOS:-"ptree,dtree,trie"}
SHARED=${SYNAPSE_SHARED:-../shared}
mkdir -p "$OUT"

if ! command -v dpdk-test-acl >/dev/null; then
    apt-get update && apt-get install -y dpdk dpdk-dev
fi

cargo build --release -p synapse-core --example classify_table
BIN=target/release/examples/classify_table

# Write every generated set and its trace once (ClassBench files), so each
# round and rte_acl read the same files.
names=()
for kind in $KINDS; do
    for n in $SIZES; do
        name="gen_${kind}_$n"
        names+=("$name")
        [ -f "$OUT/$name" ] && [ -f "$OUT/${name}_trace" ] || "$BIN" --algos ptree --secs 0 --answers none --write "$OUT" "gen:$kind:$n:1" > /dev/null
    done
done
for s in acl1_1k fw1_1k ipc1_1k; do
    src="$SHARED/data/classbench/sets/$s"
    if [ -f "$src" ]; then
        cp "$src" "$src"_trace "$OUT/"
        names+=("$s")
    fi
done

eal=(--no-huge --no-pci -l 0 -m 4096 --log-level=lib.acl:debug ${RTE_SIMD:+--force-max-simd-bitwidth=$RTE_SIMD})
alg=(${RTE_ALG:+--alg=$RTE_ALG})
rte_acl() { # RULES TRACE RULENUM TRACENUM ITER VERBOSE
    dpdk-test-acl "${eal[@]}" -- --rulesf="$1" --tracef="$2" --rulenum="$3" --tracenum="$4" --iter="$5" --verbose="$6" "${alg[@]}"
}
# The method rte_acl classifies with (its context dump's alg=N, DPDK's
# enum rte_acl_classify_alg).
first="$OUT/${names[0]}"
method=$(rte_acl "$first" "${first}_trace" "$(($(grep -c '^@' "$first") + 1))" 1 1 3 2>/dev/null | sed -n 's/^ *alg=\([0-9]*\)$/\1/p' | head -1)
methods=(default scalar sse avx2 neon altivec avx512x16 avx512x32)
method=${methods[${method:-0}]:-alg $method}
now() { date +%s.%N; }

# The fastest of up to 5 wall times of a command (fewer once they pass a
# second): a few-ms build is smaller than one run's start-up noise.
best_wall() {
    local best="" t0 t1 d i
    for i in 1 2 3 4 5; do
        t0=$(now); "$@" > /dev/null 2>&1; t1=$(now)
        d=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$d < $best" | bc -l)" = 1 ]; then best=$d; fi
        if [ "$(echo "$best > 1" | bc -l)" = 1 ]; then break; fi
    done
    echo "$best"
}

for run in $(seq 1 "$RUNS"); do
    R="$OUT/run$run"
    mkdir -p "$R"
    printf 'set\trules\tmlps\tbytes\tbuild_s\tagree\n' > "$R/rte_acl.tsv"
    : > "$R/ours.tsv"
    for name in "${names[@]}"; do
        rules="$OUT/$name"
        trace="$OUT/${name}_trace"
        echo "== round $run: $name: ours ($ALGOS)" >&2
        "$BIN" --secs "$SECS" --budget-mb "${BUDGET_MB:-512}" --algos "$ALGOS" "${ours_set[@]}" --answers ptree --write "$OUT" "$rules:$trace" > "$R/$name.ours.tsv"
        if [ ! -s "$R/ours.tsv" ]; then head -1 "$R/$name.ours.tsv" > "$R/ours.tsv"; fi
        tail -n +2 "$R/$name.ours.tsv" >> "$R/ours.tsv"

        echo "== round $run: $name: rte_acl" >&2
        n=$(grep -c '^@' "$rules")
        t=$(grep -c . "$trace")
        ours_mlps=$(awk -F'\t' 'NR > 1 && $9 != "" { print $9; exit }' "$R/$name.ours.tsv")
        iter=${ITER:-$(awk -v s="$SECS" -v r="${ours_mlps:-20}" -v t="$t" 'BEGIN { print int(s * r * 1e6 / t) + 1 }')}
        if ! rte_acl "$rules" "$trace" $((n + 1)) "$t" "$iter" 0 > "$R/$name.rte_acl.log" 2>&1; then
            printf '%s\t%s\t-\t-\t-\tfailed (see %s)\n' "$name" "$n" "$R/$name.rte_acl.log" >> "$R/rte_acl.tsv"
            continue
        fi
        pps=$(sed -n 's/.* \([0-9.]*\) pkt\/sec.*/\1/p' "$R/$name.rte_acl.log" | tail -1)
        bytes=$(sed -n 's/^total: \([0-9]*\) bytes.*/\1/p' "$R/$name.rte_acl.log" | tail -1)
        # Build time: this set minus one rule, one header each, the fastest
        # of repeated runs of each (never below 0).
        head -1 "$rules" > "$R/one_rule"
        full=$(best_wall rte_acl "$rules" "$trace" $((n + 1)) 1 1 0)
        one=$(best_wall rte_acl "$R/one_rule" "$trace" 2 1 1 0)
        build=$(echo "d = $full - $one; if (d < 0) d = 0; d" | bc -l)
        agree=-
        if [ "$run" = 1 ]; then
            # Second oracle: rte_acl prints userdata-1 = the 0-based rule, or 2^32-1.
            rte_acl "$rules" "$trace" $((n + 1)) "$t" 1 2 2>/dev/null \
                | awk '/ipv4_5tuple:/ { r = $NF; print (r == 4294967295 ? -1 : r) }' > "$OUT/$name.rte_acl.answers"
            agree=$(paste "$OUT/$name.answers" "$OUT/$name.rte_acl.answers" | awk '$1 == $2 { a++ } END { print a + 0 "/" NR }')
        fi
        printf '%s\t%s\t%.3f\t%s\t%.3f\t%s\n' "$name" "$n" "$(echo "$pps / 1000000" | bc -l)" "$bytes" "$build" "$agree" >> "$R/rte_acl.tsv"
    done
    cat "$R/rte_acl.tsv"
done

# The CPU's highest SIMD level (flags are not listed in order of width).
flags=$(grep -m1 '^flags' /proc/cpuinfo)
simd=none
for f in sse4_2 avx2 avx512f; do
    if grep -qw "$f" <<< "$flags"; then simd=$f; fi
done
python3 - "$OUT" "$RUNS" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$simd" "$method" "$OURS_SET" <<'EOF'
import csv, statistics, sys
out, runs, cpu, simd, method, ours_set = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
load = lambda f: list(csv.DictReader(open(f), delimiter="\t"))
ours = [load(f"{out}/run{r}/ours.tsv") for r in range(1, runs + 1)]
rte = [{x["set"]: x for x in load(f"{out}/run{r}/rte_acl.tsv")} for r in range(1, runs + 1)]
sets = list(dict.fromkeys(x["set"] for x in ours[0]))


def vals(s, algo, key):
    return [x[key] for o in ours for x in o if x["set"] == s and x["algo"] == algo]


def med(v):
    v = [float(x) for x in v if x not in ("", "-", None)]
    return statistics.median(v) if v else None


def fmt(v, p=1, none="over budget"):
    return none if v is None else f"{v:.{p}f}"


lines = [f"{cpu}, SIMD level {simd.upper().replace('AVX512F', 'AVX-512')}; rte_acl method {method}; "
         + (f"ours with {ours_set}; " if ours_set else "")
         + f"one core; medians of {runs} interleaved rounds.", "",
         "| set | rules | ptree Ml/s | rte_acl Ml/s | ptree ÷ rte_acl | ptree B/rule | rte_acl B/rule "
         "| ptree build ms | rte_acl build ms | dtree Ml/s | trie Ml/s | ptree = oracle | ptree = rte_acl |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s in sets:
    n = vals(s, "ptree", "rules")[0]
    rr = [r.get(s, {}) for r in rte]
    p, r = med(vals(s, "ptree", "mlps_batch")), med([x.get("mlps") for x in rr])
    pb = med(vals(s, "ptree", "bytes_per_rule"))
    rb = med([x.get("bytes") for x in rr])
    rbuild = med([x.get("build_s") for x in rr])
    lines.append("| " + " | ".join([
        s, n, fmt(p), fmt(r, none="failed"), "-" if p is None or not r else f"{p / r:.2f}×",
        fmt(pb, 0), "-" if rb is None else f"{rb / int(n):.0f}",
        fmt(med(vals(s, "ptree", "build_ms"))), "-" if rbuild is None else f"{rbuild * 1e3:.0f}",
        *[fmt(med(vals(s, a, "mlps_batch"))) if any(x["set"] == s and x["algo"] == a for o in ours for x in o) else "–"
          for a in ("dtree", "trie")],
        vals(s, "ptree", "agree")[0], rr[0].get("agree", "-"),
    ]) + " |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
