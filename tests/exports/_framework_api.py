"""The public framework API the exports may use, each name with its source.

Read from the frameworks' public sources (github.com/graphcore/poptorch, graphcore/popart,
graphcore/tensorflow and graphcore/keras at sdk-release-3.4) and the PopRun user guide. A recorded
attribute path is canonical: an instance's attributes hang under its class's path
(`poptorch.Options().deviceIterations` is `poptorch.Options.deviceIterations`).
"""

from __future__ import annotations

# --- PopTorch (graphcore/poptorch) ---------------------------------------------------------------
POPTORCH_API: dict[str, str] = {
    "poptorch.Options": "python/options.py L1146 (Options.__init__)",
    "poptorch.Options.deviceIterations": "options.py L1396",
    "poptorch.Options.replicationFactor": "options.py L1459",
    "poptorch.Options.randomSeed": "options.py L1740",
    "poptorch.Options.enableSyntheticData": "options.py L1763",
    "poptorch.Options.outputMode": "options.py L1692",
    "poptorch.Options.Training": "options.py L207 (training sub-options)",
    "poptorch.Options.Training.gradientAccumulation": "options.py L216",
    "poptorch.Options.setExecutionStrategy": "options.py L1408",
    "poptorch.Options.setAvailableMemoryProportion": "options.py L1426",
    "poptorch.Options.Precision": "options.py L71 (_PrecisionOptions)",
    "poptorch.Options.Precision.setPartialsType": "options.py L165",
    "poptorch.Options.TensorLocations": "options.py L590 (_TensorLocationOptions)",
    "poptorch.Options.TensorLocations.numIOTiles": "options.py L600",
    "poptorch.Options.TensorLocations.setOptimizerLocation": "options.py L647",
    "poptorch.Options._Popart": "options.py L377 (PopART pass-through)",
    "poptorch.Options._Popart.set": "options.py L377; keys SessionOptions.cpp L300-414",
    "poptorch.TensorLocationSettings": "options.py L515",
    "poptorch.TensorLocationSettings.useOnChipStorage": "options.py L539",
    "poptorch.TensorLocationSettings.useReplicatedTensorSharding": "options.py L555",
    "poptorch.TensorLocationSettings.minElementsForReplicatedTensorSharding": "options.py L531",
    "poptorch.PipelinedExecution": "options.py L806",
    "poptorch.ShardedExecution": "options.py L924",
    "poptorch.AutoStage": "enums.py L175",
    "poptorch.AutoStage.SameAsIpu": "enums.py L175",
    "poptorch.AutoStage.AutoIncrement": "enums.py L175",
    "poptorch.OutputMode": "enums.py L65",
    "poptorch.OutputMode.All": "enums.py L65",
    "poptorch.BeginBlock": "ops.py L689",
    "poptorch.recomputationCheckpoint": "ops.py L358",
    "poptorch.serializedMatMul": "python/ops.py (serializedMatMul(lhs, rhs, mode, factor))",
    "poptorch.MatMulSerializationMode": "python/enums.py (MatMulSerializationMode)",
    "poptorch.MatMulSerializationMode.OutputChannels": "python/enums.py (\"output_channels\")",
    "poptorch.set_overlap_for_input": "ops.py L481",
    "poptorch.OverlapMode": "enums.py L159",
    "poptorch.OverlapMode.OverlapDeviceIterationLoop": "enums.py L159",
    "poptorch.DataLoader": "python/__init__.py L229-253",
    "poptorch.DataLoaderMode": "enums.py L26",
    "poptorch.DataLoaderMode.Sync": "enums.py L26",
    "poptorch.DataLoaderMode.Async": "enums.py L26",
    "poptorch.optim": "python/optim.py",
    "poptorch.optim.SGD": "optim.py L108/196",
    "poptorch.optim.Adam": "optim.py L308",
    "poptorch.optim.AdamW": "optim.py L423/446",
    "poptorch.optim.LAMB": "optim.py L666/685",
    "poptorch.trainingModel": "python/__init__.py (poptorch.trainingModel)",
    "poptorch.inferenceModel": "python/__init__.py (poptorch.inferenceModel)",
}
# Keys of `opts._Popart.set` used (SessionOptions.cpp L355-356; ipu_settings.py L51-55).
POPART_PASS_THROUGH_KEYS = {
    "autoRecomputation": "options.py L390 docstring; sessionoptions.hpp L139 integers",
    "explicitRecomputation": "graphcore/examples vision/cnns/pytorch/utils/ipu_settings.py L51-55",
    # defaultPrefetchBufferingDepth is its deprecated alias (PopART sessionoptions.cpp L193-204).
    "defaultBufferingDepth": "sessionoptions.hpp L961; hostio_optimisation.rst",
    # Dotted nested key of a PopART settings struct, as the _Popart docstring lists it.
    "replicatedCollectivesSettings.mergeAllReduceCollectives": "options.py L377 (_Popart);"
    " SessionOptions.cpp L300-414",
}

