// Virtual Matching Unit (VMU) of one table: the 2^BITS-entry lookup table
// (the paper's consistent_lb, a single-port table the CPU writes), the
// request producer (tags each key) and the in-order response consumer with
// the PHV window. RTL of crates/synapse-core/src/hw/vmu.rs (paper §4.1,
// Appendix D), cycle for cycle.
//
// One cycle, in the simulator's order (sim/mod.rs phases 2-4, then 7):
//   responses : up to PORTS per cycle; an early miss parks its PHV, a hit or
//               a fill answers it (out of order: different PMUs, the ELU)
//   release   : the oldest PHV leaves once answered (one a cycle, II = 1)
//   request   : a PHV is tagged (tag = oldest + occupancy) if the window has
//               room; its key's hash picks the table entry: a PMU (sent if
//               the interconnect is ready) or invalid (sent to the ELU
//               directly and parked at once)
//   CPU write : one lookup-table entry, at the end of the cycle.
// The key's lookup3 hash arrives with the PHV (the simulator hashes each
// flow's key once); the window is indexed by tag mod FIFO, so FIFO must be
// a power of two.
//
// The lookup table is a block RAM with a registered read, as in the paper
// (§4.5, a single-port BRAM): it is read one cycle ahead with the hash of
// the PHV the stage before presents next (`phv_hash_next`: the next PHV's
// if this one is taken, else this one's again), so the route is ready in
// the cycle the PHV is (the PHV's own hash is not needed after that). A
// CPU write to the entry being read is forwarded.
`default_nettype none
module synapse_vmu #(
    parameter BITS = 10,        // lookup-table index bits
    parameter FIFO = 64,        // PHV window (phv_fifo), a power of two
    parameter PMU_W = 16,
    parameter TAG_W = 16,
    parameter ACT_W = 32,
    parameter PORTS = 2
) (
    input  wire clk,
    input  wire rst,
    input  wire phv_valid,
    input  wire [31:0] phv_hash_next,
    output wire phv_ready,
    input  wire req_ready,
    output wire req_want,       // a request is ready to go if req_ready (no loop through req_ready)
    output wire req_valid,
    output wire [PMU_W-1:0] req_pmu,
    output wire [TAG_W-1:0] req_tag,
    output wire direct_valid,
    output wire [TAG_W-1:0] direct_tag,
    input  wire [PORTS-1:0] rsp_valid,
    input  wire [PORTS-1:0] rsp_miss,
    input  wire [PORTS*TAG_W-1:0] rsp_tag,
    input  wire [PORTS-1:0] rsp_act_v,
    input  wire [PORTS*ACT_W-1:0] rsp_act,
    input  wire rel_ready,
    output wire rel_valid,
    output wire [TAG_W-1:0] rel_tag,
    output wire rel_act_v,
    output wire [ACT_W-1:0] rel_act,
    output wire rel_via,
    input  wire lut_we,
    input  wire [BITS-1:0] lut_addr,
    input  wire [PMU_W-1:0] lut_data
);
    localparam FW = $clog2(FIFO);
    localparam [PMU_W-1:0] INVALID = {PMU_W{1'b1}};

    reg [PMU_W-1:0] lut [0:(1<<BITS)-1];
    reg [FIFO-1:0] ans, via;
    reg [ACT_W-1:0] w_act [0:FIFO-1];
    reg [FIFO-1:0] w_av;
    reg [TAG_W-1:0] base;
    reg [FW:0] cnt;
    reg [TAG_W-1:0] ntag;                   // base + cnt: the next PHV's tag
    wire [FW:0] cnt_p1 = cnt + 1'b1, cnt_m1 = cnt - 1'b1;
    wire [TAG_W-1:0] ntag_p1 = ntag + 1'b1;
    integer k, j;
    // Power-up contents (a BRAM init): every entry invalid, as the model's.
    initial for (k = 0; k < (1 << BITS); k = k + 1) lut[k] = INVALID;

    // Responses that touch the head this cycle (bypass for the release).
    reg head_res, head_park, head_av;
    reg [ACT_W-1:0] head_act;
    wire [FW-1:0] hslot = base[FW-1:0];
    always @* begin
        head_res = 0; head_park = 0; head_av = w_av[hslot]; head_act = w_act[hslot];
        for (k = 0; k < PORTS; k = k + 1)
            // Tags in flight lie in [base, base + FIFO): equal mod FIFO is equal.
            if (rsp_valid[k] && rsp_tag[k*TAG_W +: FW] == hslot) begin
                if (rsp_miss[k]) head_park = 1;
                else begin
                    head_res = 1; head_av = rsp_act_v[k]; head_act = rsp_act[k*ACT_W +: ACT_W];
                end
            end
    end
    assign rel_valid = rel_ready && cnt != 0 && (ans[hslot] || head_res);
    assign rel_tag = base;
    assign rel_act_v = head_av;
    assign rel_act = head_act;
    assign rel_via = via[hslot] | head_park;

    // The release frees a window slot this cycle; the next tag, base + cnt,
    // does not depend on it.
    reg full_r;
    wire room = !full_r;   // WHAT-IF: a release frees room for the next cycle
    reg [PMU_W-1:0] rd, fwd_data;
    reg fwd;
    wire [PMU_W-1:0] route = fwd ? fwd_data : rd;
    wire invalid = route == INVALID;
    assign direct_valid = phv_valid && room && invalid;
    assign req_want = phv_valid && room && !invalid;
    assign req_valid = req_want && req_ready;
    assign phv_ready = direct_valid || req_valid;
    assign req_tag = ntag;
    assign direct_tag = ntag;
    assign req_pmu = route;

    // The table: registered read (a BRAM), write port for the CPU.
    always @(posedge clk) begin
        rd <= lut[phv_hash_next[BITS-1:0]];
        if (lut_we) lut[lut_addr] <= lut_data;
    end
    always @(posedge clk) begin
        fwd <= lut_we && lut_addr == phv_hash_next[BITS-1:0];
        fwd_data <= lut_data;
        if (rst) begin
            base <= 0; cnt <= 0; ans <= 0; via <= 0; ntag <= 0; full_r <= 0;
        end else begin
            // Per window slot (a decode, no index arithmetic): responses set
            // answered / parked, then a new PHV taking the slot resets it.
            for (j = 0; j < FIFO; j = j + 1) begin
                for (k = 0; k < PORTS; k = k + 1)
                    if (rsp_valid[k] && rsp_tag[k*TAG_W +: FW] == j) begin
                        if (rsp_miss[k]) via[j] <= 1'b1;
                        else begin
                            ans[j] <= 1'b1;
                            w_av[j] <= rsp_act_v[k];
                            w_act[j] <= rsp_act[k*ACT_W +: ACT_W];
                        end
                    end
                if (phv_ready && ntag[FW-1:0] == j) begin
                    ans[j] <= 1'b0;
                    via[j] <= direct_valid;
                end
            end
            if (rel_valid) base <= base + 1'b1;
            cnt <= (rel_valid == phv_ready) ? cnt : phv_ready ? cnt_p1 : cnt_m1;
            full_r <= (rel_valid == phv_ready) ? cnt == FIFO : phv_ready ? cnt == FIFO - 1 : 1'b0;
            if (phv_ready) ntag <= ntag_p1;
        end
    end
endmodule
`default_nettype wire
