#!/usr/bin/env bash
# The ptree under update churn (`synapse bench classify --updates-per-s`)
# on generated acl1 and fw1 sets of 10K rules with a 100K-header trace
# (seed 1), the three churn placements (uniform, near, rank), RUNS
# interleaved rounds,
# the medians as the docs' table (docs/how-to/classifier-bench.md).
#
#   scripts/bench_churn.sh                      # 1e6 offered, 3 rounds
#   RATE=1e5 RUNS=1 SETS=fw scripts/bench_churn.sh
#   EXTRA="--set ptree.wide_leaves=0" scripts/bench_churn.sh   # no side leaf (default: 64)
#
# Not part of CI: it takes minutes. Needs `synapse` on the PATH.
set -euo pipefail
OUT=${OUT:-target/bench-churn}
RATE=${RATE:-1e6}
RUNS=${RUNS:-3}
SECS=${SECS:-1}
SETS=${SETS:-"acl fw"}
CHURNS=${CHURNS:-"uniform near rank"}
EXTRA=${EXTRA:---set ptree.wide_leaves=64}
mkdir -p "$OUT"
for k in $SETS; do
    [ -f "$OUT/${k}1_10k" ] || synapse rules gen --type "$k" --count 10000 --seed 1 -o "$OUT/${k}1_10k" > /dev/null
    [ -f "$OUT/${k}1_10k_trace" ] || synapse trace gen --rules "$OUT/${k}1_10k" --packets 100000 --seed 1 -o "$OUT/${k}1_10k_trace" > /dev/null
done
: > "$OUT/runs.jsonl"
for run in $(seq 1 "$RUNS"); do
    for k in $SETS; do
        for c in $CHURNS; do
            echo "== round $run: ${k}1_10k $c" >&2
            # shellcheck disable=SC2086
            synapse bench classify --rules "$OUT/${k}1_10k" --trace "$OUT/${k}1_10k_trace" --algo ptree \
                --secs "$SECS" --updates-per-s "$RATE" --churn "$c" --json $EXTRA \
                | python3 -c "import json, sys; r = json.load(sys.stdin); r['set'] = '${k}1_10k'; print(json.dumps(r))" \
                >> "$OUT/runs.jsonl"
        done
    done
done
python3 - "$OUT/runs.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(x) for x in open(sys.argv[1])]
print("| set | churn | static M/s (original) | fresh build M/s | under churn M/s | ÷ original | ÷ fresh "
      "| offered /s | sustained /s | capacity /s | p50 / p99 / p99.9 / max µs | wrong / checked |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for key in dict.fromkeys((r["set"], r["churn"]) for r in rows):
    g = [r for r in rows if (r["set"], r["churn"]) == key]
    m = lambda f: statistics.median(r[f] for r in g)
    print(f"| {key[0]} | {key[1]} | {m('lookups_per_s') / 1e6:.1f} | {m('fresh_lookups_per_s') / 1e6:.1f} "
          f"| {m('churn_lookups_per_s') / 1e6:.1f} | {m('churn_lookup_ratio'):.2f}x | {m('churn_lookup_ratio_fresh'):.2f}x "
          f"| {g[0]['updates_offered_per_s']:.0e} | {m('updates_per_s'):,.0f} | {m('update_capacity_per_s'):,.0f} "
          f"| {m('update_latency_us_p50'):.2f} / {m('update_latency_us_p99'):.1f} / {m('update_latency_us_p999'):.0f} "
          f"/ {m('update_latency_us_max'):,.0f} "
          f"| {sum(r['wrong'] for r in g)} / {sum(r['checked'] for r in g)} |")
EOF
