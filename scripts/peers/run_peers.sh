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
# CutSplit comes from NuevoMatch's repository (github.com/acsl-technion/
# nuevomatch), run by its driver `tool_classifier.exe -m cutsplit`: built
# from the rules, then 5 warm-up passes and one timed pass over the trace,
# per packet (`classify_async` and a listener callback; its exact-match
# cache off); build time not in the timing. The trace is given the linear
# oracle's answers (`synapse classify --algo linear --out`) as its last
# column, which the driver compares with every answer. NuevoMatch itself
# is not run: its models are trained by a TensorFlow 1.13 script (about 40
# minutes a rule set, by its README) and TensorFlow 1 has no build for
# Python 3.8 or later. Their `configure` checks for it and stops; the
# script writes the two files the driver's build needs from it
# (`bin/objects.mk`, `bin/libtuplemerge.a` from TupleMerge v1.0 with their
# patch).
#
#   scripts/peers/run_peers.sh RULES TRACE [RULES TRACE ...]
#   TM_SRC=/path/to/tuplemerge scripts/peers/run_peers.sh ...   # a checkout instead of a clone
#   NM_SRC=/path/to/nuevomatch ...   # the same for NuevoMatch; CUTSPLIT=0 skips it
#
# Not part of CI (needs the network for the clones, g++ with OpenMP,
# minutes). Rows go to $OUT/peers.jsonl, one per (set, peer).
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

