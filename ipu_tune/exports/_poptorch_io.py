"""The PopTorch program's input side and optimizer: input wrapper, loss, data loader, model."""

from __future__ import annotations

from ipu_tune.config import EvalConfig
from ipu_tune.models import ModelProfile

from ._context import ExportContext
from ._docs import cite
from ._image_text import caption_tokens, image_text_forward, image_text_model
from ._model_source import masked_zoo_bert, zoo_name

__all__ = ["input_lines", "optimizer_lines"]

# Adam-family accumulator types for a half-precision model (PopTorch "Optimizers" >
# "Accumulation types": float16 accumulators, float32 second moment).
_FP16_ADAM = (
    "loss_scaling=1000, accum_type=torch.float16,"
    " first_order_momentum_accum_type=torch.float16,"
    " second_order_momentum_accum_type=torch.float32"
)


def loss_family(cfg: EvalConfig) -> str:
    """The loss the model's family trains with: causal-lm (shifted labels), masked-lm and
    token-classification (one label per position, Hugging Face output), question-answering
    (the answer span's start and end position), classification (one label per sample, audio
    classification too), feature-extraction (a base model's features under a stand-in loss:
    the user's objective goes there), ctc (CTC over the encoder's frames), speech-seq2seq
    (the decoder's tokens), image-text-to-text (a vision-language model's next tokens after
    its image)."""
    if zoo_name(cfg) in ("bert_base", "bert_large"):
        return "masked-lm"
    from ipu_tune.models import hf_identity, hf_source

    source = hf_source(cfg.model)
    if source is None:
        return "classification"
    task = hf_identity(source)[1]
    if task in ("causal-lm", "masked-lm", "token-classification", "question-answering",
                "feature-extraction", "ctc", "speech-seq2seq", "image-text-to-text"):
        return task
    return "seq2seq-lm" if task == "seq2seq-lm" else "hf-classification"


# (mean, std) per channel: ImageNet's (torchvision's reference transforms) and CIFAR-10's
# training set (50,000 images, pixel values in [0, 1]).
_STATS = {
    "imagenet": ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    "cifar10": ([0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]),
}


def _audio_overlap() -> list[str]:
    """The input wrapper of an audio model whose input stream overlaps compute (I/O tiles). A
    speech-seq2seq model also takes its decoder's tokens (`labels` to train, `decoder_input_ids`
    to infer): they pass through to it."""
    return ["", "", "class IpuInput(torch.nn.Module):",
            '    """What happens to the input on the IPU before the model."""', "",
            "    def __init__(self, model: torch.nn.Module) -> None:",
            "        super().__init__()", "        self.model = model", "",
            "    def forward(self, audio, **decoder):",
            "        audio = poptorch.set_overlap_for_input("
            "audio, poptorch.OverlapMode.OverlapDeviceIterationLoop)",
            "        return self.model(audio, **decoder)", "", "", "model = IpuInput(model)"]


