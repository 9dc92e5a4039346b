// synapse_admit: the doorkeeper of one PMU (docs/flood.md, "Defences"),
// the RTL of crates/synapse-core/src/hw/admit.rs, co-simulated cycle by
// cycle against it (synapse_vmt/hw/cosim.py, cosim_admit).
//
// A Bloom filter of the keys that missed: 2^LOG bits in flip-flops, two
// probes per key. The probes (h0, h1) come with the operation: the two
// lookup3 hashes of the key are computed once, when the miss enters Q_m.
// One operation a cycle:
//   op = 1, a fill from the ELU: admitted when the CAM is not full or the
//           key is in the filter (it missed before); otherwise the key is
//           recorded and the fill refused (the answer goes to the VMU uncached);
//   op = 2, the shed gate's question at the head of Q_m: is the key in the
//           filter? If not, it is recorded (its next miss passes).
// Recording sets both bits and counts; the RESET_AFTER-th record clears the
// whole filter (TinyLFU's sample period) instead.
//
// Three stages, so no path crosses two of: the 2^LOG:1 read, the decision
// (forwarding compares, the record count) and the write decode:
//   A: read the two bits (registered with the operation);
//   B: the answer, with the writes of the two previous operations forwarded
//      (neither had landed when A read), and this operation's write decision
//      (registered);
//   C: the write, decoded from registered addresses.
// The answer (ans_valid, ans_yes, ans_clear) is registered: an operation
// presented in cycle t is answered in cycle t + 2 (the write lands at the end
// of t + 2, which forwarding hides).
`timescale 1ns / 1ps

module synapse_admit #(
    parameter LOG = 13,            // filter bits: 2^LOG (bits_per_entry x CAM entries)
    parameter RESET_AFTER = 1024,  // records per period (reset_factor x CAM entries)
    parameter CNT_W = 11
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
    reg [(1<<LOG)-1:0] bits;
    reg [CNT_W-1:0]    recorded;

    // Stage A: the operation and the bits it reads.
    reg [1:0]     a_op;
    reg           a_full;
    reg [LOG-1:0] a_h0, a_h1;
    reg           a_b0, a_b1;
    // Stage C: the write decided by stage B last cycle (the previous
    // operation's), landing at the end of this cycle ...
    reg           w_rec, w_clear;
    reg [LOG-1:0] w_h0, w_h1;
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
    wire b0 = (older && (a_b0 || fv0)) || fw0;
    wire b1 = (older && (a_b1 || fv1)) || fw1;
    wire contains = !w_clear && b0 && b1;
    wire rec = (a_op == 2'd2 || (a_op == 2'd1 && a_full)) && !contains;
    wire clear = rec && recorded == RESET_AFTER - 1;

    always @(posedge clk) begin
        if (rst) begin
            bits <= 0;
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
            a_b0 <= bits[h0];
            a_b1 <= bits[h1];
            // B: the decision and the count
            if (clear) recorded <= 0;
            else if (rec) recorded <= recorded + 1'b1;
            w_rec <= rec && !clear;
            w_clear <= clear;
            w_h0 <= a_h0;
            w_h1 <= a_h1;
            v_rec <= w_rec;
            v_clear <= w_clear;
            v_h0 <= w_h0;
            v_h1 <= w_h1;
            ans_valid <= a_op != 2'd0;
            ans_yes <= a_op == 2'd2 ? contains : (a_op == 2'd1 && (!a_full || contains));
            ans_clear <= clear;
            // C: the write
            if (w_clear) begin
                bits <= 0;
            end else if (w_rec) begin
                bits[w_h0] <= 1'b1;
                bits[w_h1] <= 1'b1;
            end
        end
    end
endmodule
