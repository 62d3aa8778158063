"""The inference body of `run_with_optimum.py`: the model compiled as optimum-graphcore 0.7.1
compiles a pipeline's, but with the plan's batch, device iterations and replicas.

optimum's `pipeline(...)` (optimum/graphcore/pipelines/__init__.py, `get_poplar_executor`) calls
`ipu_config.eval()`, then sets `inference_device_iterations = 1` and (without a conditional
encoder) `inference_replication_factor = 1`, and is fed what the user passes: run as it is, it
runs micro-batch 1, one device iteration and one replica, not the simulated plan. This program
makes the same calls in the same order without those two lines (`to_pipelined` from
optimum/graphcore/modeling_utils.py, the model's `parallelize()`, `model.half()`,
`IPUConfig.to_options(for_inference=True)` from optimum/graphcore/ipu_configuration.py, which
sets `ShardedExecution` and the `inference_*` replicas and device iterations, and
`poptorch.inferenceModel(model.eval(), opts)`), and calls the model on one combined batch:
micro-batch x device iterations x replicas (PopTorch's combined batch, poptorch
python/__init__.py L322-331).
"""

from __future__ import annotations

from ipu_tune.models import ModelProfile
from ipu_tune.plan import ExecutionPlan

__all__ = ["eight_bit_training_note", "inference_lines"]

# ViTImageProcessor's default normalisation (transformers IMAGENET_STANDARD_MEAN/STD: 0.5).
_PIXEL_MEAN = _PIXEL_STD = 0.5


def _batch_inputs(task: str, profile: ModelProfile, dtype: str, eight_bit: bool) -> str:
    """The keyword arguments of one call on BATCH samples, as the model was profiled."""
    shape = ", ".join(["BATCH", *(str(d) for d in profile.input_shape)])
    if eight_bit:  # cast on the IPU (`_eight_bit_lines`)
        return f"pixel_values=torch.randint(256, ({shape}), dtype=torch.uint8)"
    if task == "image-classification":
        return f"pixel_values=torch.randn({shape}).to({dtype})"
    if task in ("audio-classification", "ctc"):
        return f"**{{model.main_input_name: torch.randn({shape}).to({dtype})}}"
    if task == "speech-seq2seq":  # the decoder's tokens, as many as profiled
        tokens = f"torch.randint(config.vocab_size, (BATCH, {profile.paired_tokens}))"
        return (f"**{{model.main_input_name: torch.randn({shape}).to({dtype})}},"
                f" decoder_input_ids={tokens}")
    ids = f"torch.randint(config.vocab_size, ({shape}))"
    if task == "seq2seq-lm":  # the decoder as long as the encoder, as profiled
        return f"input_ids=(ids := {ids}), decoder_input_ids=ids"
    return f"input_ids={ids}"


def _eight_bit_lines(dtype: str) -> list[str]:
    """uint8 pixels from the host, cast and normalised on the IPU, as simulated (8-bit I/O)."""
    return [
        "",
        "",
        "class Uint8Pixels(torch.nn.Module):  # 8-bit I/O: uint8 pixels cast on the IPU",
        "    def __init__(self, model): super().__init__(); self.model = model",
        "    def forward(self, pixel_values):",
        f"        x = (pixel_values.to({dtype}).div(255) - {_PIXEL_MEAN}) / {_PIXEL_STD}",
        "        return self.model(pixel_values=x)",
        "",
        "",
        "model = Uint8Pixels(model)",
    ]


def inference_lines(plan: ExecutionPlan, profile: ModelProfile, task: str,
                    eight_bit: bool) -> list[str]:
    """Compile the model for the plan's inference and call it on one combined batch."""
    fp16 = plan.model_fp16
    dtype = "torch.half" if fp16 else "torch.float"
    batch = plan.micro_batch_size * plan.device_iterations * plan.replication_factor
    inputs = _batch_inputs(task, profile, dtype, eight_bit)
    return [
        "# Not optimum's pipeline(...): it sets inference_device_iterations and"
        " inference_replication_factor to 1 and is fed one sample at a time",
        "# (optimum/graphcore/pipelines/__init__.py, get_poplar_executor). The same calls,"
        " keeping the plan's fields (optimum/graphcore/modeling_utils.py to_pipelined,",
        "# ipu_configuration.py IPUConfig.eval and to_options, which sets ShardedExecution):",
        "ipu_config.eval()  # the inference_* fields of ipu_config.json",
        "model = to_pipelined(model, ipu_config)",
        "model.parallelize()  # inference_layers_per_ipu: the plan's stages",
        *(["model.half()  # precision 16.16: fp16 weights, as pipeline(..., fp16=True) runs"]
          if fp16 else []),
        *(_eight_bit_lines(dtype) if eight_bit else []),
        "opts = ipu_config.to_options(for_inference=True)",
        "ipu_model = poptorch.inferenceModel(model.eval(), opts)",
        f"# One call: micro-batch {plan.micro_batch_size} x {plan.device_iterations} device"
        f" iterations x {plan.replication_factor} replica(s) (poptorch python/__init__.py"
        " L322-331).",
        f"BATCH = {batch}",
        f"outputs = ipu_model({inputs})",
    ]


def eight_bit_training_note(eight_bit: bool) -> list[str]:
    """Why the training program feeds float pixels where the plan simulated uint8 ones."""
    if not eight_bit:
        return []
    return [
        "# 8-bit I/O: the plan was simulated with uint8 pixels cast and normalised on the IPU"
        " (1 byte per element on the host stream).",
        "# IPUTrainer pipelines the Transformers model itself (to_pipelined, trainer.py) and"
        " feeds pixel_values to it as the dataset gives them,",
        "# with no hook to cast them on the IPU: this program feeds float pixels, which move"
        " more bytes per sample than simulated.",
        "# poptorch_options.py runs the 8-bit input as simulated (its IpuInput module).",
    ]