def _input_wrapper(cfg: EvalConfig, eight_bit: bool, overlap: bool,
                   captions: bool = False) -> list[str]:
    """The on-IPU input module: the overlap of the input stream, 8-bit pixels' cast and
    normalisation; an image-text model's caption ids pass through (`captions`)."""
    text, rest = (", *text: torch.Tensor", ", *text") if captions else ("", "")
    channels = cfg.model.input_shape[0] if cfg.model.input_shape else 3
    # Per-channel statistics of the dataset the model trains on (CIFAR-10's own training-set
    # values, else ImageNet's as torchvision's models expect); 0.5 for other channel counts.
    mean, std = _STATS["cifar10" if cfg.model.dataset.name == "cifar10" else "imagenet"]
    if channels != 3:
        mean, std = [0.5] * channels, [0.5] * channels
    out = [
        "",
        "",
        "class IpuInput(torch.nn.Module):",
        '    """What happens to the input on the IPU before the model."""',
        "",
        "    def __init__(self, model: torch.nn.Module, dtype: torch.dtype) -> None:",
        "        super().__init__()",
        "        self.model = model",
        "        self.dtype = dtype",
        "        # Dataset statistics (ImageNet's here): replace them with your own.",
        f'        self.register_buffer("mean", torch.tensor({mean!r}).view(-1, 1, 1))',
        f'        self.register_buffer("std", torch.tensor({std!r}).view(-1, 1, 1))',
        "",
        f"    def forward(self, img: torch.Tensor{text}) -> torch.Tensor:",
    ]
    if overlap:
        out.append(
            "        img = poptorch.set_overlap_for_input("
            "img, poptorch.OverlapMode.OverlapDeviceIterationLoop)"
        )
    if eight_bit:
        out += [
            "        # uint8 pixels arrive from the host; cast and normalise here.",
            "        x = img.to(self.dtype).div(255)",
            "        x = (x - self.mean.to(self.dtype)) / self.std.to(self.dtype)",
            f"        return self.model(x{rest})",
        ]
    else:
        out.append(f"        return self.model(img{rest})")
    return [*out, "", "", "model = IpuInput(model, INPUT_DTYPE)"]


# BertForMaskedLM with its head on the masked positions only, which the data puts first in each
# sequence (Graphcore's BERT; `model.kwargs.masked_positions`): the graph ipu-tune simulated.
_MASKED_POSITIONS = [
    "", "", "class MaskedPositions(torch.nn.Module):",
    '    """The encoder on every token, the MLM head on the first MASKED_POSITIONS."""', "",
    "    def __init__(self, model: torch.nn.Module) -> None:",
    "        super().__init__()", "        self.model = model", "",
    "    def forward(self, x):",
    "        hidden = self.model.bert(x).last_hidden_state[:, :MASKED_POSITIONS]",
    "        return self.model.cls(hidden)", "", "",
    "model = MaskedPositions(model)",
]


def _loss_wrapper(cfg: EvalConfig, masked: bool) -> list[str]:
    """`masked`: the model is `MaskedPositions` (its output: the scores; the labels of those
    positions)."""
    family = loss_family(cfg)
    hugging_face = family != "classification" and not masked
    span: list[str] = []
    logits = "self.model(x).logits" if hugging_face else "self.model(x)"
    if family == "seq2seq-lm":  # decoder inputs as long as the encoder's, as profiled
        logits = "self.model(input_ids=x, decoder_input_ids=x).logits"
    if family == "causal-lm":  # predict token t+1 from tokens up to t: shift by one
        loss = ("self.criterion(out[:, :-1].reshape(-1, out.shape[-1]),"
                " labels[:, 1:].reshape(-1))")
    elif family in ("masked-lm", "seq2seq-lm", "token-classification"):  # a label per position
        if masked:
            span = ["        labels = labels[:, :MASKED_POSITIONS]  # those the head ran on"]
        loss = "self.criterion(out.reshape(-1, out.shape[-1]), labels.reshape(-1))"
    elif family == "question-answering":  # QuestionAnsweringModelOutput: start and end logits
        logits = "self.model(x)"
        span = ["        start, end = labels[:, 0], labels[:, 1]  # the answer span's tokens"]
        loss = "self.criterion(out.start_logits, start) + self.criterion(out.end_logits, end)"
    elif family == "ctc":  # CTC over the encoder's frames; labels: character ids, 0 is blank
        span = ["        log_probs = out.float().log_softmax(-1).transpose(0, 1)  # frames first",
                "        frames = torch.full((out.shape[0],), out.shape[1], dtype=torch.int32)",
                "        chars = torch.full((out.shape[0],), labels.shape[1], dtype=torch.int32)"]
        loss = "self.criterion(log_probs, labels, frames, chars)"
    elif family == "speech-seq2seq":  # Transformers shifts the labels into the decoder's input
        logits = "self.model(x, labels=labels)"
        span = ["        out, loss = out.logits, out.loss  # cross-entropy over the tokens"]
        loss = "loss"
    elif family == "feature-extraction":  # no head: the features, and your objective on them
        logits = "self.model(x).last_hidden_state"
        loss = "out.float().pow(2).mean()  # a stand-in: your objective on the features"
    else:
        loss = "self.criterion(out, labels)"
    criterion = ("torch.nn.CTCLoss(zero_infinity=True)" if family == "ctc"
                 else "torch.nn.CrossEntropyLoss()")
    return _model_with_loss([
        # No `X | None` annotations: the Poplar SDK's Python may predate 3.10.
        "    def forward(self, x, labels=None):",
        f"        out = {logits}",
        "        if labels is None:",
        "            return out",
        *span,
        f"        return out, {loss}",
    ], criterion)