CUTSPLIT=${CUTSPLIT:-1}
NM=${NM_SRC:-$OUT/nuevomatch}
SYNAPSE=${SYNAPSE:-synapse}
if [ "$CUTSPLIT" = 1 ] && [ ! -x "$NM/bin/tool_classifier.exe" ]; then
    if [ ! -f "$NM/Makefile" ]; then
        git clone --depth 1 https://github.com/acsl-technion/nuevomatch "$NM"
    fi
    # TupleMerge v1.0 (the tag is its HEAD) with NuevoMatch's patch, whose
    # CRLF line ends need git apply's whitespace options.
    if [ ! -f "$NM/tuplemerge/TupleMergeOnline.o" ]; then
        rm -rf "$NM/tuplemerge"
        mkdir -p "$NM/tuplemerge"
        (cd "$TM" && tar --exclude='*.o' --exclude=./main --exclude=.git -cf - .) | tar -xf - -C "$NM/tuplemerge"
        (cd "$NM" && git apply --ignore-whitespace --ignore-space-change --directory=tuplemerge tuplemerge.patch)
        make -s -C "$NM/tuplemerge" -j1 > "$OUT/nm_tuplemerge.log" 2>&1
    fi
    # What their configure writes: one make rule per source (g++ -MM) and
    # the TupleMerge library.
    mkdir -p "$NM/bin"
    (cd "$NM" && for f in src/*.cpp tools/*.cpp vendor/*.cpp; do
        flags='$(CXXFLAGS) $(SIMDFLAGS) $(DBGFLAGS)'
        case $f in vendor/*) flags='-O2 -std=c++14 -fpermissive $(DBGFLAGS)' ;; esac
        g++ -std=c++11 -mavx2 -mfma -I./include/ -MM "$f" | sed "s@^\(.*\.o\):@bin/\1:@"
        printf '\t$(CXX) %s $(INCLUDES) $(LIBRARIES) -c %s -o bin/%s.o\n\n' "$flags" "$f" "$(basename "${f%.*}")"
    done > bin/objects.mk)
    (cd "$NM/tuplemerge" && ar crf ../bin/libtuplemerge.a cmap.o TupleSpaceSearch.o TupleMergeOnline.o \
        TupleMergeOffline.o SlottedTable.o Simulation.o MapExtensions.o)
    make -s -C "$NM" -j1 bin/tool_classifier.exe DBGFLAGS="-O2 -DNDEBUG" > "$OUT/nm_make.log" 2>&1
fi
# tm_updates links TupleMerge's objects: NuevoMatch's patched copy when it
# is built. TupleMerge v1.0's DeleteRule, on emptying a table, erases it
# and every table after it (`tables.erase(find(...), tables.end())`), so
# the unpatched online classifier loses rules under churn; the patch erases
# that one table.
TMU=$TM
if [ -f "$NM/tuplemerge/TupleMergeOnline.o" ]; then TMU=$NM/tuplemerge; fi
objs=()
for o in "$TMU"/*.o; do [ "$(basename "$o")" = main.o ] || objs+=("$o"); done
g++ -std=c++14 -fpermissive -fopenmp -O3 -w -I"$TMU" -o "$OUT/tm_updates" "$here/tm_updates.cpp" "${objs[@]}"
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
    (cd "$TM" && ./main f="$rules" p="$trace" m=Validate Validate.Threshold=1000000000 c=TMOffline,TMOnline,PartitionSort,PriorityTuple) > "$vlog" 2>&1 || true
    python3 - "$csv" "$vlog" "$set_name" "$packets" >> "$OUT/peers.jsonl" <<'PY'
import csv, json, sys
rows, vlog, name, packets = list(csv.DictReader(open(sys.argv[1]))), open(sys.argv[2]).read(), sys.argv[3], int(sys.argv[4])
# Their Validate mode: every packet's answers compared across the four; a
# packet where they differ is printed with each one's answer and the truth
# (the first matching rule by their priority). TupleMerge online's answers
# are also checked against a linear scan by tm_updates below.
if "Testing" not in vlog:
    sys.exit(f"{name}: their Validate mode did not run (see {sys.argv[2]})")
accord = "All classifiers are in accord" in vlog
disagree = vlog.count("\tTruth:")
for r in rows:
    print(json.dumps({"set": name, "peer": r["Classifier"], "loop": "per packet (their driver)",
                      "lookups_per_s": packets / float(r["ClassificationTime(s)"]),
                      "build_s": float(r["ConstructionTime(ms)"]) / 1e3, "bytes": int(float(r["Size(bytes)"])),
                      "peers_agree": accord, "packets_in_disagreement": disagree}))
PY
    # The linear oracle's answer per header (0-based rule, -1 for none).
    "$SYNAPSE" classify --rules "$rules" --trace "$trace" --algo linear --out "$OUT/$set_name.oracle" > /dev/null || true
    if [ "$CUTSPLIT" = 1 ]; then
        echo "== $set_name: CutSplit (NuevoMatch's driver)" >&2
        # The trace with the oracle's answers as its last column (-1, no
        # match, as the driver's 2^32 - 1).
        # The driver times one pass (to the microsecond): a short trace is
        # repeated to at least MIN_PACKETS headers.
        reps=$(( (${MIN_PACKETS:-100000} + packets - 1) / packets ))
        awk -v reps="$reps" 'NR == FNR { a[FNR] = ($1 < 0 ? 4294967295 : $1); next }
             { $NF = a[FNR]; line[FNR] = $0; n = FNR }
             END { for (r = 0; r < reps; r++) for (i = 1; i <= n; i++) print line[i] }' \
            "$OUT/$set_name.oracle" "$trace" > "$OUT/$set_name.cs_trace"
        cslog="$OUT/$set_name.cutsplit.log"
        "$NM/bin/tool_classifier.exe" -m cutsplit -c -in "$rules" -out "$OUT/$set_name.cs" \
            --trace "$OUT/$set_name.cs_trace" -v 1 > "$cslog" 2>&1
        python3 - "$cslog" "$set_name" "$((packets * reps))" >> "$OUT/peers.jsonl" <<'PY'
import json, re, sys
log, name, packets = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
usec = float(re.findall(r"Performance: total time (\d+) usec", log)[-1])
wrong = len(re.findall(r"does not match", log))
print(json.dumps({"set": name, "peer": "CutSplit", "loop": "per packet (NuevoMatch's driver)",
                  "lookups_per_s": packets / (usec / 1e6),
                  "build_s": int(re.search(r"Build time \(ms\): (\d+)", log).group(1)) / 1e3,
                  "bytes": int(re.search(r"Total size \(bytes\): (\d+)", log).group(1)),
                  "checked": packets, "wrong": wrong}))
PY
    fi
    echo "== $set_name: TupleMerge online under churn" >&2
    "$OUT/tm_updates" "$rules" "$trace" "$UPDATES" "$OUT/$set_name.oracle" 2>/dev/null | tail -1 \
        | python3 -c "import json, sys; r = json.load(sys.stdin); r['set'] = '$set_name'; r['loop'] = 'per packet'; r['tuplemerge'] = '$TMU'; print(json.dumps(r))" \
        >> "$OUT/peers.jsonl"
done
cat "$OUT/peers.jsonl"
