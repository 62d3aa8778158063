"""Public Graphcore documentation cited by the exported programs, by title and section.

Titles and section numbers as Graphcore's documentation lists them (checked on
docs.graphcore.ai, SDK 3.1-3.4; numbers may shift by version). The exports cite these instead
of internal notes, so a user can look every reason up.
"""

from __future__ import annotations

__all__ = ["cite"]

_MPO = "Memory and Performance Optimisation on the IPU"
_AMP_NOTE = "Optimising Temporary Memory Usage for Convolutions and Matmuls on the IPU"
_POPTORCH = "PyTorch for the IPU: User Guide"
_POPART = "PopART User Guide"
_TF = "TensorFlow 2 user guide"
_TF_NOTE = "Model Parallelism on the IPU with TensorFlow: Sharding and Pipelining"
_POPRUN = "PopRun and PopDist user guide"

_CITATIONS: dict[str, str] = {
    "device_iterations": f'{_POPTORCH}, "Efficient data batching" (deviceIterations)',
    "gradient_accumulation": f'{_MPO}, 7.6 "Batch size and gradient accumulation count"',
    "replication": f'{_MPO}, 4.3.1 "Graph replication"',
    "popdist": f'{_MPO}, 4.3.2 "Multiple SDK instances and replication: PopDist"',
    "pipeline": f'{_MPO}, 4.2 "Pipeline execution scheme"',
    "blocks": f'{_POPTORCH}, "Multi-IPU execution strategies" > "Model partitioning using blocks"',
    "pipelined": f'{_POPTORCH}, "Multi-IPU execution strategies" > "Pipelined execution"',
    "sharded": f'{_POPTORCH}, "Multi-IPU execution strategies" > "Sharded execution"',
    "recompute": f'{_MPO}, 5.3 "Activation recomputations"',
    "amp": f'{_MPO}, 5.1 "Available memory proportion tuning"; {_AMP_NOTE}',
    "partials": f'{_MPO}, 5.2 "Partials type"',
    "serialize": f"{_POPTORCH}, API reference: poptorch.serializedMatMul",
    "popart_serialize": f"{_POPART}, API reference: Builder.setSerializeMatMul",
    "precision": f'{_MPO}, 4.6 "Optimising numerical precision"',
    "rts": f'{_MPO}, 4.7 "Replicated tensor sharding (RTS)"',
    "offload": f'{_POPART}, "Tensor locations" > "Streaming Memory"',
    "prefetch": f'{_MPO}, 4.4.1 "Prefetch and prefetch depth"',
    "io_tiles": f'{_MPO}, 4.4.2 "Overlapping I/O with compute"',
    "overlap": f'{_POPTORCH}, "Efficient IPU I/O" > "Overlapping compute and I/O"',
    "eight_bit": f'{_MPO}, 4.4.3 "Data size reduction"',
    "dataloader": f'{_POPTORCH}, "Efficient data batching" (poptorch.DataLoader)',
    "optimizer": f'{_POPTORCH}, "Optimizers" > "Loss scaling", "Accumulation types"',
    "scaling": f'{_MPO}, 7 "Scaling an application over multiple replicas"',
    "popart_pipeline": f'{_POPART}, "Performance optimisation" > "Pipelined execution"',
    "popart_replication": f'{_POPART}, "Performance optimisation" > "Graph replication"',
    "popart_io": f'{_POPART}, "Overlapping IO with compute" > "Configuring IO tiles"',
    "popart_rts": f'{_POPART}, "Tensor locations" > "Replicated tensor sharding"',
    "popart_session": f'{_POPART}, "Executing graphs" > "Session options"',
    "popart_dataflow": f'{_POPART}, "Executing graphs"',
    "synthetic": f"{_POPTORCH}, API reference: poptorch.Options.enableSyntheticData",
    "popart_synthetic": f"{_POPART}, API reference: SessionOptions.syntheticDataMode",
    "tf_replication": f'{_TF}, "Training a model" > "Replicated graphs"',
    "tf_pipeline": f'{_TF}, "Training a model" > "Pipelined training"; {_TF_NOTE}, 3.3.3'
    ' "Pipeline scheduling"',
    "tf_recompute": f'{_TF}, "Training a model" > "Recomputation"; {_TF_NOTE}, 3.5.1'
    ' "Recomputation"',
    "tf_ga": f'{_TF}, "Keras with IPUs" > "Gradient accumulation"',
    "tf_steps": f'{_TF}, "Keras with IPUs" > "Using steps_per_execution"',
    "tf_offload": f'{_TF}, "Training a model" > "Optimizer state offloading"',
    "tf_rts": f'{_TF}, "Training a model" > "Replicated tensor sharding"',
    "tf_prefetch": f'{_TF}, "Efficient IPU I/O" > "Prefetch elements"',
    "tf_io_tiles": f'{_TF}, "Efficient IPU I/O" > "I/O Tiles"',
    "tf_popdist": f'{_TF}, "Distributed training" > "PopDistStrategy examples"',
    "poprun": f'{_POPRUN}, 3 "PopRun features" (3.1 "Usage")',
    # Gradient all-reduces merged into buffers: the options as the frameworks' sources name them.
    "tf_all_reduce_buffer": "Graphcore TensorFlow, tensorflow/python/ipu/config.py L1688"
    " (IPUConfig.optimizations.maximum_cross_replica_sum_buffer_size)",
    "poptorch_all_reduce_merge": "PopTorch, python/options.py L377 (opts._Popart.set; keys in"
    " popart_compiler/source/SessionOptions.cpp L300-414)",
}


def cite(topic: str) -> str:
    """'<document title>, <section number> "<section title>"' for a topic of the exports."""
    return _CITATIONS[topic]
