"""The runtime optimizer (OPT): counters -> routing matrix -> USL fit -> allocation -> controller (paper §5)."""
