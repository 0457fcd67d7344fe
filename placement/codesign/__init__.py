"""Co-design of accelerator chips and the pipeline that runs a model on them.

A chip follows one template (:mod:`.template`): DRAM → a global buffer → tensor cores (systolic
arrays) and vector cores, at one clock. A grid (:mod:`.grid`) lists the designs the template
may take; :mod:`.opcost` times a model's operators on each design; :mod:`.exact` finds the
designs and the pipeline placement that maximise throughput (or throughput per watt) under
per-chip area and power budgets, proven optimal over the grid; :mod:`.exhaustive` checks it by
running the DP on every design combination. :func:`placement.codesign.api.codesign` is the
library's entry point (``placement.codesign``).
"""
