"""Cost models.

Among them, the HyPar/AccPar communication model of hybrid data/model parallelism (DESIGN.md §4):

* :mod:`placement.costmodel.network` — weighted layer chains (FC and CONV layers with their
  tensor shapes), their file format and the bundled networks of the HyPar paper.
* :mod:`placement.costmodel.hypar` — the communication model: intra-layer (Table 1) and
  inter-layer (Table 2) amounts, tensor sizes per level of the accelerator hierarchy, totals.
"""
