"""The PopTorch program of a model that reads images with token ids, as profiled
(`ipu_tune.models`' image-text and vision-language calls):
- two towers (CLIP's, ALIGN's, BLIP's): each image streams in with its caption's ids, the model
  returns the image-text similarity logits, and training takes CLIP's symmetric contrastive
  loss;
- a vision-language model (LLaVA, PaliGemma): each image streams in with its ids, whose image
  tokens mark the places its features take; the model returns next-token logits, and training
  takes the next-token loss on the text.
"""

from __future__ import annotations

from ipu_tune.models import IMAGE_TOKEN_KEYS, ModelProfile

__all__ = ["caption_tokens", "image_text_forward", "image_text_model"]


def caption_tokens(profile: ModelProfile | None) -> int:
    """The token ids beside each image (0: a model of images alone)."""
    if profile is None or profile.input_kind != "image":
        return 0
    return profile.paired_tokens


def image_text_model(tokens: int, spliced: bool) -> list[str]:
    """A module taking (pixels, ids), as the data loader yields them; `spliced`: a
    vision-language model's, else two towers'."""
    if spliced:
        doc = (f"Images and their {tokens} token ids each (as simulated), the image token at"
               " the places its features take: the next-token logits.")
        call = "self.model(pixel_values=pixels, input_ids=ids).logits"
        keys = ", ".join(repr(k) for k in IMAGE_TOKEN_KEYS)
        token = ["# The token its config names for the image's places: no targets of the loss.",
                 f"for key in ({keys}):",
                 "    IMAGE_TOKEN_ID = getattr(model.config, key, None)",
                 "    if IMAGE_TOKEN_ID is not None:",
                 "        break"]
    else:
        doc = (f"Images and their captions ({tokens} token ids each, as simulated): the"
               " image-text similarity logits, micro-batch x micro-batch.")
        call = "self.model(pixel_values=pixels, input_ids=ids).logits_per_image"
        token = []
    return [
        "",
        "",
        "class ImageText(torch.nn.Module):",
        f'    """{doc}"""',
        "",
        "    def __init__(self, model: torch.nn.Module) -> None:",
        "        super().__init__()",
        "        self.model = model",
        "",
        "    def forward(self, pixels: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:",
        f"        return {call}",
        "",
        "",
        *token,
        "model = ImageText(model)",
    ]


def image_text_forward(spliced: bool) -> list[str]:
    """The training forward. Two towers: CLIP's symmetric contrastive loss, each image's match
    its own caption, the same position in the micro-batch, and each caption's its own image
    (Radford et al. 2021, Figure 3). A vision-language model: token t + 1 predicted from the
    image and the tokens up to t, the image's places no targets (Liu et al. 2023, "Visual
    Instruction Tuning", section 4)."""
    if spliced:
        return [
            "    def forward(self, x, ids):",
            "        out = self.model(x, ids)",
            "        # Next-token loss on the text: the image's places are no targets (-100).",
            "        labels = ids.long().masked_fill(ids == IMAGE_TOKEN_ID, -100)",
            "        return out, self.criterion(out[:, :-1].reshape(-1, out.shape[-1]),"
            " labels[:, 1:].reshape(-1))",
        ]
    return [
        "    def forward(self, x, ids):",
        "        out = self.model(x, ids)",
        "        # CLIP's symmetric loss: each image against the captions, each caption against"
        " the images, its own pair the match (the mean of the two sides).",
        "        pairs = torch.arange(out.shape[0]).repeat(2)",
        "        return out, self.criterion(torch.cat((out, out.t())), pairs)",
    ]
