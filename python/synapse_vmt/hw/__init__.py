"""RTL of the PMU, the VMU and the ELU's ORB (``rtl/*.v``), co-simulated
against the Rust model (``cosim``) and synthesized with yosys (``synth``).

| RTL                  | model (crates/synapse-core/src/hw/)  |
| -------------------- | ------------------------------------ |
| ``synapse_pmu.v``    | ``pmu.rs`` + ``cam.rs``              |
| ``synapse_vmu.v``    | ``vmu.rs`` (lookup table, producer, consumer) |
| ``synapse_orb.v``    | ``elu.rs`` (the ORB)                 |

The per-cycle harnesses the co-simulation replays are ``harness.rs``.
"""
