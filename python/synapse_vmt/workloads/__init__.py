"""Workloads: traffic (flow sizes, pcap fitting, arrivals)."""
