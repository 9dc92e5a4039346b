// A VMT cluster: NT tables' VMUs in front, NP PMUs behind the segmented-
// channel interconnect, the PMU -> ELU bus out to the ELU (paper Fig. 2 and
// §4). RTL of the simulator's phases 2-7 (crates/synapse-core/src/sim/
// phases.rs) around the units synapse_vmu.v and synapse_pmu.v, cycle for
// cycle. The ELU (and its HBM) is outside: the miss port (mq_*, taken when
// elu_ready) and the reply port (fill_*) are the boundary.
//
// One cycle, in the simulator's order:
//   2   the ELU's reply: to PMU fill_dst (a CAM fill) or, fill_dst = NP, to
//       table fill_tbl's VMU (a key that had no PMU)
//   3-4 every PMU steps and hands its Q_p head to the VMU of its table
//       (rsp_ready is 1: each PMU has its own response wire)
//   5   the bus: one miss a cycle, round robin over PMU 0..NP-1 and the
//       VMUs' direct queue (source NP), from the source after the last one
//       served, when the ELU's miss queue has room
//   7   tables in round robin from (cycle mod NT): each VMU releases, then
//       requests. A request to PMU p takes p's channel (PMUs split into CH
//       equal contiguous groups: channel p*CH/NP) if p's Q_r can take it and
//       no table earlier in this cycle's order took that channel; a loser
//       waits a cycle. A key whose table entry names no PMU goes to the
//       direct queue (in table order).
// A request made in cycle c reaches its PMU's Q_r port in cycle c+LAT-1
// (LAT-1 channel registers; the PMU takes it for c+LAT, when the model's
// request is usable: LAT is the VMU's plus the network's latency).
//
// Q_r credit: the model counts a request in Q_r from the cycle it is sent;
// the PMU's req_ready counts it from its arrival, LAT-1 cycles later. The
// cluster sends on req_ready, which is the model's condition while Q_r
// holds fewer than QR - (LAT-1) requests (the PMU's ports carry no issue
// pulse to count credits exactly); a request refused at the PMU's port
// raises the sticky `overflow` (never in the co-simulated runs).
`default_nettype none
module synapse_cluster #(
    parameter NP = 4,            // PMUs
    parameter NT = 1,            // tables (one VMU each)
    parameter CH = 4,            // channels of the segmented interconnect
    parameter LAT = 3,           // VMU + interconnect latency, cycles (>= 2)
    parameter ENTRIES = 16,      // PMU block size
    parameter KEY_W = 104,
    parameter TAG_W = 16,
    parameter TBL_W = 8,
    parameter ACT_W = 32,
    parameter TAU = 2,
    parameter II = 1,
    parameter QR = 16,
    parameter QP = 16,
    parameter QM = 16,
    parameter FILL_SLOTS = 64,
    parameter BITS = 10,         // VMU lookup-table index bits
    parameter FIFO = 64,         // VMU PHV window, a power of two
    parameter DQ = 16,           // direct queue (keys sent to the ELU by VMUs)
    parameter SW = $clog2(NP + 2) // a bus source: PMU 0..NP-1, direct NP
) (
    input  wire clk,
    input  wire rst,
    // per table: the stage FIFO's head, the next stage, the CPU's table write
    input  wire [NT-1:0] phv_valid,
    input  wire [NT*32-1:0] phv_hash_next,
    input  wire [NT*KEY_W-1:0] phv_key,
    output wire [NT-1:0] phv_ready,
    input  wire [NT-1:0] rel_ready,
    output wire [NT-1:0] rel_valid,
    output wire [NT*TAG_W-1:0] rel_tag,
    output wire [NT-1:0] rel_act_v,
    output wire [NT*ACT_W-1:0] rel_act,
    output wire [NT-1:0] rel_via,
    input  wire [NT-1:0] lut_we,
    input  wire [NT*BITS-1:0] lut_addr,
    input  wire [NT*16-1:0] lut_data,
    // per table: what its request producer sent (observed, not a boundary)
    output wire [NT-1:0] req_valid,
    output wire [NT*16-1:0] req_pmu,
    output wire [NT*TAG_W-1:0] req_tag,
    output wire [NT-1:0] direct_valid,
    output wire [NT*TAG_W-1:0] direct_tag,
    // per PMU: control plane, and its response (observed)
    input  wire [NP*2-1:0] ctl_op,
    input  wire [NP*TBL_W-1:0] ctl_tbl,
    input  wire [NP-1:0] ctl_next_v,
    output wire [NP-1:0] rsp_valid,
    output wire [NP*2-1:0] rsp_kind,
    output wire [NP*TBL_W-1:0] rsp_tbl,
    output wire [NP*TAG_W-1:0] rsp_tag,
    output wire [NP-1:0] rsp_act_v,
    output wire [NP*ACT_W-1:0] rsp_act,
    // the ELU boundary: misses out, replies in
    input  wire elu_ready,
    output wire mq_valid,
    output wire [SW-1:0] mq_src,
    output wire [TBL_W-1:0] mq_tbl,
    output wire [TAG_W-1:0] mq_tag,
    output wire [KEY_W-1:0] mq_key,
    input  wire fill_valid,
    input  wire [SW-1:0] fill_dst,
    input  wire [TBL_W-1:0] fill_tbl,
    input  wire [TAG_W-1:0] fill_tag,
    input  wire [KEY_W-1:0] fill_key,
    input  wire fill_act_v,
    input  wire [ACT_W-1:0] fill_act,
    output reg  overflow
);
    localparam PORTS = NP + 1;           // VMU response ports: PMUs, then the ELU
    localparam CW = CH > 1 ? $clog2(CH) : 1;
    localparam TW = NT > 1 ? $clog2(NT) : 1;
    localparam DW = $clog2(DQ);
    localparam LS = LAT - 1;             // channel register stages
    localparam CMPW = $clog2(ENTRIES + 1);
    localparam PW = NP > 1 ? $clog2(NP) : 1;  // a PMU's index bits (a request's PMU is < NP)
    integer i, j, k;
    genvar g, h;

    // The channel of PMU p (constant per p), from p's index bits only: a
    // VMU requests only a PMU < NP (an entry naming none is its "no PMU" bit).
    function [CW-1:0] chan;
        input [PW-1:0] p;
        integer q;
        begin
            chan = 0;
            for (q = 0; q < NP; q = q + 1)
                if (p == q) chan = (q * CH) / NP;
        end
    endfunction

    // ------------------------------------------------------------ PMUs
    wire [NP-1:0] p_req_valid, p_req_ready, p_fill, p_rsp_av, p_mq_valid, p_mq_ready, p_ovf;
    wire [NP*TBL_W-1:0] p_req_tbl, p_mq_tbl;
    wire [NP*TAG_W-1:0] p_req_tag, p_mq_tag;
    wire [NP*KEY_W-1:0] p_req_key, p_mq_key;
    wire [NP*CMPW-1:0] p_rsp_cmp;
    wire [NP*2-1:0] p_state;
    wire [NP*TBL_W-1:0] p_state_tbl;
    generate for (g = 0; g < NP; g = g + 1) begin : pmu
        // the ELU's reply is this PMU's: one LUT from the ports (a module of
        // its own, so that synthesis does not share a deeper decoder)
        synapse_cluster_dec #(.W(SW), .G(g)) dec (.v(fill_valid), .a(fill_dst), .y(p_fill[g]));
        synapse_pmu #(.N(ENTRIES), .KEY_W(KEY_W), .TAG_W(TAG_W), .TBL_W(TBL_W), .ACT_W(ACT_W),
                      .TAU(TAU), .II(II), .QR(QR), .QP(QP), .QM(QM), .FILL_SLOTS(FILL_SLOTS)) u (
            .clk(clk), .rst(rst),
            .ctl_op(ctl_op[2*g +: 2]), .ctl_tbl(ctl_tbl[TBL_W*g +: TBL_W]), .ctl_next_v(ctl_next_v[g]),
            .req_valid(p_req_valid[g]), .req_ready(p_req_ready[g]),
            .req_tbl(p_req_tbl[TBL_W*g +: TBL_W]), .req_tag(p_req_tag[TAG_W*g +: TAG_W]),
            .req_key(p_req_key[KEY_W*g +: KEY_W]),
            .fill_valid(p_fill[g]), .fill_tbl(fill_tbl), .fill_tag(fill_tag), .fill_key(fill_key),
            .fill_act_v(fill_act_v), .fill_act(fill_act),
            .rsp_valid(rsp_valid[g]), .rsp_ready(1'b1), .rsp_kind(rsp_kind[2*g +: 2]),
            .rsp_tbl(rsp_tbl[TBL_W*g +: TBL_W]), .rsp_tag(rsp_tag[TAG_W*g +: TAG_W]),
            .rsp_act_v(rsp_act_v[g]), .rsp_act(rsp_act[ACT_W*g +: ACT_W]),
            .rsp_cmp(p_rsp_cmp[CMPW*g +: CMPW]),
            .mq_valid(p_mq_valid[g]), .mq_ready(p_mq_ready[g]), .mq_tbl(p_mq_tbl[TBL_W*g +: TBL_W]),
            .mq_tag(p_mq_tag[TAG_W*g +: TAG_W]), .mq_key(p_mq_key[KEY_W*g +: KEY_W]),
            .state(p_state[2*g +: 2]), .state_tbl(p_state_tbl[TBL_W*g +: TBL_W]), .overflow(p_ovf[g])
        );
    end endgenerate

    // ------------------------------------------------------------ VMUs
    wire [NT-1:0] v_want, v_grant;
    generate for (g = 0; g < NT; g = g + 1) begin : vmu
        // Response port p < NP: PMU p's Q_p head if it is this table's;
        // port NP: the ELU's reply to a key this table sent directly.
        wire [PORTS-1:0] rv, rm, rav;
        wire [PORTS*TAG_W-1:0] rt;
        wire [PORTS*ACT_W-1:0] ra;
        reg [PORTS-1:0] rv_r, rm_r, rav_r;
        reg [PORTS*TAG_W-1:0] rt_r;
        reg [PORTS*ACT_W-1:0] ra_r;
        assign rv = rv_r; assign rm = rm_r; assign rav = rav_r; assign rt = rt_r; assign ra = ra_r;
        for (h = 0; h < NP; h = h + 1) begin : port
            always @(posedge clk) begin
                rv_r[h] <= !rst && rsp_valid[h] && rsp_tbl[TBL_W*h +: TBL_W] == g;
                rm_r[h] <= rsp_kind[2*h +: 2] == 2'd2;
                rav_r[h] <= rsp_act_v[h];
                rt_r[TAG_W*h +: TAG_W] <= rsp_tag[TAG_W*h +: TAG_W];
                ra_r[ACT_W*h +: ACT_W] <= rsp_act[ACT_W*h +: ACT_W];
            end
        end
        always @(posedge clk) begin
            rv_r[NP] <= !rst && fill_valid && fill_dst == NP && fill_tbl == g;
            rm_r[NP] <= 1'b0;
            rav_r[NP] <= fill_act_v;
            rt_r[TAG_W*NP +: TAG_W] <= fill_tag;
            ra_r[ACT_W*NP +: ACT_W] <= fill_act;
        end
        synapse_vmu #(.BITS(BITS), .FIFO(FIFO), .PMU_W(16), .TAG_W(TAG_W), .ACT_W(ACT_W), .PORTS(PORTS)) u (
            .clk(clk), .rst(rst),
            .phv_valid(phv_valid[g]), .phv_hash_next(phv_hash_next[32*g +: 32]), .phv_ready(phv_ready[g]),
            .req_ready(v_grant[g]), .req_want(v_want[g]), .req_valid(req_valid[g]),
            .req_pmu(req_pmu[16*g +: 16]), .req_tag(req_tag[TAG_W*g +: TAG_W]),
            .direct_valid(direct_valid[g]), .direct_tag(direct_tag[TAG_W*g +: TAG_W]),
            .rsp_valid(rv), .rsp_miss(rm), .rsp_tag(rt), .rsp_act_v(rav), .rsp_act(ra),
            .rel_ready(rel_ready[g]), .rel_valid(rel_valid[g]), .rel_tag(rel_tag[TAG_W*g +: TAG_W]),
            .rel_act_v(rel_act_v[g]), .rel_act(rel_act[ACT_W*g +: ACT_W]), .rel_via(rel_via[g]),
            .lut_we(lut_we[g]), .lut_addr(lut_addr[BITS*g +: BITS]), .lut_data(lut_data[16*g +: 16])
        );
    end endgenerate

    // ------------------------------------------- phase 7: channel arbitration
    // The tables' order this cycle starts at cycle mod NT.
    reg [TW-1:0] first;
    always @(posedge clk)
        if (rst) first <= 0;
        else first <= (first == NT - 1) ? 0 : first + 1'b1;
    // A table that would send (its PMU's Q_r has room) and its channel.
    reg [NT-1:0] ok;
    reg [NP-1:0] rdy_r;
    always @(posedge clk) rdy_r <= p_req_ready;
    reg [CW-1:0] ch_of [0:NT-1];
    reg [TW:0] pos_a, pos_b;
    reg [NT-1:0] grant, rdy_of;
    // earlier[j][i]: table j comes before table i in this cycle's order (a
    // function of the register `first` only, off the route's path).
    reg [NT*NT-1:0] earlier;
    always @* begin
        for (i = 0; i < NT; i = i + 1) begin
            pos_a = (i >= first) ? i - first : i + NT - first;
            for (j = 0; j < NT; j = j + 1) begin
                pos_b = (j >= first) ? j - first : j + NT - first;
                earlier[j*NT + i] = j != i && pos_b < pos_a;
            end
        end
    end
    // Two LUT levels after the route: its PMU's ready and the channels'
    // equality, then the grant (a table that wants and whose PMU is ready,
    // unless an earlier one does on the same channel).
    always @* begin
        for (i = 0; i < NT; i = i + 1) begin
            rdy_of[i] = rdy_r[req_pmu[16*i +: PW]];
            ch_of[i] = chan(req_pmu[16*i +: PW]);
            ok[i] = v_want[i] && rdy_of[i];
        end
        for (i = 0; i < NT; i = i + 1) begin
            grant[i] = ok[i];
            for (j = 0; j < NT; j = j + 1)
                if (earlier[j*NT + i] && ok[j] && ch_of[j] == ch_of[i]) grant[i] = 1'b0;
        end
    end
    assign v_grant = grant;

    // Each channel carries the request of the table that won it through
    // LAT-1 registers to the PMUs of its segment.
    // Stage s (1..LS) of channel k is element k*LS + s-1.
    reg c_v [0:CH*LS-1];
    reg [15:0] c_pmu [0:CH*LS-1];
    reg [TBL_W-1:0] c_tbl [0:CH*LS-1];
    reg [TAG_W-1:0] c_tag [0:CH*LS-1];
    reg [KEY_W-1:0] c_key [0:CH*LS-1];
    always @(posedge clk) begin
        for (k = 0; k < CH; k = k + 1) begin
            c_v[k*LS] <= 1'b0;
            for (i = 0; i < NT; i = i + 1)
                // the grant itself (= req_valid), not the VMU's copy of it:
                // no round trip through the VMU before these registers
                if (grant[i] && ch_of[i] == k) begin
                    c_v[k*LS] <= !rst;
                    c_pmu[k*LS] <= req_pmu[16*i +: 16];
                    c_tbl[k*LS] <= i;
                    c_tag[k*LS] <= req_tag[TAG_W*i +: TAG_W];
                    c_key[k*LS] <= phv_key[KEY_W*i +: KEY_W];
                end
            for (j = 1; j < LS; j = j + 1) begin
                c_v[k*LS+j] <= c_v[k*LS+j-1] && !rst;
                c_pmu[k*LS+j] <= c_pmu[k*LS+j-1];
                c_tbl[k*LS+j] <= c_tbl[k*LS+j-1];
                c_tag[k*LS+j] <= c_tag[k*LS+j-1];
                c_key[k*LS+j] <= c_key[k*LS+j-1];
            end
        end
    end
    generate for (g = 0; g < NP; g = g + 1) begin : seg
        localparam integer E = ((g * CH) / NP) * LS + LS - 1;   // the channel's last stage
        assign p_req_valid[g] = c_v[E] && c_pmu[E][PW-1:0] == g;
        assign p_req_tbl[TBL_W*g +: TBL_W] = c_tbl[E];
        assign p_req_tag[TAG_W*g +: TAG_W] = c_tag[E];
        assign p_req_key[KEY_W*g +: KEY_W] = c_key[E];
    end endgenerate

    // ------------------------------------------------ the direct queue
    reg [TBL_W-1:0] d_tbl [0:DQ-1];
    reg [TAG_W-1:0] d_tag [0:DQ-1];
    reg [KEY_W-1:0] d_key [0:DQ-1];
    reg [DW-1:0] d_rd, d_wr;
    reg [DW:0] d_cnt;
    wire d_pop;
    reg [NT-1:0] sv;
    reg [TBL_W-1:0] stbl [0:NT-1];
    reg [TAG_W-1:0] stag [0:NT-1];
    reg [KEY_W-1:0] skey [0:NT-1];
    reg [TW:0] t;
    reg [DW:0] d_push, d_n;
    // The pop (the bus's pick, late) chooses between next values computed
    // without it (synapse_cluster_sel: the choice is the last LUT).
    wire [DW-1:0] d_rd_n;
    wire [DW:0] d_cnt_n;
    synapse_cluster_sel #(.W(2 * DW + 1)) d_next (.s(d_pop), .a({d_rd, d_cnt + d_push}),
                                                 .b({d_rd + 1'b1, d_cnt + d_push - 1'b1}), .y({d_rd_n, d_cnt_n}));
    always @* begin
        d_push = 0;
        for (j = 0; j < NT; j = j + 1) d_push = d_push + sv[j];
    end
    always @(posedge clk) begin
        for (j = 0; j < NT; j = j + 1) begin
            t = (first + j >= NT) ? first + j - NT : first + j;
            sv[j] <= !rst && direct_valid[t];
            stbl[j] <= t;
            stag[j] <= direct_tag[TAG_W*t +: TAG_W];
            skey[j] <= phv_key[KEY_W*t +: KEY_W];
        end
        if (rst) begin
            d_rd <= 0; d_wr <= 0; d_cnt <= 0;
        end else begin
            d_n = 0;
            for (j = 0; j < NT; j = j + 1)
                if (sv[j]) begin
                    d_tbl[d_wr + d_n[DW-1:0]] <= stbl[j];
                    d_tag[d_wr + d_n[DW-1:0]] <= stag[j];
                    d_key[d_wr + d_n[DW-1:0]] <= skey[j];
                    d_n = d_n + 1'b1;
                end
            d_wr <= d_wr + d_push[DW-1:0];
            d_rd <= d_rd_n;
            d_cnt <= d_cnt_n;
        end
    end
    // the head: the queue's, else the stage's first
    reg [TBL_W-1:0] h_tbl; reg [TAG_W-1:0] h_tag; reg [KEY_W-1:0] h_key; reg h_f;
    always @* begin
        h_tbl = d_tbl[d_rd]; h_tag = d_tag[d_rd]; h_key = d_key[d_rd]; h_f = d_cnt != 0;
        for (j = NT - 1; j >= 0; j = j - 1)
            if (!h_f && sv[j]) begin h_tbl = stbl[j]; h_tag = stag[j]; h_key = skey[j]; end
    end

    // ------------------------------------------------- phase 5: the bus
    wire [NP:0] src_v = {d_cnt != 0 || sv != 0, p_mq_valid};
    reg [NP:0] mask;        // sources at or after the round robin's start
    reg [NP:0] pk, pk_en;   // picked; picked and the ELU takes it
    reg found;
    reg [SW-1:0] pick;
    integer q;
    // prio[q*(NP+1)+i]: source q comes before source i in the round robin
    // (from the register `mask` only). A source is picked if it is valid
    // and no source before it is (synapse_cluster_pick: two LUT levels
    // after the PMUs' Q_m valids, whatever the start).
    reg [(NP+1)*(NP+1)-1:0] prio;
    always @*
        for (q = 0; q <= NP; q = q + 1)
            for (i = 0; i <= NP; i = i + 1)
                prio[q*(NP+1) + i] = q != i && (mask[q] != mask[i] ? mask[q] : q < i);
    generate for (g = 0; g <= NP; g = g + 1) begin : bus
        wire [NP:0] ahead;
        for (h = 0; h <= NP; h = h + 1) begin : b
            assign ahead[h] = prio[h*(NP+1) + g];
        end
        wire y, y_en;
        synapse_cluster_pick #(.N(NP + 1)) u (.self(src_v[g]), .en(elu_ready), .v(src_v), .ahead(ahead),
                                              .y(y), .y_en(y_en));
        always @* begin pk[g] = y; pk_en[g] = y_en; end
    end endgenerate
    always @* begin
        found = src_v != 0;
        pick = 0;
        for (i = 0; i <= NP; i = i + 1) if (pk[i]) pick = i;
    end
    assign mq_valid = found && elu_ready;
    assign mq_src = pick;
    assign p_mq_ready = pk_en[NP-1:0];
    assign d_pop = pk_en[NP];
    reg [TBL_W-1:0] m_tbl; reg [TAG_W-1:0] m_tag; reg [KEY_W-1:0] m_key;
    always @* begin
        m_tbl = pk[NP] ? h_tbl : 0; m_tag = pk[NP] ? h_tag : 0; m_key = pk[NP] ? h_key : 0;
        for (i = 0; i < NP; i = i + 1) if (pk[i]) begin
            m_tbl = m_tbl | p_mq_tbl[TBL_W*i +: TBL_W]; m_tag = m_tag | p_mq_tag[TAG_W*i +: TAG_W];
            m_key = m_key | p_mq_key[KEY_W*i +: KEY_W];
        end
    end
    assign mq_tbl = m_tbl; assign mq_tag = m_tag; assign mq_key = m_key;
    // next start: the source after the one served (the direct queue -> PMU 0)
    always @(posedge clk)
        if (rst) mask <= {(NP+1){1'b1}};
        else if (mq_valid) begin
            for (i = 0; i <= NP; i = i + 1) begin
                mask[i] <= pk[NP];
                for (q = 0; q < i; q = q + 1) if (pk[q]) mask[i] <= 1'b1;
            end
        end

    // A request refused at its PMU's port raises `overflow` a cycle later
    // (registered: off the path from the PMUs' req_ready).
    reg [NP-1:0] refused;
    always @(posedge clk) refused <= rst ? {NP{1'b0}} : p_req_valid & ~p_req_ready;
    always @(posedge clk)
        if (rst) overflow <= 1'b0;
        else if (|p_ovf || refused != 0 || d_cnt + d_push > DQ) overflow <= 1'b1;
endmodule

// Whether bus source `self` is picked: it is valid and no source before it
// is (ahead[q]: q comes before it; its own bit is 0), and with the ELU's
// room (`en`) for its pop. Each group of three (valid, ahead) pairs is one
// 6-input gate (synapse_cluster_blk, a module of its own so that synthesis
// keeps this two-level form); one LUT takes the groups.
module synapse_cluster_pick #(parameter N = 5) (
    input wire self, en,
    input wire [N-1:0] v, ahead,
    output wire y, y_en
);
    localparam B = (N + 2) / 3;
    wire [3*B-1:0] vv = {{(3*B-N){1'b0}}, v}, bb = {{(3*B-N){1'b0}}, ahead};
    wire [B-1:0] blk;
    genvar i;
    generate for (i = 0; i < B; i = i + 1) begin : g
        synapse_cluster_blk u (.v(vv[3*i +: 3]), .b(bb[3*i +: 3]), .y(blk[i]));
    end endgenerate
    assign y = self && blk == 0;
    assign y_en = en && self && blk == 0;
endmodule

// s ? b : a
module synapse_cluster_sel #(parameter W = 1) (input wire s, input wire [W-1:0] a, b, output wire [W-1:0] y);
    assign y = s ? b : a;
endmodule

// v && a == G
module synapse_cluster_dec #(parameter W = 3, parameter G = 0) (input wire v, input wire [W-1:0] a, output wire y);
    assign y = v && a == G;
endmodule

module synapse_cluster_blk (input wire [2:0] v, b, output wire y);
    assign y = |(v & b);
endmodule
`default_nettype wire
