// TupleMerge online (drjdaly/tuplemerge) under the churn of
// `synapse bench classify --churn near`: random deletes of rules of the set,
// and inserts of deleted rules back at their own priority, keeping the set
// between 31/32 of its size and its size; every update timed on its own
// (steady_clock). Prints the static lookup rate (per packet, the authors'
// ClassifyAPacket loop), the update latency p50/p99/p99.9 and capacity, and
// the answers that differ from a linear scan over the rules left. With a
// fourth argument, the linear oracle's answers (`synapse classify --algo
// linear --out`: a 0-based rule per header, -1 for none), it first checks
// every header's static answer against them (their ClassBench reader gives
// rule i of n the priority n - 1 - i).
// Built against the authors' objects by scripts/peers/run_peers.sh.
#include "ElementaryClasses.h"
#include "IO/InputReader.h"
#include "TupleMerge/TupleMergeOnline.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

using namespace std;
using clk = chrono::steady_clock;

static int oracle(const vector<Rule>& live, const Packet& p) {
    int best = -1;
    for (const Rule& r : live)
        if (r.priority > best && r.MatchesPacket(p)) best = r.priority;
    return best;
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: tm_updates RULES TRACE UPDATES [ORACLE_ANSWERS]\n");
        return 2;
    }
    vector<Rule> rules = InputReader::ReadFilterFile(argv[1]);
    vector<Packet> packets;
    for (auto& v : InputReader::ReadPackets(argv[2])) packets.push_back(Packet(v.begin(), v.end()));
    long updates = atol(argv[3]);
    size_t n = rules.size();
    TupleMergeOnline tm(unordered_map<string, string>{});
    // Through the base class: NuevoMatch's patch adds an overload with a
    // default argument, which makes tm.ClassifyAPacket(p) ambiguous.
    PacketClassifier& pc = tm;
    auto t0 = clk::now();
    tm.ConstructClassifier(rules);
    double build_s = chrono::duration<double>(clk::now() - t0).count();
    // Static rate: the trace, packet by packet, at least 1 s.
    long looked = 0;
    volatile int sink = 0;
    t0 = clk::now();
    while (chrono::duration<double>(clk::now() - t0).count() < 1.0)
        for (const Packet& p : packets) {
            sink = sink + pc.ClassifyAPacket(p);
            looked++;
        }
    double static_rate = looked / chrono::duration<double>(clk::now() - t0).count();
    long static_checked = 0, static_wrong = 0;
    if (argc > 4) {
        FILE* f = fopen(argv[4], "r");
        if (!f) {
            fprintf(stderr, "%s: cannot open\n", argv[4]);
            return 2;
        }
        long a;
        for (size_t i = 0; i < packets.size() && fscanf(f, "%ld", &a) == 1; i++) {
            int want = a < 0 ? -1 : int(n - 1 - a);
            static_checked++;
            static_wrong += pc.ClassifyAPacket(packets[i]) != want;
        }
        fclose(f);
    }
    // The churn. `live` mirrors TupleMergeOnline's own rule vector (its
    // DeleteRule(index) swaps the last rule into the hole).
    vector<Rule> live = rules, gone;
    mt19937_64 rng(7);
    vector<double> lat;
    lat.reserve(updates);
    for (long i = 0; i < updates; i++) {
        size_t len = live.size();
        bool insert = !gone.empty() && (len <= n - n / 32 || (rng() & 1));
        if (insert) {
            size_t j = rng() % gone.size();
            Rule r = gone[j];
            gone[j] = gone.back();
            gone.pop_back();
            auto a = clk::now();
            tm.InsertRule(r);
            lat.push_back(chrono::duration<double>(clk::now() - a).count());
            live.push_back(r);
        } else {
            size_t j = rng() % len;
            Rule r = live[j];
            auto a = clk::now();
            tm.DeleteRule(j);
            lat.push_back(chrono::duration<double>(clk::now() - a).count());
            live[j] = live.back();
            live.pop_back();
            gone.push_back(r);
        }
    }
    double total = 0;
    for (double x : lat) total += x;
    sort(lat.begin(), lat.end());
    auto q = [&](double f) { return lat.empty() ? 0.0 : lat[size_t((lat.size() - 1) * f + 0.5)] * 1e6; };
    // Answers after the churn (priorities) against the linear scan, every
    // 7th header.
    long checked = 0, wrong = 0;
    for (size_t i = 0; i < packets.size(); i += 7) {
        checked++;
        wrong += pc.ClassifyAPacket(packets[i]) != oracle(live, packets[i]);
    }
    printf("{\"peer\": \"TupleMerge online\", \"rules\": %zu, \"build_s\": %.4f, \"lookups_per_s\": %.0f, "
           "\"updates\": %ld, \"update_capacity_per_s\": %.0f, \"update_latency_us_p50\": %.3f, "
           "\"update_latency_us_p99\": %.3f, \"update_latency_us_p999\": %.3f, \"update_latency_us_max\": %.1f, "
           "\"static_checked\": %ld, \"static_wrong\": %ld, \"checked\": %ld, \"wrong\": %ld}\n",
           n, build_s, static_rate, updates, updates / max(total, 1e-12), q(0.5), q(0.99), q(0.999), q(1.0),
           static_checked, static_wrong, checked, wrong);
    return 0;
}
