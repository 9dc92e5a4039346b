#!/usr/bin/env bash
# Build BMv2 simple_switch (and the Python side of simple_switch_CLI) from a
# behavioral-model source tree, for scripts/bmv2_goldens.py. CI does not run
# this: it only reads the goldens that script records.
#
#   scripts/bmv2_build.sh SRC_DIR [COMMIT]
#
# SRC_DIR is a checkout (or `git archive`) of github.com/p4lang/behavioral-model,
# outside this repository; COMMIT names it in the goldens' provenance (taken
# from `git -C SRC_DIR rev-parse HEAD` when SRC_DIR is a checkout). Installs
# the Debian build dependencies (needs root), configures without PI, the
# packet tracer and the event logger, static libraries, and builds only the
# libraries, simple_switch and the CLI's Python modules (about 5 minutes on 2
# cores). Writes SRC_DIR/.synapse-bmv2-build.json, which bmv2_goldens.py reads.
set -euo pipefail
src=${1:?usage: scripts/bmv2_build.sh SRC_DIR [COMMIT]}
src=$(cd "$src" && pwd)
commit=${2:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)}
configure_flags="--without-packet-trace --disable-elogger --disable-shared"

if [ "${BMV2_SKIP_APT:-0}" != 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        autoconf automake libtool libtool-bin pkg-config g++ make flex bison \
        libboost-dev libboost-program-options-dev libboost-system-dev libboost-filesystem-dev \
        libboost-thread-dev libevent-dev libgmp-dev libpcap-dev libjudy-dev libssl-dev \
        libxxhash-dev libjsoncpp-dev libreadline-dev libffi-dev libnanomsg-dev \
        libthrift-dev thrift-compiler python3-thrift
fi

cd "$src"
[ -x configure ] || ./autogen.sh
[ -f config.status ] || ./configure $configure_flags
for d in thrift_src third_party src include targets/test_utils targets/simple_switch tools; do
    nice make -j"${JOBS:-2}" -C "$d"
done

cat > .synapse-bmv2-build.json <<EOF
{
 "repository": "https://github.com/p4lang/behavioral-model",
 "commit": "$commit",
 "version": "$(cat VERSION)",
 "configure_flags": "$configure_flags",
 "built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
 "compiler": "$(g++ --version | head -1)"
}
EOF
echo "simple_switch: $src/targets/simple_switch/simple_switch"
echo "record goldens: python scripts/bmv2_goldens.py --bmv2 $src record"