def _model_with_loss(forward: list[str], criterion: str) -> list[str]:
    """The module PopTorch trains: the model, and its loss by `forward`."""
    return [
        "",
        "",
        "class ModelWithLoss(torch.nn.Module):",
        "    def __init__(self, model: torch.nn.Module, criterion: torch.nn.Module) -> None:",
        "        super().__init__()",
        "        self.model = model",
        "        self.criterion = criterion",
        "",
        *forward,
        "",
        "",
        f"model = ModelWithLoss(model, {criterion})",
    ]


def input_lines(
    ctx: ExportContext, overlap: bool
) -> list[str]:
    """Input dtype, the on-IPU input wrapper, the loss wrapper, the model cast, the loader."""
    plan = ctx.plan
    cfg = ctx.config
    kind = ctx.input_kind
    image = kind == "image"
    # Token ids stay integers whatever the precision; pixels and audio follow it.
    in_dtype = "torch.int32" if kind == "tokens" else (
        "torch.float16" if plan.input_fp16 else "torch.float32")
    model_dtype = "half" if plan.model_fp16 else "float"
    eight_bit = plan.eight_bit_io and ctx.runs("plan.eight_bit_io")  # pixels, streamed
    out = [
        f"# Precision {plan.precision}: input {in_dtype}, model {model_dtype}; fp16 halves the"
        f" bytes of weights and activations and speeds up conv/matmul ({cite('precision')}).",
        f"INPUT_DTYPE = {in_dtype}",
        f"# 8-bit I/O: {eight_bit}. " + ctx.facts.io_sentence(eight_bit, tokens=kind == "tokens"),
    ]
    if plan.eight_bit_io and not eight_bit:
        what = ("token ids" if kind == "tokens" else "audio samples or features" if not image
                else "synthetic data made on the IPU, which no stream carries")
        out.append(f"# (8-bit I/O applies to image pixels sent by the host; this model reads"
                   f" {what}: plan.eight_bit_io=true changes nothing.)")
    captions = caption_tokens(ctx.profile)  # an image-text model's, beside each image
    spliced = loss_family(cfg) == "image-text-to-text"  # a vision-language model's ids
    if captions:
        out += image_text_model(captions, spliced)
    if eight_bit or (overlap and image):
        out += _input_wrapper(cfg, eight_bit, overlap, captions > 0)
    elif overlap and kind == "audio":
        out += _audio_overlap()
    if not plan.training and loss_family(cfg) == "speech-seq2seq":
        out.append("# Call it with the decoder's input tokens as simulated: "
                   "poptorch_model(features, decoder_input_ids=ids).")
    masked = masked_zoo_bert(cfg, ctx.profile)
    if masked:
        out += _MASKED_POSITIONS
    if plan.training:
        out += (_model_with_loss(image_text_forward(spliced), "torch.nn.CrossEntropyLoss()")
                if captions else _loss_wrapper(cfg, masked))
    out.append(f"model = model.{model_dtype}()")
    host = (
        "PILToTensor only (uint8, no ConvertImageDtype/Normalize)"
        if eight_bit
        else (f"tensors of {in_dtype}" if image else "token ids (torch.int32)"
              if kind == "tokens" else _audio_host(ctx.profile, in_dtype, plan.training))
    ) + (f", each with its {captions} token ids (torch.int32), the image token at the places"
         " its features take (as the model's processor expands it)" if spliced else
         f", each with its caption's {captions} token ids (torch.int32)" if captions else "")
    return [*out, "", *_loader_lines(ctx, host)]


