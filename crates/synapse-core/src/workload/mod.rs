//! Workloads: rule-set generators, header traces and flow-level traffic.
