// route3-edge: the 3-table class of v1model program (LPM route -> exact next hop
// -> ternary/range ACL) with a parser that meets the edge cases of real
// captures: VLAN, IPv4 options (skipped with advance), fragments (no L4
// header past the first), IPv6, ARP, TCP/UDP/SCTP/GRE, short frames.
//
// route3-edge.json is this program as p4c's BMv2 back end writes it (written by
// hand in p4c's conventions: p4c is not needed to run the tests);
// route3-edge-entries.txt holds its entries, route3-edge.pcap the edge-case capture
// (scripts/p4_captures.py). BMv2 simple_switch runs route3-edge.json as is.

#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header vlan_t { bit<3> pcp; bit<1> cfi; bit<12> vid; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header ipv6_t {
    bit<4> version; bit<8> trafficClass; bit<20> flowLabel;
    bit<16> payloadLen; bit<8> nextHdr; bit<8> hopLimit;
    bit<128> srcAddr; bit<128> dstAddr;
}
header arp_t {
    bit<16> htype; bit<16> ptype; bit<8> hlen; bit<8> plen; bit<16> oper;
    bit<48> sha; bit<32> spa; bit<48> tha; bit<32> tpa;
}
header tcp_t {
    bit<16> srcPort; bit<16> dstPort; bit<32> seqNo; bit<32> ackNo;
    bit<4> dataOffset; bit<4> res; bit<8> flags; bit<16> window;
    bit<16> checksum; bit<16> urgentPtr;
}
header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> length_; bit<16> checksum; }
header sctp_t { bit<16> srcPort; bit<16> dstPort; bit<32> verifTag; bit<32> checksum; }
header gre_t { bit<16> flagsVer; bit<16> proto; }

struct headers {
    ethernet_t ethernet; vlan_t vlan; ipv4_t ipv4; ipv6_t ipv6; arp_t arp;
    tcp_t tcp; udp_t udp; sctp_t sctp; gre_t gre;
}
struct metadata { bit<16> nhop_id; bit<16> l4_sport; bit<16> l4_dport; }

error { BadIhl }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x8100: parse_vlan;
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            0x0806: parse_arp;
            default: accept;
        }
    }
    state parse_vlan {
        packet.extract(hdr.vlan);
        transition select(hdr.vlan.etherType) {
            0x0800: parse_ipv4;
            0x86dd: parse_ipv6;
            0x0806: parse_arp;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.BadIhl);
        packet.advance(((bit<32>)hdr.ipv4.ihl << 5) - 160);   // the options
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, 6): parse_tcp;
            (0, 17): parse_udp;
            (0, 132): parse_sctp;
            (0, 47): parse_gre;
            default: accept;                                   // later fragments, ICMP, OSPF...
        }
    }
    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.nextHdr) {
            6: parse_tcp;
            17: parse_udp;
            132: parse_sctp;
            default: accept;
        }
    }
    state parse_arp { packet.extract(hdr.arp); transition accept; }
    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_sport = hdr.tcp.srcPort; meta.l4_dport = hdr.tcp.dstPort;
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_sport = hdr.udp.srcPort; meta.l4_dport = hdr.udp.dstPort;
        transition accept;
    }
    state parse_sctp {
        packet.extract(hdr.sctp);
        meta.l4_sport = hdr.sctp.srcPort; meta.l4_dport = hdr.sctp.dstPort;
        transition accept;
    }
    state parse_gre { packet.extract(hdr.gre); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action set_nhop(bit<16> nhop_id) { meta.nhop_id = nhop_id; }
    action forward(bit<9> port, bit<48> smac, bit<48> dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = smac;
        hdr.ethernet.dstAddr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action permit() { }
    action deny() { mark_to_drop(standard_metadata); }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; drop; }
        default_action = drop();
        size = 1024;
    }
    table nexthop {
        key = { meta.nhop_id: exact; }
        actions = { forward; drop; }
        default_action = drop();
        size = 256;
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary; hdr.ipv4.dstAddr: ternary;
            hdr.ipv4.protocol: ternary;
            meta.l4_sport: range; meta.l4_dport: range;
        }
        actions = { permit; deny; NoAction; }
        default_action = NoAction();
        size = 1024;
    }
    apply {
        if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.ttl > 1) {
                ipv4_lpm.apply();
                if (meta.nhop_id != 0) {
                    switch (nexthop.apply().action_run) {
                        forward: { acl.apply(); }
                    }
                }
            } else {
                drop();                                            // tbl_drop_ttl
            }
        } else {
            drop();                                                // tbl_drop
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

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
    apply {
        packet.emit(hdr.ethernet); packet.emit(hdr.vlan); packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6); packet.emit(hdr.arp); packet.emit(hdr.tcp);
        packet.emit(hdr.udp); packet.emit(hdr.sctp); packet.emit(hdr.gre);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