def _loader_lines(ctx: ExportContext, host: str) -> list[str]:
    """The data loader of the plan, and what its dataset yields (`host`)."""
    plan = ctx.plan
    mode = "Async" if plan.async_dataloader else "Sync"
    return [
        f"# Data loader: {mode.lower()} with {plan.dataloader_workers} worker(s); an"
        " asynchronous loader overlaps host preprocessing with the device"
        f" ({cite('dataloader')}). {ctx.facts.phase_sentence('host_preprocess')}",
        f"# The dataset yields {host}.",
        *_packing_lines(ctx.config.model.dataset.sequences_per_pack),
        "",
        "",
        "def make_dataloader(dataset: torch.utils.data.Dataset) -> poptorch.DataLoader:",
        "    return poptorch.DataLoader(",
        "        opts,",
        "        dataset,",
        f"        batch_size={plan.micro_batch_size},  # the micro-batch",
        "        shuffle=True,",
        "        drop_last=True,",
        f"        num_workers={plan.dataloader_workers},",
        f"        mode=poptorch.DataLoaderMode.{mode},",
        "    )",
    ]


def _audio_host(profile: ModelProfile | None, in_dtype: str, training: bool) -> str:
    """What the dataset of an audio model yields per sample (its shape as profiled)."""
    shape = list(profile.input_shape) if profile is not None else []
    what = "waveforms" if len(shape) == 1 else "features"
    tokens = profile.paired_tokens if profile is not None else 0
    role = "label tokens" if training else "decoder input tokens"
    labels = f", with {tokens} {role}" if tokens else ""
    return f"{what} of shape {shape} as {in_dtype}{labels}"


def _packing_lines(per_pack: float) -> list[str]:
    """How the simulated throughput's packed sequences reach the model."""
    if per_pack == 1.0:
        return []
    return [f"# Packed sequences, {per_pack:g} per pack on average as simulated (samples/s counts"
            " sequences): pack them as in Krell et al. 2021, \"Efficient Sequence Packing",
            "# without Cross-contamination\" (position ids restart at each sequence; an attention"
            " mask keeps the sequences of a pack apart)."]


def optimizer_lines(ctx: ExportContext) -> list[str]:
    plan = ctx.plan
    if not plan.training:
        return ["poptorch_model = poptorch.inferenceModel(model, opts)"]
    fp16 = plan.model_fp16
    name = plan.optimizer
    if name in ("adam", "adamw", "lamb"):
        cls = {"adam": "Adam", "adamw": "AdamW", "lamb": "LAMB"}[name]
        extra = f", {_FP16_ADAM}" if fp16 else ""
        call = f"poptorch.optim.{cls}(model.parameters(), lr=1e-3{extra})"
    else:
        momentum = ", momentum=0.9" if name == "momentum" else ""
        extra = ""
        if fp16:
            extra = ", loss_scaling=1000, accum_type=torch.float16"
            if name == "momentum":
                extra += ", velocity_accum_type=torch.float16"
        call = f"poptorch.optim.SGD(model.parameters(), lr=0.01{momentum}{extra})"
    why = (
        "fp16 accumulators with loss scaling for the half-precision model"
        if fp16
        else "fp32 model: PopTorch's default accumulator types"
    )
    return [
        "",
        f"# Optimizer {name}: {why} ({cite('optimizer')})."
        f" {ctx.facts.category_sentence('optimizer_state')}",
        f"optimizer = {call}",
        "poptorch_model = poptorch.trainingModel(model, opts, optimizer=optimizer)",
    ]
