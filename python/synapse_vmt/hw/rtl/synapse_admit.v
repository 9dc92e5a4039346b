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
// Two stages, so no path crosses the 2^LOG:1 read and the write decode:
//   A: read the two bits (registered with the operation);
//   B: the answer, with the previous operation's write forwarded (it landed
//      after A read), and this operation's write.
// The answer (ans_valid, ans_yes, ans_clear) is registered: an operation
// presented in cycle t is answered in cycle t + 2.
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
    // The write stage B made last cycle (after stage A read this operation's bits).
    reg           w_rec, w_clear;
    reg [LOG-1:0] w_h0, w_h1;

    // Stage B.
    wire b0 = a_b0 || (w_rec && (a_h0 == w_h0 || a_h0 == w_h1));
    wire b1 = a_b1 || (w_rec && (a_h1 == w_h0 || a_h1 == w_h1));
    wire contains = !w_clear && b0 && b1;  // a clear last cycle: the bits read are gone
    wire rec = (a_op == 2'd2 || (a_op == 2'd1 && a_full)) && !contains;
    wire clear = rec && recorded == RESET_AFTER - 1;

    always @(posedge clk) begin
        if (rst) begin
            bits <= 0;
            recorded <= 0;
            a_op <= 2'd0;
            w_rec <= 1'b0;
            w_clear <= 1'b0;
            ans_valid <= 1'b0;
            ans_yes <= 1'b0;
            ans_clear <= 1'b0;
        end else begin
            a_op <= op;
            a_full <= full;
            a_h0 <= h0;
            a_h1 <= h1;
            a_b0 <= bits[h0];
            a_b1 <= bits[h1];
            if (clear) begin
                bits <= 0;
                recorded <= 0;
            end else if (rec) begin
                bits[a_h0] <= 1'b1;
                bits[a_h1] <= 1'b1;
                recorded <= recorded + 1'b1;
            end
            w_rec <= rec;
            w_clear <= clear;
            w_h0 <= a_h0;
            w_h1 <= a_h1;
            ans_valid <= a_op != 2'd0;
            ans_yes <= a_op == 2'd2 ? contains : (a_op == 2'd1 && (!a_full || contains));
            ans_clear <= clear;
        end
    end
endmodule
