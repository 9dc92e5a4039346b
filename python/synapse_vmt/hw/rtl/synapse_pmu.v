// Physical Matching Unit (PMU): a fully associative CAM with LRU and its
// queues Q_r, Q_p, Q_m. RTL of crates/synapse-core/src/hw/{pmu,cam}.rs,
// cycle for cycle (paper §4.2, §4.5), pipelined over the tau_c cycles the
// model charges so that no register-to-register path needs more than about
// eight LUT levels (docs/how-to/rtl.md).
//
// One cycle does, in the model's order (sim/mod.rs phases 2..8):
//   ctl  (associate / leave)        -> effective state
//   fill (ELU reply)                -> CAM write + Fill into Q_p
//   retire the result issued TAU cycles ago -> Q_p (and Q_m on a miss)
//   issue the head of Q_r (II, free state and Q_p/Q_m room permitting)
//   pop Q_p (rsp_ready) and Q_m (mq_ready), each bypassing an empty queue
//   accept a request into Q_r (usable from the next cycle)
//   a transient PMU with nothing left becomes free (CAM invalidated) or
//   joins its next table.
//
// The pipeline of a lookup issued in cycle t (TAU >= 2):
//   t    every slot compares its key with the request key and with the
//        fill key (3 LUT levels); the fill picks its slot (the slot holding
//        its key, else the next unused one, else the LRU victim) and writes
//        it at the end of the cycle; the per-slot match lines, the fill's
//        write lines and fill key == request key are registered;
//   t+1  hit = fill key == request key, or a registered match line whose
//        slot the fill did not overwrite; the action is read from the slot
//        (the fill's action when the keys are equal) on an OR bus;
//   t+TAU the result leaves (delay line), as in the model.
// What the model computes at t is therefore computed by t+1 from the CAM as
// it stood after cycle t's fill: the result is the model's, not an
// approximation.
//
// LRU: each slot holds an age (0 = most recent; the valid slots' ages are
// 0..used-1, an invalid slot's is N-1). A cycle's touches (the fill's slot
// x1, then the lookup's hit slot x2, as the model orders them) are
// registered and applied in the next cycle: a slot's new age is
// age + [age < age(x1)] + [age < age(x2)], x2 -> 0, x1 -> 1 (0 without a
// lookup touch). The lookup touch is the raw match line (against the CAM
// before the fill): when the fill overwrote that slot or holds the same key,
// the slot is x1, and touching x1 again changes nothing, as in the model.
// The victim of a fill in cycle t is the oldest slot not touched in t-1
// (those touches are not applied yet and make their slots the most recent):
// the slot of age N-1, N-2 or N-3 (at most two are pending), so N >= 4.
// The model's linked list and this age order evict the same keys; slot
// numbers are internal and never compared.
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
    localparam AW = $clog2(N);              // an age, 0..N-1
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
    // Each slot (synapse_pmu_entry) holds its key, action, age and its
    // pipeline bits, does its own compares and drives OR buses with what it
    // holds when it is selected: a CAM row array on OR buses.
    reg [CW-1:0] used;                      // valid slots (compared per lookup)

    // Q_r
    reg [TBL_W-1:0] qr_tbl [0:QR-1];
    reg [TAG_W-1:0] qr_tag [0:QR-1];
    reg [KEY_W-1:0] qr_key [0:QR-1];
    reg [RW-1:0] qr_cnt;
    reg [$clog2(QR)-1+1:0] qr_rd, qr_wr;
    wire [KEY_W-1:0] lk = qr_key[qr_rd];

    wire [N-1:0] fm, valid_v, b_hit, b_q1, b_q2, b_h2;
    wire [N*AW-1:0] b_a1, b_a2;
    wire [N*ACT_W-1:0] b_act;
    wire [N-1:0] b_av;
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
    // stage 1 (besides the per-slot match and write lines in the slots)
    reg s_fk, s_fav, s_fnew;
    reg [ACT_W-1:0] s_fact;
    reg [CW-1:0] s_used;
    integer s;
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
    wire fhit;
    synapse_or #(.N(N), .W(1)) or_fm (.x(fm), .y(fhit));
    wire full = valid_v[N-1];               // slots fill in index order
    wire f_new = fill_do && !fhit && !full;

    // ------------------------------------------------------------ issue
    wire [PWQ:0] qp_after = qp_cnt + fill_valid + ret_v;
    wire [MW:0] qm_after = qm_cnt + ret_miss;
    // Room in Q_p / Q_m for what is in flight (the model's inflight +
    // qp_after < QP): the registered sums inflight + qp_cnt and inflight +
    // qm_cnt are kept as counters, compared with constants, and this
    // cycle's arrivals pick the comparison (no adder before issue).
    reg [PWQ+1:0] qp_base;
    reg [MW+1:0] qm_base;
    wire qp_room = (!fill_valid && !ret_v) ? qp_base < QP
                 : (fill_valid && ret_v) ? (QP >= 2 && qp_base < QP - 2) : (QP >= 1 && qp_base < QP - 1);
    wire qm_room = ret_miss ? (QM >= 1 && qm_base < QM - 1) : qm_base < QM;
    // Counters' flags, from registers.
    wire qr_empty = qr_cnt == 0, qr_one = qr_cnt == 1, qr_full = qr_cnt == QR;
    wire qp_zero = qp_cnt == 0, qp_one = qp_cnt == 1;
    wire qm_zero = qm_cnt == 0, qm_one = qm_cnt == 1;
    wire out_zero = outstanding == 0, out_one = outstanding == 1;
    wire issue = !qr_empty && ii_wait == 0 && st_e != S_FREE && qp_room && qm_room;
    // Fill key == request key: the slot the fill writes matches the lookup.
    wire fk_eq_lk;
    synapse_eq #(.W(KEY_W)) eq_fl (.a(fill_key), .b(lk), .en(fill_do), .y(fk_eq_lk));

    // LRU: the touches of the previous cycle, broadcast by their slots
    // on OR buses (each a module of its own: a balanced tree of LUT6s).
    wire [AW-1:0] a1, a2;
    wire h2x;                               // a lookup touch apart from x1
    wire g1, g2;                            // ages N-1, N-2 are pending
    synapse_or #(.N(N), .W(AW)) or_a1 (.x(b_a1), .y(a1));
    synapse_or #(.N(N), .W(AW)) or_a2 (.x(b_a2), .y(a2));
    synapse_or #(.N(N), .W(1)) or_h2 (.x(b_h2), .y(h2x));
    synapse_or #(.N(N), .W(1)) or_q1 (.x(b_q1), .y(g1));
    synapse_or #(.N(N), .W(1)) or_q2 (.x(b_q2), .y(g2));

    // Stage 2: the result of the lookup issued last cycle.
    wire [ACT_W-1:0] l_act_m;
    wire any_hit, any_av;
    synapse_or #(.N(N), .W(ACT_W)) or_act (.x(b_act), .y(l_act_m));
    synapse_or #(.N(N), .W(1)) or_hit (.x(b_hit), .y(any_hit));
    synapse_or #(.N(N), .W(1)) or_av (.x(b_av), .y(any_av));
    wire l_hit = s_fk | any_hit;
    wire l_av = s_fk ? s_fav : any_av;
    wire [ACT_W-1:0] l_act = s_fk ? s_fact : l_act_m;

    wire clear;                             // drained: the CAM is invalidated
    generate for (g = 0; g < N; g = g + 1) begin : slot
        synapse_pmu_entry #(.N(N), .KEY_W(KEY_W), .ACT_W(ACT_W), .AW(AW)) e (
            .clk(clk), .clear(rst || clear), .prev_valid(g == 0 ? 1'b1 : valid_v[g == 0 ? 0 : g-1]),
            .fill_key(fill_key), .lk(lk), .fill_do(fill_do), .fhit(fhit), .full(full),
            .fill_act(s_fact), .fill_act_v(s_fav), .issue(issue),
            .a1(a1), .a2(a2), .h2x(h2x), .g1(g1), .g2(g2),
            .valid(valid_v[g]), .fm(fm[g]),
            .o_hit(b_hit[g]), .o_act(b_act[g*ACT_W +: ACT_W]), .o_av(b_av[g]),
            .o_a1(b_a1[g*AW +: AW]), .o_a2(b_a2[g*AW +: AW]), .o_h2(b_h2[g]),
            .o_q1(b_q1[g]), .o_q2(b_q2[g]));
    end endgenerate

    // -------------------------------------------- queue outputs (bypass)
    wire [1:0] ret_kind = p_hit[TAU] ? 2'd1 : 2'd2;
    assign rsp_valid = !qp_zero || fill_valid || ret_v;
    wire rsp_from_q = qp_cnt != 0;
    assign rsp_kind = rsp_from_q ? qp_kind[qp_rd] : (fill_valid ? 2'd3 : ret_kind);
    assign rsp_tbl  = rsp_from_q ? qp_tbl[qp_rd]  : (fill_valid ? fill_tbl : p_tbl[TAU]);
    assign rsp_tag  = rsp_from_q ? qp_tag[qp_rd]  : (fill_valid ? fill_tag : p_tag[TAU]);
    assign rsp_act_v = rsp_from_q ? qp_av[qp_rd]  : (fill_valid ? fill_act_v : p_av[TAU]);
    assign rsp_act  = rsp_from_q ? qp_act[qp_rd]  : (fill_valid ? fill_act : p_act[TAU]);
    assign rsp_cmp  = rsp_from_q ? qp_cmp[qp_rd]  : (fill_valid ? {CW{1'b0}} : p_cmp[TAU]);
    wire qp_pop = rsp_valid && rsp_ready;

    assign mq_valid = !qm_zero || ret_miss;
    wire mq_from_q = qm_cnt != 0;
    assign mq_tbl = mq_from_q ? qm_tbl[qm_rd] : p_tbl[TAU];
    assign mq_tag = mq_from_q ? qm_tag[qm_rd] : p_tag[TAU];
    assign mq_key = mq_from_q ? qm_key[qm_rd] : p_key[TAU];
    wire qm_pop = mq_valid && mq_ready;

    assign req_ready = !qr_full || issue;
    wire accept = req_valid && req_ready;

    // ------------------------------------------------- end-of-cycle drain
    // Each counter's next value is picked among precomputed neighbours by
    // this cycle's events, and "ends at zero" from its == 0 / == 1 flags:
    // no adder after issue.
    reg pipe_busy;
    always @* begin
        pipe_busy = issue;
        for (s = 1; s < TAU; s = s + 1) pipe_busy = pipe_busy | p_v[s];
    end
    wire [1:0] qp_in = {1'b0, fill_valid} + ret_v;          // arrivals into Q_p
    wire qp_end0 = qp_in == 0 ? (qp_pop ? qp_one : qp_zero) : qp_in == 1 ? (qp_zero && qp_pop) : 1'b0;
    wire qm_end0 = ret_miss ? (qm_zero && qm_pop) : (qm_pop ? qm_one : qm_zero);
    wire out_end0 = (ret_miss == fill_valid) ? out_zero : fill_valid ? out_one : 1'b0;
    wire qr_end0 = !accept && (qr_empty || (qr_one && issue));
    wire drained = st_e == S_TRANS && qr_end0 && !pipe_busy && qp_end0 && qm_end0 && out_end0;
    assign clear = drained;
    // next counts
    wire [RW-1:0] qr_cnt1 = (issue == accept) ? qr_cnt : issue ? qr_cnt - 1'b1 : qr_cnt + 1'b1;
    reg [PWQ-1:0] qp_cnt1;
    always @*
        case ({qp_in, qp_pop})
            3'b000, 3'b011: qp_cnt1 = qp_cnt;
            3'b001: qp_cnt1 = qp_cnt - 1'b1;
            3'b010, 3'b101: qp_cnt1 = qp_cnt + 1'b1;
            default: qp_cnt1 = qp_cnt + 2'd2;
        endcase
    wire [MW-1:0] qm_cnt1 = (ret_miss == qm_pop) ? qm_cnt : ret_miss ? qm_cnt + 1'b1 : qm_cnt - 1'b1;
    wire [OUT_W-1:0] out1 = (ret_miss == fill_valid) ? outstanding : ret_miss ? outstanding + 1'b1
                          : outstanding - 1'b1;
    // inflight + Q_p: +issue +arrivals -(stage TAU-1 retiring) -pop
    wire leave = p_v[TAU-1];
    reg [PWQ+1:0] qp_base1;
    wire [PWQ+1:0] qpb_m2, qpb_m1, qpb_p1, qpb_p2, qpb_p3;
    synapse_nbrs #(.W(PWQ + 2)) nb_qp (.a(qp_base), .m2(qpb_m2), .m1(qpb_m1), .p1(qpb_p1), .p2(qpb_p2), .p3(qpb_p3));
    always @*
        case ({issue, qp_in, leave, qp_pop})
            5'b0_00_1_1:
                qp_base1 = qpb_m2;
            5'b0_00_0_1, 5'b0_00_1_0, 5'b0_01_1_1, 5'b1_00_1_1:
                qp_base1 = qpb_m1;
            5'b0_00_0_0, 5'b0_01_0_1, 5'b0_01_1_0, 5'b0_10_1_1, 5'b1_00_0_1, 5'b1_00_1_0, 5'b1_01_1_1:
                qp_base1 = qp_base;
            5'b0_01_0_0, 5'b0_10_0_1, 5'b0_10_1_0, 5'b1_00_0_0, 5'b1_01_0_1, 5'b1_01_1_0, 5'b1_10_1_1:
                qp_base1 = qpb_p1;
            5'b0_10_0_0, 5'b1_01_0_0, 5'b1_10_0_1, 5'b1_10_1_0:
                qp_base1 = qpb_p2;
            5'b1_10_0_0:
                qp_base1 = qpb_p3;
            default: qp_base1 = qp_base;
        endcase
    // inflight + Q_m: +issue +miss -leave -pop
    reg [MW+1:0] qm_base1;
    wire [MW+1:0] qmb_m2, qmb_m1, qmb_p1, qmb_p2, qmb_p3;
    synapse_nbrs #(.W(MW + 2)) nb_qm (.a(qm_base), .m2(qmb_m2), .m1(qmb_m1), .p1(qmb_p1), .p2(qmb_p2), .p3(qmb_p3));
    always @*
        case ({issue, ret_miss, leave, qm_pop})
            4'b0_0_1_1:
                qm_base1 = qmb_m2;
            4'b0_0_0_1, 4'b0_0_1_0, 4'b0_1_1_1, 4'b1_0_1_1:
                qm_base1 = qmb_m1;
            4'b0_0_0_0, 4'b0_1_0_1, 4'b0_1_1_0, 4'b1_0_0_1, 4'b1_0_1_0, 4'b1_1_1_1:
                qm_base1 = qm_base;
            4'b0_1_0_0, 4'b1_0_0_0, 4'b1_1_0_1, 4'b1_1_1_0:
                qm_base1 = qmb_p1;
            4'b1_1_0_0:
                qm_base1 = qmb_p2;
            default: qm_base1 = qm_base;
        endcase

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
    wire [PWQ-1:0] qp_wr1 = qp_inc(qp_wr);
    always @(posedge clk) begin
        if (rst) begin
            st <= S_FREE; st_tbl <= 0; st_next <= 0; st_next_v <= 0;
            used <= 0;
            qr_cnt <= 0; qr_rd <= 0; qr_wr <= 0;
            qp_cnt <= 0; qp_rd <= 0; qp_wr <= 0; qp_base <= 0;
            qm_cnt <= 0; qm_rd <= 0; qm_wr <= 0; qm_base <= 0;
            outstanding <= 0; ii_wait <= 0; overflow <= 0;
            for (s = 1; s <= TAU; s = s + 1) p_v[s] <= 1'b0;
        end else begin
            // state
            if (drained) begin
                st <= st_next_v_e ? S_ASSOC : S_FREE;
                st_tbl <= st_next_v_e ? st_next_e : st_tbl_e;
                st_next_v <= 1'b0;
            end else begin
                st <= st_e; st_tbl <= st_tbl_e; st_next <= st_next_e; st_next_v <= st_next_v_e;
            end
            if (drained) used <= 0;
            else if (f_new) used <= used + 1'b1;
            // CAM pipeline
            p_v[1] <= issue;
            p_tbl[1] <= qr_tbl[qr_rd];
            p_tag[1] <= qr_tag[qr_rd];
            p_key[1] <= lk;
            s_fk <= fk_eq_lk; s_fav <= fill_act_v; s_fact <= fill_act;
            s_used <= used; s_fnew <= f_new;
            p_v[2] <= p_v[1]; p_tbl[2] <= p_tbl[1]; p_tag[2] <= p_tag[1]; p_key[2] <= p_key[1];
            p_hit[2] <= l_hit;
            p_av[2] <= l_hit && l_av;  // a miss carries no action
            p_act[2] <= l_act;
            p_cmp[2] <= s_used + s_fnew;
            for (s = 3; s <= TAU; s = s + 1) begin
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
            qr_cnt <= qr_cnt1;
            // Q_p: the fill first, then the retired result
            if (fill_valid) begin
                qp_kind[qp_wr] <= 2'd3; qp_tbl[qp_wr] <= fill_tbl; qp_tag[qp_wr] <= fill_tag;
                qp_av[qp_wr] <= fill_act_v; qp_act[qp_wr] <= fill_act; qp_cmp[qp_wr] <= 0;
            end
            if (ret_v) begin
                w2 = fill_valid ? qp_wr1 : qp_wr;
                qp_kind[w2] <= ret_kind; qp_tbl[w2] <= p_tbl[TAU]; qp_tag[w2] <= p_tag[TAU];
                qp_av[w2] <= p_av[TAU]; qp_act[w2] <= p_act[TAU]; qp_cmp[w2] <= p_cmp[TAU];
            end
            qp_wr <= (fill_valid && ret_v) ? qp_inc(qp_wr1) : (fill_valid || ret_v) ? qp_wr1 : qp_wr;
            if (qp_pop) qp_rd <= qp_inc(qp_rd);
            qp_cnt <= qp_cnt1;
            qp_base <= qp_base1;
            qm_base <= qm_base1;
            if (qp_after > QPD) overflow <= 1'b1;
            // Q_m
            if (ret_miss) begin
                qm_tbl[qm_wr] <= p_tbl[TAU]; qm_tag[qm_wr] <= p_tag[TAU]; qm_key[qm_wr] <= p_key[TAU];
                qm_wr <= qm_inc(qm_wr);
            end
            if (qm_pop) qm_rd <= qm_inc(qm_rd);
            qm_cnt <= qm_cnt1;
            outstanding <= out1;
        end
    end
endmodule
// One CAM slot: its key, action and age, its two comparators (request key,
// fill key), its share of the fill's slot choice, its age update, and its
// drivers on the OR buses. A module of its own so synthesis maps one slot
// once and counts it per instance. Synthesis maps each module on its own,
// so what sits on a long path (the bus drivers, the fill's slot choice, the
// age update after the buses) is in small modules whose every output is as
// shallow as their deepest one: a late input is then one or two LUTs from
// its register, not as deep as the slot's comparators.
module synapse_pmu_entry #(
    parameter N = 64,
    parameter KEY_W = 104,
    parameter ACT_W = 32,
    parameter AW = 6
) (
    input  wire clk,
    input  wire clear,                    // invalidate (a PMU changing tables)
    input  wire prev_valid,               // the slot before this one is valid
    input  wire [KEY_W-1:0] fill_key,
    input  wire [KEY_W-1:0] lk,
    input  wire fill_do,
    input  wire fhit,                     // some slot holds the fill key
    input  wire full,
    input  wire [ACT_W-1:0] fill_act,     // last cycle's fill (registered)
    input  wire fill_act_v,
    input  wire issue,
    input  wire [AW-1:0] a1, a2,          // ages of last cycle's touches
    input  wire h2x,                      // a lookup touch apart from x1
    input  wire g1, g2,                   // the slots of age N-1, N-2 are pending
    output reg  valid,
    output wire fm,                       // holds the fill key
    output wire o_hit,                    // stage 2: hit here
    output wire [ACT_W-1:0] o_act,
    output wire o_av,
    output wire [AW-1:0] o_a1, o_a2,      // own age if touched last cycle
    output wire o_h2,
    output wire o_q1, o_q2                // age N-1 / N-2 and pending
);
    reg [KEY_W-1:0] key;
    reg [ACT_W-1:0] act;
    reg act_v;
    reg [AW-1:0] age;
    reg px1;                              // touched last cycle by the fill (x1)
    reg px2;                              // touched last cycle by the lookup
    reg s_m, s_w;                         // stage 1: request matched, fill wrote a key
    wire lm;
    synapse_eq #(.W(KEY_W)) eq_f (.a(key), .b(fill_key), .en(valid), .y(fm));
    synapse_eq #(.W(KEY_W)) eq_l (.a(key), .b(lk), .en(valid), .y(lm));

    // The fill's slot: the one holding its key, else the next unused one,
    // else the victim (the oldest slot not touched last cycle: of age N-1,
    // N-2 or N-3, the older ones pending). The candidates come from
    // registers; g1, g2 and fhit arrive late and pass one or two LUTs.
    wire pend = px1 | px2;
    localparam [AW-1:0] O1 = N - 1, O2 = N - 2, O3 = N - 3;
    wire v1 = full && !pend && age == O1, v2 = full && !pend && age == O2, v3 = full && !pend && age == O3;
    wire nxt = !full && prev_valid && !valid;
    wire sel, wkey, x1;
    synapse_pmu_sel u_sel (.v1(v1), .v2(v2), .v3(v3), .nxt(nxt), .g1(g1), .g2(g2), .sel(sel));
    synapse_pmu_wr u_wr (.fill_do(fill_do), .fhit(fhit), .fm(fm), .sel(sel), .wkey(wkey), .x1(x1));
    synapse_pmu_q #(.N(N), .AW(AW)) u_q (.px1(px1), .px2(px2), .age(age), .o_q1(o_q1), .o_q2(o_q2));

    // Bus drivers: the touches' ages (x1 == x2 is one touch: the slot
    // does not drive a2, and no age is below a2 = 0) and, in stage 2, a
    // match the fill did not overwrite.
    synapse_pmu_drv #(.AW(AW), .ACT_W(ACT_W)) u_drv (
        .px1(px1), .px2(px2), .age(age), .s_m(s_m), .s_w(s_w), .act(act), .act_v(act_v),
        .o_a1(o_a1), .o_a2(o_a2), .o_h2(o_h2), .o_hit(o_hit), .o_act(o_act), .o_av(o_av));

    // Age update (last cycle's touches): a slot not touched ages by one for
    // each touched slot that was older than it: age + [age < a1] + [age < a2];
    // x2 -> 0, x1 -> 1 if there was another lookup touch (h2x) else 0, an
    // invalid slot N-1. The three candidates are ready from registers; the
    // comparisons with the buses pick one (synapse_pmu_age).
    wire normal = valid && !pend;
    wire is_x1 = valid && px1 && !px2;
    wire [AW-1:0] cst = valid ? {AW{1'b0}} : O1;
    wire [AW-1:0] z0 = normal ? age : cst;
    wire [AW-1:0] z1 = normal ? age + 1'b1 : cst;
    wire [AW-1:0] z2 = normal ? age + 2'd2 : cst;
    wire [AW-1:0] age_n;
    synapse_pmu_age #(.AW(AW)) u_age (.age(age), .a1(a1), .a2(a2), .h2x(h2x), .normal(normal), .is_x1(is_x1),
                                      .z0(z0), .z1(z1), .z2(z2), .y(age_n));

    always @(posedge clk) begin
        // The action a cycle after the key: nothing reads it before (a
        // lookup of the fill's key in the fill's cycle takes the fill's).
        if (px1) begin
            act <= fill_act;
            act_v <= fill_act_v;
        end
        if (wkey) key <= fill_key;
        if (clear) valid <= 1'b0;
        else if (wkey) valid <= 1'b1;
        px1 <= x1;
        px2 <= issue && lm;
        s_m <= lm;
        s_w <= wkey;
        age <= age_n;
    end
endmodule

// The fill's candidate slot: a registered victim candidate picked by the
// pending flags g1, g2 of the older ages, or the next unused slot.
module synapse_pmu_sel (input wire v1, v2, v3, nxt, g1, g2, output wire sel);
    assign sel = nxt | v1 | (v2 & g1) | (v3 & g1 & g2);
endmodule

// The fill writes its key here (a new key), or touches this slot (x1).
module synapse_pmu_wr (input wire fill_do, fhit, fm, sel, output wire wkey, x1);
    assign wkey = fill_do & !fhit & sel;
    assign x1 = fill_do & (fm | (!fhit & sel));
endmodule

// Pending (touched last cycle, not yet aged) at age N-1 / N-2.
module synapse_pmu_q #(parameter N = 64, parameter AW = 6) (
    input wire px1, px2, input wire [AW-1:0] age, output wire o_q1, o_q2);
    localparam [AW-1:0] O1 = N - 1, O2 = N - 2;
    assign o_q1 = (px1 | px2) && age == O1;
    assign o_q2 = (px1 | px2) && age == O2;
endmodule

// A slot's drivers on the OR buses, one LUT each.
module synapse_pmu_drv #(parameter AW = 6, parameter ACT_W = 32) (
    input wire px1, px2, s_m, s_w, act_v, input wire [AW-1:0] age, input wire [ACT_W-1:0] act,
    output wire [AW-1:0] o_a1, o_a2, output wire o_h2, o_hit, o_av, output wire [ACT_W-1:0] o_act);
    assign o_a1 = px1 ? age : {AW{1'b0}};
    assign o_a2 = (px2 && !px1) ? age : {AW{1'b0}};
    assign o_h2 = px2 && !px1;
    // Stage 2: a match the fill did not overwrite drives the action bus.
    assign o_hit = s_m && !s_w;
    assign o_act = (s_m && !s_w) ? act : {ACT_W{1'b0}};
    assign o_av = s_m && !s_w && act_v;
endmodule

// A slot's next age from the touch buses: c1 = age < a1, c2 = age < a2
// (3-bit groups, then one LUT), then one LUT per bit picks z0, z1 or z2
// (age, age + 1, age + 2, or what a touched / invalid slot becomes). Bit 0
// of the slot x1 is h2x.
module synapse_pmu_age #(parameter AW = 6) (
    input wire [AW-1:0] age, a1, a2, input wire h2x, normal, is_x1,
    input wire [AW-1:0] z0, z1, z2, output wire [AW-1:0] y);
    wire c1, c2;
    synapse_lt #(.W(AW)) lt1 (.a(age), .b(a1), .y(c1));
    synapse_lt #(.W(AW)) lt2 (.a(age), .b(a2), .y(c2));
    assign y[0] = is_x1 ? h2x : normal ? (z0[0] ^ c1 ^ c2) : z0[0];
    genvar k;
    generate for (k = 1; k < AW; k = k + 1) begin : b
        assign y[k] = (c1 && c2) ? z2[k] : (c1 || c2) ? z1[k] : z0[k];
    end endgenerate
endmodule

// a < b in two LUT levels (up to 9 bits): per 3-bit group a LUT6 for
// "less" and one for "equal", then one LUT combines the groups.
module synapse_lt #(parameter W = 6) (input wire [W-1:0] a, b, output wire y);
    localparam G = (W + 2) / 3;
    wire [3*G-1:0] ap = a, bp = b;
    wire [G-1:0] l, e;
    genvar i;
    generate for (i = 0; i < G; i = i + 1) begin : g
        synapse_lt3 c (.a(ap[3*i +: 3]), .b(bp[3*i +: 3]), .lt(l[i]), .eq(e[i]));
    end endgenerate
    reg r;
    integer k;
    always @* begin
        r = 1'b0;
        for (k = 0; k < G; k = k + 1) r = l[k] | (e[k] & r);
    end
    assign y = r;
endmodule

module synapse_lt3 (input wire [2:0] a, b, output wire lt, eq);
    assign lt = a < b;
    assign eq = a == b;
endmodule

// The OR of N words of W bits (a bus every slot drives): per bit, a tree
// of 6-input ORs, each a module so that synthesis maps it to one LUT6:
// ceil(log6 N) levels (mapped as one module, a wide OR is a tree of 4-input
// cuts: 4 levels at 128 slots instead of 3).
module synapse_or #(parameter N = 64, parameter W = 1) (input wire [N*W-1:0] x, output wire [W-1:0] y);
    genvar i, j;
    generate for (j = 0; j < W; j = j + 1) begin : col
        wire [N-1:0] c;
        for (i = 0; i < N; i = i + 1) begin : row
            assign c[i] = x[i*W + j];
        end
        synapse_tree #(.N(N), .AND(0)) t (.x(c), .y(y[j]));
    end endgenerate
endmodule

// The OR (AND = 0) or the AND (AND = 1) of N bits as a tree of 6-input
// gates, up to 6^4 inputs.
module synapse_tree #(parameter N = 6, parameter AND = 0) (input wire [N-1:0] x, output wire y);
    localparam N1 = (N + 5) / 6, N2 = (N1 + 5) / 6, N3 = (N2 + 5) / 6, N4 = (N3 + 5) / 6;
    wire [N1-1:0] c1;
    wire [N2-1:0] c2;
    wire [N3-1:0] c3;
    wire [N4-1:0] c4;
    synapse_level #(.N(N), .AND(AND)) l1 (.x(x), .y(c1));
    synapse_level #(.N(N1), .AND(AND)) l2 (.x(c1), .y(c2));
    synapse_level #(.N(N2), .AND(AND)) l3 (.x(c2), .y(c3));
    synapse_level #(.N(N3), .AND(AND)) l4 (.x(c3), .y(c4));
    assign y = N <= 1 ? x[0] : N1 <= 1 ? c1[0] : N2 <= 1 ? c2[0] : N3 <= 1 ? c3[0] : c4[0];
endmodule

module synapse_level #(parameter N = 6, parameter AND = 0) (input wire [N-1:0] x, output wire [(N+5)/6-1:0] y);
    genvar i;
    generate for (i = 0; i < (N + 5) / 6; i = i + 1) begin : g
        localparam K = N - 6 * i < 6 ? N - 6 * i : 6;
        synapse_gate6 #(.K(K), .AND(AND)) o (.x(x[6*i +: K]), .y(y[i]));
    end endgenerate
endmodule

module synapse_gate6 #(parameter K = 6, parameter AND = 0) (input wire [K-1:0] x, output wire y);
    assign y = AND ? &x : |x;
endmodule

// A counter's neighbours, computed from its register in parallel (a module
// so that synthesis does not share one adder behind the choice).
module synapse_nbrs #(parameter W = 8) (input wire [W-1:0] a, output wire [W-1:0] m2, m1, p1, p2, p3);
    assign m2 = a - 2'd2;
    assign m1 = a - 1'b1;
    assign p1 = a + 1'b1;
    assign p2 = a + 2'd2;
    assign p3 = a + 2'd3;
endmodule

// key == other, as XAPP-style LUT6 rows: each LUT compares three bit pairs,
// an AND tree of the rows (with the enable) gives the match line. A module
// so synthesis keeps this area mapping (~W/3 + W/15 LUTs, 3 levels at 104
// bits) rather than a depth-first one.
module synapse_eq #(parameter W = 104) (
    input  wire [W-1:0] a, b,
    input  wire en,
    output wire y
);
    localparam C = (W + 2) / 3;
    wire [3*C-1:0] ap = a, bp = b;
    wire [C-1:0] row;
    genvar i;
    generate for (i = 0; i < C; i = i + 1) begin : r
        synapse_eq3 e (.a(ap[3*i +: 3]), .b(bp[3*i +: 3]), .y(row[i]));
    end endgenerate
    synapse_tree #(.N(C + 1), .AND(1)) t (.x({en, row}), .y(y));
endmodule

module synapse_eq3 (input wire [2:0] a, b, output wire y);
    assign y = a == b;
endmodule
`default_nettype wire
