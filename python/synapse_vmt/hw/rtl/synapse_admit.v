// synapse_admit: the doorkeeper of one PMU (docs/flood.md, "Defences"),
// the RTL of crates/synapse-core/src/hw/admit.rs, co-simulated cycle by
// cycle against it (synapse_vmt/hw/cosim.py, cosim_admit).
//
// A Bloom filter of the keys that missed: 2^LOG bits, two probes per key.
// The probes (h0, h1) come with the operation: the two lookup3 hashes of
// the key are computed once, when the miss enters Q_m. One operation a cycle:
//   op = 1, a fill from the ELU: admitted when the CAM is not full or the
//           key is in the filter (it missed before); otherwise the key is
//           recorded and the fill refused (the answer goes to the VMU uncached);
//   op = 2, the shed gate's question at the head of Q_m: is the key in the
//           filter? If not, it is recorded (its next miss passes).
// Recording sets both bits and counts; the RESET_AFTER-th record clears the
// whole filter (TinyLFU's sample period) instead.
//
// The filter is in LUT-RAM, not flip-flops. A LUT-RAM has one write port
// and cannot be cleared in a cycle, so:
//   - two banks, bank 0 written with h0's bit, bank 1 with h1's: a filter
//     bit is set when it is set in either bank (bits are only ever set, so
//     no bank needs the other's writes), one write port per bank;
//   - each bank is 2^DLOG words of 2^(LOG-DLOG) bits (64 deep: a RAM64M's
//     depth) with a valid flag per word in flip-flops. A clear drops the
//     flags (2 x 64 flip-flops, one cycle); a record rewrites the whole word
//     it sets a bit in (read in stage A, the new bit or'ed in stage B), so a
//     word written after a clear carries none of its stale bits.
// Three stages, so no path crosses two of: the filter read, the decision
// (forwarding compares, the record count) and the write:
//   A: read the two probes' words in both banks (asynchronous LUT-RAM reads,
//      masked by their valid flags); register both bits (either bank) and
//      the two words the record would rewrite (bank 0 at h0, bank 1 at h1);
//   B: the answer, with the writes of the two previous operations forwarded
//      (neither had landed when A read), and this operation's write decision
//      and words (registered);
//   C: the write of both banks' words from registered addresses and data.
// The answer (ans_valid, ans_yes, ans_clear) is registered: an operation
// presented in cycle t is answered in cycle t + 2 (the write lands at the end
// of t + 2, which forwarding hides).
`timescale 1ns / 1ps

module synapse_admit #(
    parameter LOG = 13,            // filter bits: 2^LOG (bits_per_entry x CAM entries)
    parameter RESET_AFTER = 1024,  // records per period (reset_factor x CAM entries)
    parameter CNT_W = 11,
    parameter DLOG = 6             // words per bank: 2^DLOG (at most 2^LOG)
) (
    input  wire           clk,
    input  wire           rst,
    input  wire [1:0]     op,      // 0 none, 1 fill, 2 seen
    input  wire           full,    // the CAM has no free entry (op 1)
    input  wire [LOG-1:0] h0,
    input  wire [LOG-1:0] h1,
    output reg            ans_valid,
    output reg            ans_yes,   // op 1: admitted; op 2: missed before
    output reg            ans_clear  // this operation's record cleared the filter
);
    localparam AB = DLOG < LOG ? DLOG : LOG;  // word address bits
    localparam WB = LOG - AB;                 // bit-in-word bits
    localparam W = 1 << WB;                   // word width
    localparam WBS = WB > 0 ? WB : 1;

    // A probe's word and its bit in the word.
    function [AB-1:0] wa(input [LOG-1:0] h);
        wa = h >> WB;
    endfunction
    function [WBS-1:0] pos(input [LOG-1:0] h);
        pos = WB > 0 ? h[WBS-1:0] : 1'b0;
    endfunction
    function [W-1:0] one(input [LOG-1:0] h);  // the probe's bit, one-hot in its word
        one = {{(W-1){1'b0}}, 1'b1} << pos(h);
    endfunction
    function [(1<<AB)-1:0] word(input [LOG-1:0] h);  // the probe's word, one-hot
        word = {{((1<<AB)-1){1'b0}}, 1'b1} << wa(h);
    endfunction

    reg [W-1:0] mem0 [0:(1<<AB)-1];  // bank 0: h0's bits
    reg [W-1:0] mem1 [0:(1<<AB)-1];  // bank 1: h1's bits
    reg [(1<<AB)-1:0] valid0, valid1;
    reg [CNT_W-1:0] recorded;

    // Stage A's reads: both probes' words in both banks and their flags (a
    // word not valid reads as 0: masked on the bit read here, on the word
    // in stage B, with the forwarding).
    wire [W-1:0] r00 = mem0[wa(h0)], r01 = mem0[wa(h1)], r10 = mem1[wa(h0)], r11 = mem1[wa(h1)];
    wire v00 = valid0[wa(h0)], v01 = valid0[wa(h1)], v10 = valid1[wa(h0)], v11 = valid1[wa(h1)];
    wire [WBS-1:0] i0 = pos(h0), i1 = pos(h1);

    // Stage A: the operation, its bits and the words it would rewrite.
    reg [1:0]     a_op;
    reg           a_full;
    reg [LOG-1:0] a_h0, a_h1;
    reg           a_b0, a_b1;
    reg [W-1:0]   a_d0, a_d1;  // bank 0 at h0's word, bank 1 at h1's
    reg           a_v0, a_v1;  // and whether each is valid
    // Stage C: the write decided by stage B last cycle (the previous
    // operation's), landing at the end of this cycle ...
    reg           w_rec, w_clear;
    reg [LOG-1:0] w_h0, w_h1;
    reg [W-1:0]   w_d0, w_d1;
    // ... and the one before it (landed at the end of last cycle, after
    // stage A read this operation's bits).
    reg           v_rec, v_clear;
    reg [LOG-1:0] v_h0, v_h1;

    // Stage B. A clear in either pending write erases the bits read; a
    // clear by the older one leaves only the newer one's record.
    wire fw0 = w_rec && (a_h0 == w_h0 || a_h0 == w_h1);
    wire fw1 = w_rec && (a_h1 == w_h0 || a_h1 == w_h1);
    wire fv0 = v_rec && (a_h0 == v_h0 || a_h0 == v_h1);
    wire fv1 = v_rec && (a_h1 == v_h0 || a_h1 == v_h1);
    wire older = !v_clear;  // the bits read and the older record still stand
    wire keep = older && !w_clear;  // the words read and the older record still stand
    wire b0 = (older && (a_b0 || fv0)) || fw0;
    wire b1 = (older && (a_b1 || fv1)) || fw1;
    wire contains = !w_clear && b0 && b1;
    wire rec = (a_op == 2'd2 || (a_op == 2'd1 && a_full)) && !contains;
    wire clear = rec && recorded == RESET_AFTER - 1;
    // The words the record rewrites: as read (0 if not valid), with the
    // pending writes to the same word of the same bank or'ed in (each wrote
    // its word as it stood plus one bit), and this record's bit; a pending
    // clear leaves only the newer record's bit (a newer clear, none: its
    // record writes nothing).
    wire [W-1:0] z = {W{1'b0}};
    wire [W-1:0] s0 = (a_v0 ? a_d0 : z) | (v_rec && wa(v_h0) == wa(a_h0) ? one(v_h0) : z);
    wire [W-1:0] s1 = (a_v1 ? a_d1 : z) | (v_rec && wa(v_h1) == wa(a_h1) ? one(v_h1) : z);
    wire [W-1:0] n0 = (keep ? s0 : z) | (w_rec && wa(w_h0) == wa(a_h0) ? one(w_h0) : z) | one(a_h0);
    wire [W-1:0] n1 = (keep ? s1 : z) | (w_rec && wa(w_h1) == wa(a_h1) ? one(w_h1) : z) | one(a_h1);

    // The banks: written from stage C's registers, no reset (the flags say
    // what holds).
    always @(posedge clk) begin
        if (w_rec) begin
            mem0[wa(w_h0)] <= w_d0;
            mem1[wa(w_h1)] <= w_d1;
        end
    end

    always @(posedge clk) begin
        if (rst) begin
            valid0 <= 0;
            valid1 <= 0;
            recorded <= 0;
            a_op <= 2'd0;
            w_rec <= 1'b0;
            w_clear <= 1'b0;
            v_rec <= 1'b0;
            v_clear <= 1'b0;
            ans_valid <= 1'b0;
            ans_yes <= 1'b0;
            ans_clear <= 1'b0;
        end else begin
            // A
            a_op <= op;
            a_full <= full;
            a_h0 <= h0;
            a_h1 <= h1;
            a_b0 <= (v00 && r00[i0]) || (v10 && r10[i0]);
            a_b1 <= (v01 && r01[i1]) || (v11 && r11[i1]);
            a_d0 <= r00;
            a_d1 <= r11;
            a_v0 <= v00;
            a_v1 <= v11;
            // B: the decision and the count
            if (clear) recorded <= 0;
            else if (rec) recorded <= recorded + 1'b1;
            w_rec <= rec && !clear;
            w_clear <= clear;
            w_h0 <= a_h0;
            w_h1 <= a_h1;
            w_d0 <= n0;
            w_d1 <= n1;
            v_rec <= w_rec;
            v_clear <= w_clear;
            v_h0 <= w_h0;
            v_h1 <= w_h1;
            ans_valid <= a_op != 2'd0;
            ans_yes <= a_op == 2'd2 ? contains : (a_op == 2'd1 && (!a_full || contains));
            ans_clear <= clear;
            // C: the valid flags of the words written, or the clear
            if (w_clear) begin
                valid0 <= 0;
                valid1 <= 0;
            end else if (w_rec) begin
                valid0 <= valid0 | word(w_h0);
                valid1 <= valid1 | word(w_h1);
            end
        end
    end
endmodule
