"""The PopTorch program of an image-text model (CLIP's, ALIGN's, BLIP's two towers): each
image streams in with its caption's token ids, the model returns the image-text similarity
logits, and training takes CLIP's symmetric contrastive loss, as profiled
(`ipu_tune.models`' image-text call)."""

from __future__ import annotations

from ipu_tune.models import ModelProfile

__all__ = ["caption_tokens", "image_text_forward", "image_text_model"]


def caption_tokens(profile: ModelProfile | None) -> int:
    """The token ids of each image's caption (0: not an image-text model)."""
    if profile is None or profile.input_kind != "image":
        return 0
    return profile.paired_tokens


def image_text_model(tokens: int) -> list[str]:
    """A module taking (pixels, caption ids), as the data loader yields them."""
    return [
        "",
        "",
        "class ImageText(torch.nn.Module):",
        f'    """Images and their captions ({tokens} token ids each, as simulated): the image-text'
        ' similarity logits, micro-batch x micro-batch."""',
        "",
        "    def __init__(self, model: torch.nn.Module) -> None:",
        "        super().__init__()",
        "        self.model = model",
        "",
        "    def forward(self, pixels: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:",
        "        return self.model(pixel_values=pixels, input_ids=ids).logits_per_image",
        "",
        "",
        "model = ImageText(model)",
    ]


def image_text_forward() -> list[str]:
    """The training forward: CLIP's symmetric contrastive loss, each image's match its own
    caption, the same position in the micro-batch, and each caption's its own image (Radford et
    al. 2021, Figure 3)."""
    return [
        "    def forward(self, x, ids):",
        "        out = self.model(x, ids)",
        "        # CLIP's symmetric loss: each image against the captions, each caption against"
        " the images, its own pair the match (the mean of the two sides).",
        "        pairs = torch.arange(out.shape[0]).repeat(2)",
        "        return out, self.criterion(torch.cat((out, out.t())), pairs)",
    ]