# --- PopDist (PopRun and PopDist user guide) -----------------------------------------------------
POPDIST_API: dict[str, str] = {
    "popdist.isPopdistEnvSet": "PopRun user guide, PopDist Python API; examples' usage",
    "popdist.poptorch": "PopRun user guide; vision/cnns/pytorch/train/train.py L295",
    "popdist.poptorch.Options": "nlp/bert/pytorch/ipu_options.py L41 (ipus_per_replica=N)",
    "popdist.popart": "docs/popart/tensor_locations.rst (RTS sharding domains)",
    "popdist.popart.configureSessionOptions": "docs/popart/tensor_locations.rst",
    "popdist.tensorflow": "nlp/bert/tensorflow2/utilities/ipu_utils.py L70-84",
    "popdist.tensorflow.set_ipu_config": "nlp/bert/tensorflow2/utilities/ipu_utils.py L70-84",
}

# --- PopART (graphcore/popart) -------------------------------------------------------------------
POPART_API: dict[str, str] = {
    "popart.SessionOptions": "sessionoptions.hpp L777",
    "popart.SessionOptions.enablePipelining": "sessionoptions.hpp L1066",
    "popart.SessionOptions.virtualGraphMode": "sessionoptions.hpp L1052",
    "popart.SessionOptions.enableGradientAccumulation": "sessionoptions.hpp L1010",
    "popart.SessionOptions.accumulationFactor": "sessionoptions.hpp L1044",
    "popart.SessionOptions.enableReplicatedGraphs": "sessionoptions.hpp L1007",
    "popart.SessionOptions.replicatedGraphCount": "sessionoptions.hpp L1038",
    "popart.SessionOptions.autoRecomputation": "sessionoptions.hpp L882",
    "popart.SessionOptions.numIOTiles": "sessionoptions.hpp L1266",
    "popart.SessionOptions.defaultBufferingDepth": "sessionoptions.hpp L961",
    "popart.SessionOptions.syntheticDataMode": "sessionoptions.hpp L1076",
    "popart.SyntheticDataMode": "sessionoptions.hpp L255",
    "popart.SyntheticDataMode.RandomNormal": "sessionoptions.hpp L255",
    "popart.SessionOptions.enableExplicitMainLoops": "sessionoptions.hpp L1656",
    "popart.SessionOptions.useHostCopyOps": "sessionoptions.hpp L1577",
    "popart.SessionOptions.optimizerStateTensorLocationSettings": "sessionoptions.hpp L1603-1612",
    "popart.SessionOptions.partialsTypeMatMuls": "sessionoptions.hpp L1319",
    "popart.SessionOptions.convolutionOptions": "sessionoptions.hpp L1332-1350",
    "popart.SessionOptions.matmulOptions": "sessionoptions.hpp L1332-1350",
    "popart.VirtualGraphMode": "sessionoptions.hpp L231",
    "popart.VirtualGraphMode.Manual": "sessionoptions.hpp L231",
    "popart.VirtualGraphMode.Auto": "sessionoptions.hpp L231",
    "popart.RecomputationType": "sessionoptions.hpp L139; popart.cpp L1763",
    "popart.RecomputationType.NoRecompute": "popart.cpp L1763 (Python name of None)",
    "popart.RecomputationType.Standard": "sessionoptions.hpp L139",
    "popart.RecomputationType.Pipeline": "sessionoptions.hpp L139",
    "popart.TensorLocationSettings": "tensorlocation.hpp; sessionoptions.hpp L293",
    "popart.TensorLocation": "tensorlocation.hpp; tensorlocation.cpp L15-19",
    "popart.TensorStorage": "tensorlocation.hpp",
    "popart.TensorStorage.OnChip": "tensorlocation.hpp",
    "popart.TensorStorage.OffChip": "tensorlocation.hpp",
    "popart.ReplicatedTensorSharding": "tensorlocation.hpp",
    "popart.ReplicatedTensorSharding.On": "tensorlocation.hpp",
    "popart.ReplicatedTensorSharding.Off": "tensorlocation.hpp",
    "popart.InputSettings": "dataflow.hpp; popart.cpp L722-790",
    "popart.TileSet": "tensorlocation.hpp L30",
    "popart.TileSet.IO": "tensorlocation.hpp L30",
    "popart.ExchangeStrategy": "op/exchange/exchange.hpp L103",
    "popart.ExchangeStrategy.OverlapInnerLoop": "op/exchange/exchange.hpp L103",
}

