"""PyTorch pipelines in one call: :func:`plan_pipeline` plans a model and builds its torch stages.

``from placement.torch import plan_pipeline`` needs the optional extra ``torch``; torch is
imported when a function here is called. See ``docs/pytorch.md``.
"""

from placement.torch.forward_hooks import ForwardHookWarning, ImportedForwardHookWarning
from placement.torch.planning import (CustomGradientWarning, OutputBatchWarning, PipelinePlan, RandomStateWarning,
                                     SampleMixingWarning, SequenceFirstWarning, TrainingModeWarning,
                                     UninitialisedStateWarning, UnprovenPlanWarning, plan_pipeline)
from placement.torch.relays import RelayWarning
from placement.torch.repeated_reads import RepeatedReadWarning
from placement.torch.schedules import AccumulatedGradientWarning

__all__ = ["AccumulatedGradientWarning", "CustomGradientWarning", "ForwardHookWarning", "ImportedForwardHookWarning",
           "OutputBatchWarning", "PipelinePlan", "RandomStateWarning", "RelayWarning", "RepeatedReadWarning",
           "SampleMixingWarning", "SequenceFirstWarning", "TrainingModeWarning", "UninitialisedStateWarning",
           "UnprovenPlanWarning", "plan_pipeline"]
