#!/usr/bin/env bash
# Published peers of the ptree on the same rule and trace files:
# TupleMerge (offline, online), PartitionSort and PriorityTuple from the
# authors' repository (github.com/drjdaly/tuplemerge), built with their
# makefile and run with their own driver (`main m=Classification`: a
# per-packet loop of ClassifyAPacket over the trace, timed as a whole;
# `m=Validation`: every classifier's answer compared with the others').
# TupleMerge online is also run under the churn of `synapse bench
# classify --churn near` by tm_updates.cpp (beside this script, linked with
# their objects): its static rate, update latency p50/p99/p99.9 and the
# answers after the churn against a linear scan over the rules left.
#
#   scripts/peers/run_peers.sh RULES TRACE [RULES TRACE ...]
#   TM_SRC=/path/to/tuplemerge scripts/peers/run_peers.sh ...   # a checkout instead of a clone
#
# Not part of CI (needs the network for the clone, g++ with OpenMP, minutes).
# Rows go to $OUT/peers.jsonl, one per (set, peer).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-target/bench-peers}
UPDATES=${UPDATES:-100000}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TM=${TM_SRC:-$OUT/tuplemerge}
if [ ! -f "$TM/makefile" ]; then
    git clone --depth 1 https://github.com/drjdaly/tuplemerge "$TM"
fi
(cd "$TM" && make -s main)
objs=$(ls "$TM"/*.o | grep -v '/main\.o$')
g++ -std=c++14 -fpermissive -fopenmp -O3 -w -I"$TM" -o "$OUT/tm_updates" "$here/tm_updates.cpp" $objs
: > "$OUT/peers.jsonl"
while [ $# -ge 2 ]; do
    rules=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    trace=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
    shift 2
    set_name=$(basename "$rules")
    packets=$(grep -c . "$trace")
    echo "== $set_name: the authors' driver" >&2
    csv="$OUT/$set_name.classification.csv"
    (cd "$TM" && ./main f="$rules" p="$trace" m=Classification o="$csv" c=TMOffline,TMOnline,PartitionSort,PriorityTuple) > "$OUT/$set_name.classification.log" 2>&1
    vlog="$OUT/$set_name.validation.log"
    (cd "$TM" && ./main f="$rules" p="$trace" m=Validation c=TMOffline,TMOnline,PartitionSort,PriorityTuple) > "$vlog" 2>&1 || true
    python3 - "$csv" "$vlog" "$set_name" "$packets" >> "$OUT/peers.jsonl" <<'PY'
import csv, json, sys
rows, vlog, name, packets = list(csv.DictReader(open(sys.argv[1]))), open(sys.argv[2]).read(), sys.argv[3], int(sys.argv[4])
# Their Validation mode: every packet's answers equal across the four (and
# TupleMerge online's equal a linear scan: tm_updates below).
accord = "All classifiers are in accord" in vlog
for r in rows:
    print(json.dumps({"set": name, "peer": r["Classifier"], "loop": "per packet (their driver)",
                      "lookups_per_s": packets / float(r["ClassificationTime(s)"]),
                      "build_s": float(r["ConstructionTime(ms)"]) / 1e3, "bytes": int(float(r["Size(bytes)"])),
                      "peers_agree": accord}))
PY
    echo "== $set_name: TupleMerge online under churn" >&2
    "$OUT/tm_updates" "$rules" "$trace" "$UPDATES" 2>/dev/null | tail -1 \
        | python3 -c "import json, sys; r = json.load(sys.stdin); r['set'] = '$set_name'; r['loop'] = 'per packet'; print(json.dumps(r))" \
        >> "$OUT/peers.jsonl"
done
cat "$OUT/peers.jsonl"
