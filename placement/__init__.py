"""placement: provably optimal placement of DNN graphs onto pipelines of heterogeneous devices."""

__version__ = "0.1.0"
