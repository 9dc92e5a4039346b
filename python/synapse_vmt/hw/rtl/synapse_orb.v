// Outstanding Request Buffer (ORB) of the External Lookup Unit: a reorder
// buffer with a commit pointer (oldest entry) and an issue pointer (next
// entry for the lookup module). RTL of the ORB in
// crates/synapse-core/src/hw/elu.rs (paper §4.3), cycle for cycle.
//
// One cycle, in the model's order (sim/mod.rs: memory completions, then
// phase 2 commit, then phase 6 register + issue):
//   done   : the lookup of entry done_slot finished (out of order): valid
//   commit : the head leaves if valid (also if it became valid this cycle)
//   alloc  : the miss-queue head is registered at head+len if there is room
//   issue  : the entry at the issue pointer goes to the lookup module if
//            fewer than SLOTS lookups are in flight (also one registered
//            this cycle).
// Each lookup is one completion (`done`); the model's lookup module with
// its HBM reads stays in the model.
`default_nettype none
module synapse_orb #(
    parameter N = 64,          // orb_entries
    parameter SLOTS = 8,       // lookup_slots
    parameter KEY_W = 104,
    parameter TAG_W = 16,
    parameter TBL_W = 8,
    parameter ACT_W = 32
) (
    input  wire clk,
    input  wire rst,
    input  wire in_valid,
    output wire in_ready,
    input  wire [TBL_W-1:0] in_tbl,
    input  wire [TAG_W-1:0] in_tag,
    input  wire [KEY_W-1:0] in_key,
    output wire iss_valid,
    output wire [$clog2(N)-1+1:0] iss_slot,
    output wire [KEY_W-1:0] iss_key,
    input  wire done_valid,
    input  wire [$clog2(N)-1+1:0] done_slot,
    input  wire done_act_v,
    input  wire [ACT_W-1:0] done_act,
    output wire cm_valid,
    output wire [TBL_W-1:0] cm_tbl,
    output wire [TAG_W-1:0] cm_tag,
    output wire [KEY_W-1:0] cm_key,
    output wire cm_act_v,
    output wire [ACT_W-1:0] cm_act
);
    localparam AW = $clog2(N) + 1;          // slot numbers and counts 0..N
    localparam SW = $clog2(SLOTS + 1) + 1;

    reg [TBL_W-1:0] m_tbl [0:N-1];
    reg [TAG_W-1:0] m_tag [0:N-1];
    reg [KEY_W-1:0] m_key [0:N-1];
    reg m_av [0:N-1];
    reg [ACT_W-1:0] m_act [0:N-1];
    reg [N-1:0] valid;
    reg [AW-1:0] head, len, issued;
    reg [SW-1:0] walking;

    function [AW-1:0] wrap1;                // (a + 1) mod N, a < N
        input [AW-1:0] a;
        begin wrap1 = (a == N - 1) ? {AW{1'b0}} : a + 1'b1; end
    endfunction

    // Pointers kept as registers so that no sum follows this cycle's
    // events: the commit moves head and len together, so the allocation
    // slot head+len (tail) and the issue slot head+issued (inext) do not
    // depend on it.
    reg [AW-1:0] tail, inext;
    wire [AW-1:0] head_n = wrap1(head);

    // commit (a completion this cycle counts)
    wire done_head = done_valid && done_slot == head;
    assign cm_valid = len != 0 && (valid[head] || done_head);
    assign cm_tbl = m_tbl[head];
    assign cm_tag = m_tag[head];
    assign cm_key = m_key[head];
    assign cm_act_v = done_head ? done_act_v : m_av[head];
    assign cm_act = done_head ? done_act : m_act[head];
    // register (len - commit < N)
    assign in_ready = len != N || cm_valid;
    wire alloc = in_valid && in_ready;
    wire [AW-1:0] aslot = tail;
    // issue (issued - commit < len - commit + alloc; walking - done < SLOTS)
    wire none_left = issued == len;
    assign iss_valid = (!none_left || alloc) && (walking != SLOTS || done_valid);
    assign iss_slot = inext;
    assign iss_key = none_left ? in_key : m_key[inext];

    always @(posedge clk) begin
        if (rst) begin
            head <= 0; len <= 0; issued <= 0; walking <= 0; valid <= 0; tail <= 0; inext <= 0;
        end else begin
            if (done_valid) begin
                m_av[done_slot] <= done_act_v;
                m_act[done_slot] <= done_act;
            end
            if (alloc) begin
                m_tbl[aslot] <= in_tbl; m_tag[aslot] <= in_tag; m_key[aslot] <= in_key;
            end
            // alloc clears the valid bit of a slot the commit just freed
            valid <= (valid | (done_valid ? ({{(N-1){1'b0}}, 1'b1} << done_slot) : {N{1'b0}}))
                     & ~(alloc ? ({{(N-1){1'b0}}, 1'b1} << aslot) : {N{1'b0}});
            if (cm_valid) head <= head_n;
            len <= (cm_valid == alloc) ? len : alloc ? len + 1'b1 : len - 1'b1;
            issued <= (cm_valid == iss_valid) ? issued : iss_valid ? issued + 1'b1 : issued - 1'b1;
            walking <= (done_valid == iss_valid) ? walking : iss_valid ? walking + 1'b1 : walking - 1'b1;
            if (alloc) tail <= wrap1(tail);
            if (iss_valid) inext <= wrap1(inext);
        end
    end
endmodule
`default_nettype wire