# --- TensorFlow 2 and IPU Keras (graphcore/tensorflow, graphcore/keras) --------------------------
_TF = "tensorflow.python.ipu"
TF_API: dict[str, str] = {
    _TF: "from tensorflow.python import ipu",
    f"{_TF}.config": "tensorflow/python/ipu/config.py",
    f"{_TF}.config.IPUConfig": "config.py L1879",
    f"{_TF}.config.IPUConfig.auto_select_ipus": "config.py L1946",
    f"{_TF}.config.IPUConfig.allow_recompute": "config.py L1894",
    f"{_TF}.config.IPUConfig.io_tiles": "config.py L1352",
    f"{_TF}.config.IPUConfig.io_tiles.num_io_tiles": "config.py L1352",
    f"{_TF}.config.IPUConfig.io_tiles.place_ops_on_io_tiles": "config.py L1352",
    f"{_TF}.config.IPUConfig.matmuls": "config.py L1507",
    f"{_TF}.config.IPUConfig.matmuls.poplar_options": "config.py L1507",
    f"{_TF}.config.IPUConfig.convolutions": "config.py L1556",
    f"{_TF}.config.IPUConfig.convolutions.poplar_options": "config.py L1556",
    f"{_TF}.config.IPUConfig.optimizations": "config.py L1688",
    f"{_TF}.config.IPUConfig.optimizations.maximum_cross_replica_sum_buffer_size": (
        "config.py L1688 (default 0: no merging)"
    ),
    f"{_TF}.config.IPUConfig.configure_ipu_system": "config.py L2204",
    f"{_TF}.ipu_strategy": "tensorflow/python/ipu/ipu_strategy.py",
    f"{_TF}.ipu_strategy.IPUStrategy": "tensorflow/python/ipu/ipu_strategy.py",
    f"{_TF}.distributed.popdist_strategy.PopDistStrategy": "distributed/popdist_strategy.py L60",
    f"{_TF}.pipelining_ops": "tensorflow/python/ipu/ops/pipelining_ops.py (alias)",
    f"{_TF}.pipelining_ops.PipelineSchedule": "pipelining_ops.py L51",
    f"{_TF}.pipelining_ops.PipelineSchedule.Grouped": "pipelining_ops.py L51",
    f"{_TF}.pipelining_ops.PipelineSchedule.Interleaved": "pipelining_ops.py L51",
    f"{_TF}.pipelining_ops.PipelineSchedule.Sequential": "pipelining_ops.py L51",
    f"{_TF}.pipelining_ops.PipelineStageOptions": "pipelining_ops.py L346",
    f"{_TF}.pipelining_ops.RecomputationMode": "pipelining_ops.py L82",
    f"{_TF}.pipelining_ops.RecomputationMode.Auto": "pipelining_ops.py L82",
    f"{_TF}.pipelining_ops.recomputation_checkpoint": "pipelining_ops.py L1426",
    # Keras model extensions (functional_extensions.py; same in model_/sequential_extensions.py)
    "keras.Model.set_pipelining_options": "functional_extensions.py L180",
    "keras.Model.set_gradient_accumulation_options": "functional_extensions.py L108",
    "keras.Model.set_infeed_queue_options": "functional_extensions.py L266",
}
# Keyword arguments the exports pass (signatures in graphcore/tensorflow's ipu package).
TF_KWARGS: dict[str, set[str]] = {
    "keras.Model.set_pipelining_options": {
        "gradient_accumulation_steps_per_replica", "device_mapping", "pipeline_schedule",
        "recomputation_mode", "offload_weight_update_variables",
        "replicated_optimizer_state_sharding", "forward_propagation_stages_poplar_options",
        "backward_propagation_stages_poplar_options",
    },
    f"{_TF}.pipelining_ops.PipelineStageOptions": {"convolution_options", "matmul_options"},
    "keras.Model.set_gradient_accumulation_options": {
        "gradient_accumulation_steps_per_replica", "offload_weight_update_variables",
        "replicated_optimizer_state_sharding",
    },
    "keras.Model.set_infeed_queue_options": {"prefetch_depth"},
}  # fmt: skip

# --- Model constructors (public; not Graphcore API) ----------------------------------------------
MODEL_API: dict[str, str] = {
    "torchvision.models": "torchvision.models",
    **{
        f"torchvision.models.{n}": f"torchvision.models.{n}(*, weights=None, progress=True,"
        " **kwargs) (torchvision docs, Models and pre-trained weights)"
        for n in ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
                  "resnext50_32x4d", "resnext101_32x8d", "vit_b_16")
    },
    "torchvision.models.VisionTransformer": "torchvision/models/vision_transformer.py",
    "transformers.BertConfig": "Hugging Face transformers docs, BertConfig",
    "transformers.BertForMaskedLM": "Hugging Face transformers docs, BertForMaskedLM",
}  # fmt: skip
