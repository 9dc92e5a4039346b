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

    wire [N-1:0] fm, valid_v, b_hit, b_q1, b_q2, b_h2, b_same;
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
    reg s_fk, s_fav, s_fnew, s_fhit, s_fdo;
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
    wire fhit = |fm;
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

    // LRU: the touches of the previous cycle, broadcast by their slots.
    reg [AW-1:0] a1, a2;
    integer r;
    always @* begin
        a1 = 0; a2 = 0;
        for (r = 0; r < N; r = r + 1) begin
            a1 = a1 | b_a1[r*AW +: AW];
            a2 = a2 | b_a2[r*AW +: AW];
        end
    end
    wire h2x = |b_h2;                       // a lookup touch apart from x1
    wire same = |b_same;                    // ... or on x1 itself
    wire g1 = |b_q1, g2 = |b_q2;            // ages N-1, N-2 are pending

    // Stage 2: the result of the lookup issued last cycle.
    reg [ACT_W-1:0] l_act_m;
    always @* begin
        l_act_m = 0;
        for (r = 0; r < N; r = r + 1) l_act_m = l_act_m | b_act[r*ACT_W +: ACT_W];
    end
    wire l_hit = s_fk | (|b_hit);
    wire l_av = s_fk ? s_fav : |b_av;
    wire [ACT_W-1:0] l_act = s_fk ? s_fact : l_act_m;

    wire clear;                             // drained: the CAM is invalidated
    generate for (g = 0; g < N; g = g + 1) begin : slot
        synapse_pmu_entry #(.N(N), .KEY_W(KEY_W), .ACT_W(ACT_W), .AW(AW)) e (
            .clk(clk), .clear(rst || clear), .prev_valid(g == 0 ? 1'b1 : valid_v[g == 0 ? 0 : g-1]),
            .fill_key(fill_key), .lk(lk), .fill_do(fill_do), .fhit(fhit), .full(full),
            .fill_act(s_fact), .fill_act_v(s_fav), .s_fhit(s_fhit), .s_fdo(s_fdo), .issue(issue),
            .a1(a1), .a2(a2), .h2x(h2x), .same(same), .g1(g1), .g2(g2),
            .valid(valid_v[g]), .fm(fm[g]),
            .o_hit(b_hit[g]), .o_act(b_act[g*ACT_W +: ACT_W]), .o_av(b_av[g]),
            .o_a1(b_a1[g*AW +: AW]), .o_a2(b_a2[g*AW +: AW]), .o_h2(b_h2[g]), .o_same(b_same[g]),
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
    always @*
        case ({issue, qp_in, leave, qp_pop})
            5'b0_00_1_1:
                qp_base1 = qp_base - 2;
            5'b0_00_0_1, 5'b0_00_1_0, 5'b0_01_1_1, 5'b1_00_1_1:
                qp_base1 = qp_base - 1;
            5'b0_00_0_0, 5'b0_01_0_1, 5'b0_01_1_0, 5'b0_10_1_1, 5'b1_00_0_1, 5'b1_00_1_0, 5'b1_01_1_1:
                qp_base1 = qp_base;
            5'b0_01_0_0, 5'b0_10_0_1, 5'b0_10_1_0, 5'b1_00_0_0, 5'b1_01_0_1, 5'b1_01_1_0, 5'b1_10_1_1:
                qp_base1 = qp_base + 1;
            5'b0_10_0_0, 5'b1_01_0_0, 5'b1_10_0_1, 5'b1_10_1_0:
                qp_base1 = qp_base + 2;
            5'b1_10_0_0:
                qp_base1 = qp_base + 3;
            default: qp_base1 = qp_base;
        endcase
    // inflight + Q_m: +issue +miss -leave -pop
    reg [MW+1:0] qm_base1;
    always @*
        case ({issue, ret_miss, leave, qm_pop})
            4'b0_0_1_1:
                qm_base1 = qm_base - 2;
            4'b0_0_0_1, 4'b0_0_1_0, 4'b0_1_1_1, 4'b1_0_1_1:
                qm_base1 = qm_base - 1;
            4'b0_0_0_0, 4'b0_1_0_1, 4'b0_1_1_0, 4'b1_0_0_1, 4'b1_0_1_0, 4'b1_1_1_1:
                qm_base1 = qm_base;
            4'b0_1_0_0, 4'b1_0_0_0, 4'b1_1_0_1, 4'b1_1_1_0:
                qm_base1 = qm_base + 1;
            4'b1_1_0_0:
                qm_base1 = qm_base + 2;
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
            s_fhit <= fhit; s_fdo <= fill_do;
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
// once and counts it per instance.
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
    input  wire s_fhit, s_fdo,            // last cycle: a fill, and it found its key
    input  wire issue,
    input  wire [AW-1:0] a1, a2,          // ages of last cycle's touches
    input  wire h2x,                      // a lookup touch apart from x1
    input  wire same,                     // the lookup touched x1
    input  wire g1, g2,                   // the slots of age N-1, N-2 are pending
    output reg  valid,
    output wire fm,                       // holds the fill key
    output wire o_hit,                    // stage 2: hit here
    output wire [ACT_W-1:0] o_act,
    output wire o_av,
    output wire [AW-1:0] o_a1, o_a2,      // own age if touched last cycle
    output wire o_h2, o_same,
    output wire o_q1, o_q2                // age N-1 / N-2 and pending
);
    reg [KEY_W-1:0] key;
    reg [ACT_W-1:0] act;
    reg act_v;
    reg [AW-1:0] age;
    reg px2;                              // touched last cycle by the lookup
    reg s_fm, s_sel;                      // last cycle: held the fill key, was the fill's free slot or victim
    reg s_m, s_w;                         // stage 1: request matched, fill wrote a key
    wire lm;
    synapse_eq #(.W(KEY_W)) eq_f (.a(key), .b(fill_key), .en(valid), .y(fm));
    synapse_eq #(.W(KEY_W)) eq_l (.a(key), .b(lk), .en(valid), .y(lm));

    // The fill's slot: the one holding its key, else the next unused one,
    // else the victim (the oldest slot not touched last cycle).
    wire pend = px1 | px2;
    localparam [AW-1:0] O1 = N - 1, O2 = N - 2, O3 = N - 3;
    wire v1 = !pend && age == O1, v2 = !pend && age == O2, v3 = !pend && age == O3;
    wire vic = v1 | (v2 & g1) | (v3 & g1 & g2);
    wire nxt = prev_valid && !valid;
    wire wkey = fill_do && !fhit && (full ? vic : nxt);
    // Touched last cycle by the fill (x1), from registered parts, so that
    // the search's OR across slots (fhit) ends at a register.
    wire px1 = s_fdo && (s_fhit ? s_fm : s_sel);
    assign o_q1 = pend && age == O1;
    assign o_q2 = pend && age == O2;

    // Age update (last cycle's touches): a slot not touched ages by one for
    // each touched slot that was older than it: age + [age < a1] + [age < a2].
    function lt;                          // a < b, written out for LUT mapping
        input [AW-1:0] a, b;
        integer k;
        reg eq;
        begin
            lt = 0; eq = 1;
            for (k = AW - 1; k >= 0; k = k - 1) begin
                lt = lt | (eq & !a[k] & b[k]);
                eq = eq & (a[k] == b[k]);
            end
        end
    endfunction
    // x1 == x2 is one touch: a2 is then a1, and c2 is dropped (a late
    // input of the last LUT rather than a gate on the a2 bus).
    wire c1 = lt(age, a1), c2 = lt(age, a2) && !same;
    wire [AW-1:0] mine = px2 ? {AW{1'b0}} : {{(AW-1){1'b0}}, h2x};
    wire [AW-1:0] d0 = !valid ? O1 : pend ? mine : age;
    wire [AW-1:0] d1 = !valid ? O1 : pend ? mine : age + 1'b1;
    wire [AW-1:0] d2 = !valid ? O1 : pend ? mine : age + 2'd2;
    assign o_a1 = px1 ? age : {AW{1'b0}};
    assign o_a2 = px2 ? age : {AW{1'b0}};
    assign o_h2 = px2 && !px1;
    assign o_same = px2 && px1;

    // Stage 2: a match the fill did not overwrite drives the action bus.
    assign o_hit = s_m && !s_w;
    assign o_act = o_hit ? act : {ACT_W{1'b0}};
    assign o_av = o_hit && act_v;

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
        s_fm <= fm;
        s_sel <= full ? vic : nxt;
        px2 <= issue && lm;
        s_m <= lm;
        s_w <= wkey;
        age <= (c1 && c2) ? d2 : (c1 || c2) ? d1 : d0;
    end
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
    assign y = en & (&row);
endmodule

module synapse_eq3 (input wire [2:0] a, b, output wire y);
    assign y = a == b;
endmodule
`default_nettype wire
