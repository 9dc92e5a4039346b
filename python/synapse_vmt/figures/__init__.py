"""The paper's figures, one module per figure (``synapse reproduce``).

``fig6_7`` (simulator sweeps: hit rate, latency and HBM bandwidth against VMT
capacity; throughput against load), ``fig8`` (closed-loop controller),
``fig9`` (solver time), ``fig10`` (USL samples and fit); ``simexp`` and
``common`` hold what they share. Click commands are in ``cli/reproduce.py``.
"""
