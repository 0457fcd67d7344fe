"""Cost models.

* :mod:`placement.costmodel.roofline` — node times from FLOPs and bytes on a device type
  (roofline), transfer costs from bytes and link bandwidth, and the bundled device catalogue
  ``devices.json`` (H100, A100, V100, an EPYC socket; datasheet figures, cited there).

The HyPar/AccPar communication model of hybrid data/model parallelism (DESIGN.md §4):

* :mod:`placement.costmodel.network` — weighted layer chains (FC and CONV layers with their
  tensor shapes), their file format and the bundled networks of the HyPar paper.
* :mod:`placement.costmodel.hypar` — the communication model: intra-layer (Table 1) and
  inter-layer (Table 2) amounts, tensor sizes per level of the accelerator hierarchy, totals.
"""
