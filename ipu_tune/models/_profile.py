"""What the model is: per-op and per-block costs traced from torch, per sample.

Every count is for one sample (one image, one sequence); the simulator multiplies by the
micro-batch size. Frozen so that profiles can be cached, hashed and shared between trials.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ipu_tune.knobs import ModelFacts

__all__ = ["DEFAULT_SEQUENCE_LENGTH", "INPUT_KINDS", "INPUT_SOURCES", "OP_KINDS", "BlockProfile",
           "ModelProfile", "OpProfile"]

# A token model's sequence length when the config gives none: BERT pre-training phase 1
# (Devlin et al. 2019, appendix A.2).
DEFAULT_SEQUENCE_LENGTH = 128

# What a model reads (`ModelProfile.input_kind`): "image", pixels (8-bit I/O applies);
# "tokens", integer ids; "audio", floats (a waveform's samples or spectrogram features), streamed
# in the model's precision like pixels without 8-bit I/O.
INPUT_KINDS = ("image", "tokens", "audio")

# Where a model's input comes from (`ModelProfile.input_source`).
INPUT_SOURCES = ("dataset", "generated", "synthetic")

OP_KINDS = (
    "conv",
    "matmul",
    "norm",
    "elementwise",
    "pool",
    "embedding",
    "softmax",
    "loss",
    "other",
)


@dataclass(frozen=True)
class OpProfile:
    name: str  # leaf module path (torch naming), e.g. "layer3.8.conv1"
    kind: str  # one of OP_KINDS
    block: int  # index into ModelProfile.block_stats
    forward_flops: float  # per sample (torch.utils.flop_counter)
    backward_flops: float  # per sample
    parameters: int
    output_elements: int  # per sample
    # Elements per sample this op keeps alive for the backward pass (0 where torch saves none).
    saved_elements: int
    # Matmul view of conv/matmul ops (M per sample, K, N); zeros for other kinds.
    # Tiling and the available-memory-proportion trade-off are decided by these.
    m_per_sample: int = 0
    k: int = 0
    n: int = 0
    # K x N second operands per sample when they are activations (a batched matmul: attention
    # multiplies each sample's keys and values, one matrix per head); 0 where the second
    # operand is a weight that every sample shares (a conv, a Linear).
    rhs_per_sample: float = 0.0
    # A leaf module's class (`module_class`: "torch.nn.modules.conv.Conv2d"); "" for an op that
    # is a torch function outside leaf modules. Read by the batch-norm fold (`conv_norm_folds`).
    module_class: str = ""
    # The op that alone reads this op's output in forward ("": none, or more than one): a
    # convolution whose output also feeds a skip connection has none, and does not fold.
    only_reader: str = ""
    # A convolution's groups (torch's `groups`: depthwise = channels); 1 for every other op.
    # N / groups output channels per group decide how much of the AMP a conv fills.
    groups: int = 1


@dataclass(frozen=True)
class BlockProfile:
    """A named module where a pipeline stage may begin, with totals of its ops."""

    name: str
    first_op: int  # ops[first_op:last_op] belong to this block
    last_op: int
    forward_flops: float
    backward_flops: float
    parameters: int
    # Elements per sample of the block's output: what crosses an IPU-Link at a stage boundary.
    output_elements: int
    saved_elements: int  # activation elements kept for backward, per sample
    max_live_elements: int  # peak transient elements inside the block, per sample


@dataclass(frozen=True)
class ModelProfile:
    name: str
    input_shape: tuple[int, ...]
    num_classes: int
    input_kind: str  # one of INPUT_KINDS
    ops: tuple[OpProfile, ...]
    block_stats: tuple[BlockProfile, ...]
    # The host side of the input: bytes of one stored sample and, when the dataset config says,
    # host seconds to load and augment it (None: the host preset's calibrated default).
    sample_bytes: int = 0
    preprocess_s_per_sample: float | None = None
    torch_version: str = ""
    # Where the input comes from (`INPUT_SOURCES`): "dataset", a data pipeline on the host;
    # "generated", random samples in host memory (copied to the IPU, nothing else on the host);
    # "synthetic", made on the IPU (no host-device transfer). `ipu_tune.config.SYNTHETIC`.
    input_source: str = "dataset"
    # Dataset samples (sequences) per model input: a token model fed packed sequences (Krell et
    # al. 2021) takes packs of this many sequences on average; 1.0 otherwise. Every cost above is
    # per input (per pack); the simulator counts samples/s in sequences.
    sequences_per_pack: float = 1.0
    # Token ids per sample that travel with the main input (int32): a speech-seq2seq model's
    # decoder ids beside its audio, an image-text model's caption beside its pixels; 0: none.
    paired_tokens: int = 0
    # An output head tied to the input embeddings whose ops the profile charged to another
    # block than its own (`fold_head`): its module name, and the block whose stage runs it
    # (optimum-graphcore's IPU0, or Whisper's decoder layer 0). Empty: no such head. The
    # simulator and every export read where it runs from here (`head_placement`).
    tied_head: str = ""
    tied_head_block: str = ""
    # Why the step was traced on the CPU, in PyTorch's words (an operator whose output shape
    # depends on the input's values, a value read back to the host): what the meta device
    # could not run, and PopTorch, which compiles a graph of fixed shapes before it runs, may
    # refuse too (the exports say so). Empty: traced on the meta device.
    meta_failure: str = ""

    @property
    def parameters(self) -> int:
        return sum(b.parameters for b in self.block_stats)

    @property
    def forward_flops(self) -> float:
        return sum(b.forward_flops for b in self.block_stats)

    @property
    def backward_flops(self) -> float:
        return sum(b.backward_flops for b in self.block_stats)

    @property
    def blocks(self) -> list[str]:
        """Module names where a pipeline stage may begin, in execution order (Contract)."""
        return [b.name for b in self.block_stats]

    @property
    def input_elements(self) -> int:
        n = 1
        for d in self.input_shape:
            n *= d
        return n

    @property
    def vocabulary_ops(self) -> tuple[int, ...]:
        """Index of the op that maps the hidden width back to the vocabulary: the last
        conv/matmul whose K x N weight has an embedding table's size, of N >= K rows (a
        language model's output head, tied to the word embedding or of its shape; the last, so
        a layer that happens to match the position table is not taken). What
        `plan.embedding_serialization` slices, as optimum-graphcore's SerializedLinear does;
        empty for a model of no embedding or no such head."""
        tables = {o.parameters for o in self.ops if o.kind == "embedding"}
        found = [i for i, o in enumerate(self.ops)
                 if o.kind in ("conv", "matmul") and o.k * o.n in tables and o.n >= o.k
                 and o.rhs_per_sample == 0]
        return tuple(found[-1:])

    @property
    def facts(self) -> ModelFacts:
        """What the knobs' needs read of the model (`ipu_tune.knobs.moot_keys`)."""
        return ModelFacts(input_kind=self.input_kind, vocabulary=bool(self.vocabulary_ops))

    def block_index(self, name: str) -> int:
        for i, b in enumerate(self.block_stats):
            if b.name == name:
                return i
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["parameters"] = self.parameters
        d["forward_flops"] = self.forward_flops
        d["blocks"] = self.blocks
        return d
