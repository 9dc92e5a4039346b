// Physical Matching Unit (PMU): a fully associative CAM with O(1) LRU and
// its queues Q_r, Q_p, Q_m. RTL of crates/synapse-core/src/hw/{pmu,cam}.rs,
// cycle for cycle (paper §4.2, §4.5).
//
// One cycle does, in the model's order (sim/mod.rs phases 2..8):
//   ctl  (associate / leave)        -> effective state
//   fill (ELU reply)                -> CAM insert + Fill into Q_p
//   retire the CAM result issued TAU cycles ago -> Q_p (and Q_m on a miss)
//   issue the head of Q_r (II, free state and Q_p/Q_m room permitting):
//         the CAM search and the LRU touch happen now, the result is
//         delayed TAU cycles
//   pop Q_p (rsp_ready) and Q_m (mq_ready), each bypassing an empty queue
//   accept a request into Q_r (usable from the next cycle)
//   a transient PMU with nothing left becomes free (CAM invalidated) or
//   joins its next table.
//
// The LRU is the paper's linked list: next/prev slot pointers in flip-flops,
// head = most recent, tail = the victim. A fill and a lookup may touch the
// list in the same cycle (the model fills first), so two move-to-front
// operations are composed combinationally. Slots are used in order
// 0,1,2,... until the CAM is full (then the tail is reused), so a slot is
// valid iff its index < `used`, and `used` is the number of entries
// compared (the energy proxy).
//
// Q_p holds QP + FILL_SLOTS entries: the model's Q_p admits ELU fills
// beyond Q_p (issue is throttled only by hits and misses); FILL_SLOTS must
// bound the misses that can be outstanding at the ELU. `overflow` is a
// sticky flag that should never rise.
`default_nettype none
module synapse_pmu #(
    parameter N = 64,            // CAM entries (block_size)
    parameter KEY_W = 104,       // key bits
    parameter TAG_W = 16,
    parameter TBL_W = 8,
    parameter ACT_W = 32,
    parameter TAU = 2,           // tau_c, pipeline cycles (>= 1)
    parameter II = 1,            // II_c, pipeline cycles (>= 1)
    parameter QR = 16,
    parameter QP = 16,
    parameter QM = 16,
    parameter FILL_SLOTS = 64,
    parameter OUT_W = 16
) (
    input  wire clk,
    input  wire rst,
    // control plane: 0 none, 1 associate(ctl_tbl), 2 leave(next)
    input  wire [1:0] ctl_op,
    input  wire [TBL_W-1:0] ctl_tbl,
    input  wire ctl_next_v,
    // request from the VMU (registered into Q_r)
    input  wire req_valid,
    output wire req_ready,
    input  wire [TBL_W-1:0] req_tbl,
    input  wire [TAG_W-1:0] req_tag,
    input  wire [KEY_W-1:0] req_key,
    // ELU reply (Q_l^G)
    input  wire fill_valid,
    input  wire [TBL_W-1:0] fill_tbl,
    input  wire [TAG_W-1:0] fill_tag,
    input  wire [KEY_W-1:0] fill_key,
    input  wire fill_act_v,
    input  wire [ACT_W-1:0] fill_act,
    // Q_p head: 1 hit, 2 early miss, 3 fill
    output wire rsp_valid,
    input  wire rsp_ready,
    output wire [1:0] rsp_kind,
    output wire [TBL_W-1:0] rsp_tbl,
    output wire [TAG_W-1:0] rsp_tag,
    output wire rsp_act_v,
    output wire [ACT_W-1:0] rsp_act,
    output wire [$clog2(N+1)-1:0] rsp_cmp,
    // Q_m head, to the PMU -> ELU bus
    output wire mq_valid,
    input  wire mq_ready,
    output wire [TBL_W-1:0] mq_tbl,
    output wire [TAG_W-1:0] mq_tag,
    output wire [KEY_W-1:0] mq_key,
    // state: 0 free, 1 associated, 2 transient
    output wire [1:0] state,
    output wire [TBL_W-1:0] state_tbl,
    output reg  overflow
);
    localparam AW = $clog2(N);
    localparam PW = AW + 1;                 // slot pointer incl. NIL
    localparam [PW-1:0] NIL = {PW{1'b1}};
    localparam CW = $clog2(N+1);
    localparam QPD = QP + FILL_SLOTS;
    localparam RW = $clog2(QR + 1);
    localparam PWQ = $clog2(QPD + 1);
    localparam MW = $clog2(QM + 1);
    localparam S_FREE = 2'd0, S_ASSOC = 2'd1, S_TRANS = 2'd2;

    // ---------------------------------------------------------------- state
    reg [1:0] st;
    reg [TBL_W-1:0] st_tbl, st_next;
    reg st_next_v;
    reg [1:0] st_e;
    reg [TBL_W-1:0] st_tbl_e, st_next_e;
    reg st_next_v_e;
    always @* begin
        st_e = st; st_tbl_e = st_tbl; st_next_e = st_next; st_next_v_e = st_next_v;
        if (ctl_op == 2'd1 && st == S_FREE) begin
            st_e = S_ASSOC; st_tbl_e = ctl_tbl;
        end else if (ctl_op == 2'd2) begin
            if (st == S_FREE) begin
                st_e = ctl_next_v ? S_ASSOC : S_FREE; st_tbl_e = ctl_tbl;
            end else begin
                st_e = S_TRANS; st_next_e = ctl_tbl; st_next_v_e = ctl_next_v;
            end
        end
    end
    assign state = st;
    assign state_tbl = st_tbl;

    // ---------------------------------------------------------------- CAM
    // Each slot (synapse_pmu_entry) holds its key, action and LRU links and
    // does its own compares (key search, slot-pointer decode); what crosses
    // the slots is an OR over them of what the selected slot drives (its
    // index, action, links): a CAM row array on OR buses.
    reg [PW-1:0] hd, tl;
    reg [CW-1:0] used;

    // Q_r
    reg [TBL_W-1:0] qr_tbl [0:QR-1];
    reg [TAG_W-1:0] qr_tag [0:QR-1];
    reg [KEY_W-1:0] qr_key [0:QR-1];
    reg [RW-1:0] qr_cnt;
    reg [$clog2(QR)-1+1:0] qr_rd, qr_wr;
    wire [KEY_W-1:0] lk = qr_key[qr_rd];

    // Per slot: fill key / lookup key (as the fill leaves the CAM) found
    // there; and the OR buses.
    wire [N-1:0] fm, lm1;
    wire [N*PW-1:0] b_fidx, b_lidx, b_p1, b_n1, b_p2, b_n2;
    wire [N*ACT_W-1:0] b_act;
    wire [N-1:0] b_av;
    function [PW-1:0] orp;
        input [N*PW-1:0] v;
        integer k;
        begin
            orp = 0;
            for (k = 0; k < N; k = k + 1) orp = orp | v[k*PW +: PW];
        end
    endfunction
    genvar g;

    // ---------------------------------------------------------- pipeline
    reg p_v [1:TAU];
    reg p_hit [1:TAU];
    reg [TBL_W-1:0] p_tbl [1:TAU];
    reg [TAG_W-1:0] p_tag [1:TAU];
    reg [KEY_W-1:0] p_key [1:TAU];
    reg p_av [1:TAU];
    reg [ACT_W-1:0] p_act [1:TAU];
    reg [CW-1:0] p_cmp [1:TAU];
    reg [$clog2(TAU+1)-1:0] inflight;       // stages 1..TAU-1
    integer s;
    always @* begin
        inflight = 0;
        for (s = 1; s < TAU; s = s + 1) inflight = inflight + p_v[s];
    end
    wire ret_v = p_v[TAU];
    wire ret_miss = ret_v && !p_hit[TAU];

    // Q_p and Q_m
    reg [1:0] qp_kind [0:QPD-1];
    reg [TBL_W-1:0] qp_tbl [0:QPD-1];
    reg [TAG_W-1:0] qp_tag [0:QPD-1];
    reg qp_av [0:QPD-1];
    reg [ACT_W-1:0] qp_act [0:QPD-1];
    reg [CW-1:0] qp_cmp [0:QPD-1];
    reg [PWQ-1:0] qp_cnt;
    reg [PWQ-1:0] qp_rd, qp_wr;
    reg [TBL_W-1:0] qm_tbl [0:QM-1];
    reg [TAG_W-1:0] qm_tag [0:QM-1];
    reg [KEY_W-1:0] qm_key [0:QM-1];
    reg [MW-1:0] qm_cnt;
    reg [MW-1:0] qm_rd, qm_wr;
    reg [OUT_W-1:0] outstanding;
    reg [$clog2(II+1)-1:0] ii_wait;

    // ------------------------------------------------------------ fill
    wire fill_do = fill_valid && st_e == S_ASSOC && st_tbl_e == fill_tbl;
    wire fhit = |fm;
    wire [PW-1:0] fidx_p = orp(b_fidx);
    wire [AW-1:0] fidx = fidx_p[AW-1:0];
    wire f_new = fill_do && !fhit && used < N;
    wire [PW-1:0] used_p = used;
    wire [PW-1:0] fj = fhit ? {1'b0, fidx} : (used < N ? used_p : tl);
    wire f_wkey = fill_do && !fhit;          // the slot takes a new key
    wire [CW-1:0] used1 = used + f_new;

    // ------------------------------------------------------------ issue
    wire [PWQ:0] qp_after = qp_cnt + fill_valid + ret_v;
    wire [MW:0] qm_after = qm_cnt + ret_miss;
    wire issue = qr_cnt != 0 && ii_wait == 0 && st_e != S_FREE
                 && (inflight + qp_after < QP) && (inflight + qm_after < QM);
    // Lookup against the CAM as the fill left it (lm1, in the slots; the
    // slot taking the fill key compares it with the lookup key).
    wire fk_eq_lk = fill_key == lk;
    wire lhit = |lm1;
    wire [PW-1:0] lidx_p = orp(b_lidx);
    wire [AW-1:0] lidx = lidx_p[AW-1:0];
    wire l_fill_slot = fill_do && fj == {1'b0, lidx};
    // lm1 is one-hot on a hit (keys are unique): the hit slot drives its
    // action on the bus (a miss's action is never used).
    reg [ACT_W-1:0] l_act_m;
    integer r;
    always @* begin
        l_act_m = 0;
        for (r = 0; r < N; r = r + 1) l_act_m = l_act_m | b_act[r*ACT_W +: ACT_W];
    end
    wire l_av = l_fill_slot ? fill_act_v : |b_av;
    wire [ACT_W-1:0] l_act = l_fill_slot ? fill_act : l_act_m;

    // --------------------------------------------- LRU list: two updates
    // Move-to-front of the filled slot (op 1), then of the slot the lookup
    // hit (op 2), as sequential code would do them. Written as write ports
    // (index, value, enable) so each entry's next value is a small priority
    // mux: op 2 reads the list as op 1 left it by forwarding op 1's writes.
    // Each slot decodes the pointers itself: reading a link is the OR bus
    // of the slot addressed, writing one that slot's row enable.
    wire [PW-1:0] x1 = fj;
    wire [PW-1:0] p1 = orp(b_p1);
    wire [PW-1:0] n1 = orp(b_n1);
    wire i1 = f_new;                                   // insert a new slot
    wire m1 = fill_do && !f_new && x1 != hd;           // move an old one
    wire w1_1 = m1;                                    // nx[p1] = n1
    wire w2_1 = m1 && n1 != NIL;                       // pv[n1] = p1
    wire w34_1 = m1 || i1;                             // pv[x1] = NIL, nx[x1] = hd
    wire w5_1 = w34_1 && hd != NIL;                    // pv[hd] = x1
    wire [PW-1:0] hd1 = w34_1 ? x1 : hd;
    wire [PW-1:0] tl1 = (m1 && n1 == NIL) ? p1 : (i1 && hd == NIL) ? x1 : tl;

    wire [PW-1:0] x2 = {1'b0, lidx};
    wire [PW-1:0] p2 = (w5_1 && x2 == hd) ? x1 : (w34_1 && x2 == x1) ? NIL
                     : (w2_1 && x2 == n1) ? p1 : orp(b_p2);
    wire [PW-1:0] n2 = (w34_1 && x2 == x1) ? hd : (w1_1 && x2 == p1) ? n1 : orp(b_n2);
    wire m2 = issue && lhit && x2 != hd1;
    wire w2_2 = m2 && n2 != NIL;
    wire [PW-1:0] hd_n = m2 ? x2 : hd1;
    wire [PW-1:0] tl_n = (m2 && n2 == NIL) ? p2 : tl1;

    generate for (g = 0; g < N; g = g + 1) begin : slot
        localparam [PW-1:0] GI = g;
        synapse_pmu_entry #(.KEY_W(KEY_W), .ACT_W(ACT_W), .PW(PW), .CW(CW)) e (
            .clk(clk), .idx(GI), .used(used),
            .fill_key(fill_key), .lk(lk), .fk_eq_lk(fk_eq_lk),
            .fill_do(fill_do), .wkey(f_wkey), .fj(fj), .fill_act(fill_act), .fill_act_v(fill_act_v),
            .fm(fm[g]), .lm(lm1[g]),
            .o_fidx(b_fidx[g*PW +: PW]), .o_lidx(b_lidx[g*PW +: PW]),
            .o_act(b_act[g*ACT_W +: ACT_W]), .o_av(b_av[g]),
            .x2(x2), .o_p1(b_p1[g*PW +: PW]), .o_n1(b_n1[g*PW +: PW]),
            .o_p2(b_p2[g*PW +: PW]), .o_n2(b_n2[g*PW +: PW]),
            .m2(m2), .w34_1(w34_1), .w1_1(w1_1), .w2_2(w2_2), .w5_1(w5_1), .w2_1(w2_1),
            .hd1(hd1), .n2(n2), .hd(hd), .n1(n1), .p2(p2), .p1(p1));
    end endgenerate

    // -------------------------------------------- queue outputs (bypass)
    wire [1:0] ret_kind = p_hit[TAU] ? 2'd1 : 2'd2;
    assign rsp_valid = qp_after != 0;
    wire rsp_from_q = qp_cnt != 0;
    assign rsp_kind = rsp_from_q ? qp_kind[qp_rd] : (fill_valid ? 2'd3 : ret_kind);
    assign rsp_tbl  = rsp_from_q ? qp_tbl[qp_rd]  : (fill_valid ? fill_tbl : p_tbl[TAU]);
    assign rsp_tag  = rsp_from_q ? qp_tag[qp_rd]  : (fill_valid ? fill_tag : p_tag[TAU]);
    assign rsp_act_v = rsp_from_q ? qp_av[qp_rd]  : (fill_valid ? fill_act_v : p_av[TAU]);
    assign rsp_act  = rsp_from_q ? qp_act[qp_rd]  : (fill_valid ? fill_act : p_act[TAU]);
    assign rsp_cmp  = rsp_from_q ? qp_cmp[qp_rd]  : (fill_valid ? {CW{1'b0}} : p_cmp[TAU]);
    wire qp_pop = rsp_valid && rsp_ready;

    assign mq_valid = qm_after != 0;
    wire mq_from_q = qm_cnt != 0;
    assign mq_tbl = mq_from_q ? qm_tbl[qm_rd] : p_tbl[TAU];
    assign mq_tag = mq_from_q ? qm_tag[qm_rd] : p_tag[TAU];
    assign mq_key = mq_from_q ? qm_key[qm_rd] : p_key[TAU];
    wire qm_pop = mq_valid && mq_ready;

    wire [RW-1:0] qr_left = qr_cnt - issue;
    assign req_ready = qr_left < QR;
    wire accept = req_valid && req_ready;

    // ------------------------------------------------- end-of-cycle drain
    wire [PWQ:0] qp_end = qp_after - qp_pop;
    wire [MW:0] qm_end = qm_after - qm_pop;
    wire [OUT_W-1:0] out_end = outstanding + ret_miss - fill_valid;
    reg pipe_busy;
    always @* begin
        pipe_busy = issue;
        for (s = 1; s < TAU; s = s + 1) pipe_busy = pipe_busy | p_v[s];
    end
    wire drained = st_e == S_TRANS && (qr_left + accept) == 0 && !pipe_busy
                   && qp_end == 0 && qm_end == 0 && out_end == 0;

    function [PWQ-1:0] qp_inc;
        input [PWQ-1:0] a;
        begin qp_inc = (a == QPD - 1) ? 0 : a + 1; end
    endfunction
    function [MW-1:0] qm_inc;
        input [MW-1:0] a;
        begin qm_inc = (a == QM - 1) ? 0 : a + 1; end
    endfunction
    function [$clog2(QR):0] qr_inc;
        input [$clog2(QR):0] a;
        begin qr_inc = (a == QR - 1) ? 0 : a + 1; end
    endfunction

    reg [PWQ-1:0] w2;
    always @(posedge clk) begin
        if (rst) begin
            st <= S_FREE; st_tbl <= 0; st_next <= 0; st_next_v <= 0;
            used <= 0; hd <= NIL; tl <= NIL;
            qr_cnt <= 0; qr_rd <= 0; qr_wr <= 0;
            qp_cnt <= 0; qp_rd <= 0; qp_wr <= 0;
            qm_cnt <= 0; qm_rd <= 0; qm_wr <= 0;
            outstanding <= 0; ii_wait <= 0; overflow <= 0;
            for (s = 1; s <= TAU; s = s + 1) p_v[s] <= 1'b0;
        end else begin
            // state
            if (drained) begin
                st <= st_next_v_e ? S_ASSOC : S_FREE;
                st_tbl <= st_next_v_e ? st_next_e : st_tbl_e;
                st_next_v <= 1'b0;
                used <= 0; hd <= NIL; tl <= NIL;
            end else begin
                st <= st_e; st_tbl <= st_tbl_e; st_next <= st_next_e; st_next_v <= st_next_v_e;
                used <= used1; hd <= hd_n; tl <= tl_n;
            end
            // CAM pipeline
            p_v[1] <= issue;
            p_hit[1] <= lhit;
            p_tbl[1] <= qr_tbl[qr_rd];
            p_tag[1] <= qr_tag[qr_rd];
            p_key[1] <= lk;
            p_av[1] <= lhit && l_av;   // a miss carries no action
            p_act[1] <= l_act;
            p_cmp[1] <= used1;
            for (s = 2; s <= TAU; s = s + 1) begin
                p_v[s] <= p_v[s-1]; p_hit[s] <= p_hit[s-1];
                p_tbl[s] <= p_tbl[s-1]; p_tag[s] <= p_tag[s-1];
                p_key[s] <= p_key[s-1]; p_av[s] <= p_av[s-1];
                p_act[s] <= p_act[s-1]; p_cmp[s] <= p_cmp[s-1];
            end
            ii_wait <= issue ? II - 1 : (ii_wait != 0 ? ii_wait - 1 : 0);
            // Q_r
            if (accept) begin
                qr_tbl[qr_wr] <= req_tbl; qr_tag[qr_wr] <= req_tag; qr_key[qr_wr] <= req_key;
                qr_wr <= qr_inc(qr_wr);
            end
            if (issue) qr_rd <= qr_inc(qr_rd);
            qr_cnt <= qr_left + accept;
            // Q_p: the fill first, then the retired result
            w2 = qp_wr;
            if (fill_valid) begin
                qp_kind[w2] <= 2'd3; qp_tbl[w2] <= fill_tbl; qp_tag[w2] <= fill_tag;
                qp_av[w2] <= fill_act_v; qp_act[w2] <= fill_act; qp_cmp[w2] <= 0;
                w2 = qp_inc(w2);
            end
            if (ret_v) begin
                qp_kind[w2] <= ret_kind; qp_tbl[w2] <= p_tbl[TAU]; qp_tag[w2] <= p_tag[TAU];
                qp_av[w2] <= p_av[TAU]; qp_act[w2] <= p_act[TAU]; qp_cmp[w2] <= p_cmp[TAU];
                w2 = qp_inc(w2);
            end
            qp_wr <= w2;
            if (qp_pop) qp_rd <= qp_inc(qp_rd);
            qp_cnt <= qp_end;
            if (qp_after > QPD) overflow <= 1'b1;
            // Q_m
            if (ret_miss) begin
                qm_tbl[qm_wr] <= p_tbl[TAU]; qm_tag[qm_wr] <= p_tag[TAU]; qm_key[qm_wr] <= p_key[TAU];
                qm_wr <= qm_inc(qm_wr);
            end
            if (qm_pop) qm_rd <= qm_inc(qm_rd);
            qm_cnt <= qm_end;
            outstanding <= out_end;
        end
    end
endmodule
// One CAM slot: its key and action registers, the two comparators of the
// parallel search, its row of the LRU list (next/prev links) with the
// priority mux of the two move-to-front operations of a cycle, and its
// drivers on the OR buses (what it holds, if it is the slot addressed). A
// module of its own so synthesis maps one slot once and counts it per
// instance; its index is an input (tied off by the PMU).
module synapse_pmu_entry #(
    parameter KEY_W = 104,
    parameter ACT_W = 32,
    parameter PW = 7,
    parameter CW = 7
) (
    input  wire clk,
    input  wire [PW-1:0] idx,             // this slot
    input  wire [CW-1:0] used,            // slots 0..used-1 hold keys
    input  wire [KEY_W-1:0] fill_key,
    input  wire [KEY_W-1:0] lk,
    input  wire fk_eq_lk,                 // fill_key == lk
    input  wire fill_do,                  // a fill writes slot fj ...
    input  wire wkey,                     // ... with a new key
    input  wire [PW-1:0] fj,
    input  wire [ACT_W-1:0] fill_act,
    input  wire fill_act_v,
    output wire fm,                       // the fill key is here
    output wire lm,                       // the lookup key is here (after the fill)
    output wire [PW-1:0] o_fidx,          // idx if fm
    output wire [PW-1:0] o_lidx,          // idx if lm
    output wire [ACT_W-1:0] o_act,        // action if lm
    output wire o_av,
    input  wire [PW-1:0] x2,              // the slot the lookup hit
    output wire [PW-1:0] o_p1, o_n1,      // links if slot fj
    output wire [PW-1:0] o_p2, o_n2,      // links if slot x2
    // link writes, highest priority first:
    //   nx <= hd1 [m2, x2] | n2 [m2, p2] | hd [w34_1, x1] | n1 [w1_1, p1]
    //   pv <= x2 [m2, hd1] | NIL [m2, x2] | p2 [w2_2, n2] | x1 [w5_1, hd]
    //         | NIL [w34_1, x1] | p1 [w2_1, n1]          (x1 = fj)
    input  wire m2, w34_1, w1_1, w2_2, w5_1, w2_1,
    input  wire [PW-1:0] hd1, n2, hd, n1, p2, p1
);
    localparam [PW-1:0] NIL = {PW{1'b1}};
    reg [KEY_W-1:0] key;
    reg [ACT_W-1:0] act;
    reg act_v;
    reg [PW-1:0] nx, pv;
    wire valid = idx < used;
    wire [PW-1:0] x1 = fj;
    wire at_x1 = fj == idx, at_x2 = x2 == idx;
    assign fm = valid && key == fill_key;
    assign lm = (wkey && at_x1) ? fk_eq_lk : valid && key == lk;
    assign o_fidx = fm ? idx : {PW{1'b0}};
    assign o_lidx = lm ? idx : {PW{1'b0}};
    assign o_act = lm ? act : {ACT_W{1'b0}};
    assign o_av = lm & act_v;
    assign o_p1 = at_x1 ? pv : {PW{1'b0}};
    assign o_n1 = at_x1 ? nx : {PW{1'b0}};
    assign o_p2 = at_x2 ? pv : {PW{1'b0}};
    assign o_n2 = at_x2 ? nx : {PW{1'b0}};
    always @(posedge clk) begin
        if (fill_do && at_x1) begin
            act <= fill_act;
            act_v <= fill_act_v;
            if (wkey) key <= fill_key;
        end
        nx <= (m2 && at_x2) ? hd1 : (m2 && p2 == idx) ? n2 : (w34_1 && at_x1) ? hd
            : (w1_1 && p1 == idx) ? n1 : nx;
        pv <= (m2 && hd1 == idx) ? x2 : (m2 && at_x2) ? NIL : (w2_2 && n2 == idx) ? p2
            : (w5_1 && hd == idx) ? x1 : (w34_1 && at_x1) ? NIL : (w2_1 && n1 == idx) ? p1 : pv;
    end
endmodule
`default_nettype wire
