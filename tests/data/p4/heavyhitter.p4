// heavyhitter: externs whose results depend on state across packets or on
// hashes, for the comparison with BMv2 simple_switch. A per-flow packet
// counter (a register indexed by a crc16 hash of the 5-tuple) classifies
// flows by their count (a register-keyed range table); past a threshold a
// flow is a heavy hitter: it is cloned to a monitor port (I2E, mirroring
// session 5) and metered (two-rate three-colour, rates set by the entries
// file), and dropped when red. A crc32 hash picks an ECMP bucket (a
// hash-keyed table with a direct counter); a csum16 hash samples packets
// (a hash-derived conditional marks them); an indirect counter counts per
// bucket; the egress marks the monitor copies and counts per port (a direct
// counter); the IPv4 checksum is recomputed (csum16).
//
// heavyhitter.json is this program as p4c's BMv2 back end writes it (written by
// hand in p4c's conventions); heavyhitter-entries.txt holds its entries (and
// the mirroring session and meter rates), heavyhitter.pcap its capture
// (scripts/p4_captures.py heavyhitter). The meter's rates (1 packet/s,
// bursts 2 and 4) make its colours independent of replay speed as long as
// the capture replays within a second: after the threshold a heavy flow's
// first 2 packets are green, the next 2 yellow, the rest red.

#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header ports_t { bit<16> srcPort; bit<16> dstPort; }   // the first 4 bytes of TCP and UDP

struct headers { ethernet_t ethernet; ipv4_t ipv4; ports_t ports; }
struct metadata {
    bit<16> flow_idx; bit<32> flow_count; bit<8> bucket; bit<8> color;
    bit<16> sample; bit<16> l4_sport; bit<16> l4_dport;
}

const bit<32> HEAVY = 20;

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 6: parse_ports; 17: parse_ports; default: accept; }
    }
    state parse_ports {
        packet.extract(hdr.ports);
        meta.l4_sport = hdr.ports.srcPort; meta.l4_dport = hdr.ports.dstPort;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(1024) flow_pkts;
    counter(16, CounterType.packets_and_bytes) bucket_pkts;
    direct_counter(CounterType.packets_and_bytes) ecmp_stats;
    meter(1024, MeterType.packets) hh_meter;

    action drop() { mark_to_drop(standard_metadata); }
    action track() {
        hash(meta.flow_idx, HashAlgorithm.crc16, 16w0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol, meta.l4_sport, meta.l4_dport }, 32w1024);
        hash(meta.bucket, HashAlgorithm.crc32, 8w0, { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr }, 32w16);
        hash(meta.sample, HashAlgorithm.csum16, 16w0, { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, meta.l4_sport }, 32w4);
        flow_pkts.read(meta.flow_count, (bit<32>)meta.flow_idx);
        meta.flow_count = meta.flow_count + 1;
        flow_pkts.write((bit<32>)meta.flow_idx, meta.flow_count);
        bucket_pkts.count((bit<32>)meta.bucket);
    }
    action set_class(bit<8> dscp) { hdr.ipv4.diffserv = dscp; }
    action heavy() {
        clone(CloneType.I2E, 32w5);
        hh_meter.execute_meter((bit<32>)meta.flow_idx, meta.color);
    }
    action set_port(bit<9> port) { ecmp_stats.count(); standard_metadata.egress_spec = port; }
    action mark_sampled() { hdr.ipv4.ttl = hdr.ipv4.ttl - 1; }

    table hh_class {                     // keyed on a register's value
        key = { meta.flow_count: range; }
        actions = { set_class; NoAction; }
        default_action = NoAction();
    }
    table ecmp {                         // keyed on a crc32 hash
        key = { meta.bucket: exact; }
        actions = { set_port; drop; }
        default_action = drop();
        counters = ecmp_stats;
        size = 16;
    }
    apply {
        if (hdr.ipv4.isValid()) {
            track();                                   // tbl_track
            hh_class.apply();
            if (meta.flow_count > HEAVY) {
                heavy();                               // tbl_heavy
                if (meta.color == 2) { drop(); exit; } // tbl_police: red
            }
            ecmp.apply();
            if (meta.sample == 0) { mark_sampled(); }  // tbl_mark_sampled
        } else {
            drop();                                    // tbl_drop
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets) port_stats_c;
    action mon_mark() { hdr.ethernet.dstAddr = 0xffffffffffff; }
    action count_port() { port_stats_c.count(); }
    table port_stats {
        key = { standard_metadata.egress_port: exact; }
        actions = { count_port; NoAction; }
        default_action = NoAction();
        counters = port_stats_c;
    }
    apply {
        if (standard_metadata.instance_type == 1) { mon_mark(); }   // tbl_mon_mark: an ingress clone
        port_stats.apply();
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); packet.emit(hdr.ports); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
