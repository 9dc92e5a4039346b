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
// CPU write to the entry being read is forwarded. Each entry keeps a
// "no PMU" bit beside its PMU, set when the CPU writes the entry, so the
// request producer's route decision reads one bit instead of comparing
// the PMU with INVALID after the BRAM's output.
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

    reg [PMU_W:0] lut [0:(1<<BITS)-1];     // {no PMU, PMU}
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
    initial for (k = 0; k < (1 << BITS); k = k + 1) lut[k] = {1'b1, INVALID};

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
    reg [PMU_W:0] rd, fwd_data;
    reg fwd;
    wire [PMU_W:0] route = fwd ? fwd_data : rd;
    wire invalid = route[PMU_W];
    assign direct_valid = phv_valid && room && invalid;
    assign req_want = phv_valid && room && !invalid;
    assign req_valid = req_want && req_ready;
    assign phv_ready = direct_valid || req_valid;
    assign req_tag = ntag;
    assign direct_tag = ntag;
    assign req_pmu = route[PMU_W-1:0];
    wire [PMU_W:0] lut_row = {lut_data == INVALID, lut_data};

    // The table: registered read (a BRAM), write port for the CPU.
    always @(posedge clk) begin
        rd <= lut[phv_hash_next[BITS-1:0]];
        if (lut_we) lut[lut_addr] <= lut_row;
    end
    // The grant (req_ready) comes late, after the cluster's channel
    // arbitration: every register a new PHV changes has its next value
    // computed both ways (taken: t1, not: t0) without it, and one LUT picks
    // (synapse_vmu_take, a module of its own so synthesis keeps the pick last).
    reg [FIFO-1:0] ans_r, via_r, ans_t1, via_t1;    // after this cycle's responses; then a PHV taken
    always @* begin
        ans_r = ans; via_r = via;
        for (j = 0; j < FIFO; j = j + 1)
            for (k = 0; k < PORTS; k = k + 1)
                if (rsp_valid[k] && rsp_tag[k*TAG_W +: FW] == j) begin
                    if (rsp_miss[k]) via_r[j] = 1'b1;
                    else ans_r[j] = 1'b1;
                end
        ans_t1 = ans_r; via_t1 = via_r;
        for (j = 0; j < FIFO; j = j + 1)
            if (ntag[FW-1:0] == j) begin
                ans_t1[j] = 1'b0;
                via_t1[j] = direct_valid;
            end
    end
    localparam TW = 2 * FIFO + (FW + 1) + 1 + TAG_W;
    wire [TW-1:0] nx_t0 = {ans_r, via_r, rel_valid ? cnt_m1 : cnt, rel_valid ? 1'b0 : cnt == FIFO, ntag};
    wire [TW-1:0] nx_t1 = {ans_t1, via_t1, rel_valid ? cnt : cnt_p1,
                           rel_valid ? cnt == FIFO : cnt == FIFO - 1, ntag_p1};
    wire [TW-1:0] nx;
    synapse_vmu_take #(.W(TW)) take (.direct(direct_valid), .want(req_want), .grant(req_ready),
                                     .t0(nx_t0), .t1(nx_t1), .y(nx));
    always @(posedge clk) begin
        fwd <= lut_we && lut_addr == phv_hash_next[BITS-1:0];
        fwd_data <= lut_row;
        // Per window slot: a response's action (only responses write it).
        for (j = 0; j < FIFO; j = j + 1)
            for (k = 0; k < PORTS; k = k + 1)
                if (rsp_valid[k] && !rsp_miss[k] && rsp_tag[k*TAG_W +: FW] == j) begin
                    w_av[j] <= rsp_act_v[k];
                    w_act[j] <= rsp_act[k*ACT_W +: ACT_W];
                end
        if (rst) begin
            base <= 0; cnt <= 0; ans <= 0; via <= 0; ntag <= 0; full_r <= 0;
        end else begin
            if (rel_valid) base <= base + 1'b1;
            {ans, via, cnt, full_r, ntag} <= nx;
        end
    end
endmodule
// The late pick: a new PHV is taken (a direct key, or a request granted).
module synapse_vmu_take #(parameter W = 1) (
    input wire direct, want, grant,
    input wire [W-1:0] t0, t1,
    output wire [W-1:0] y
);
    assign y = (direct || (want && grant)) ? t1 : t0;
endmodule
`default_nettype wire
