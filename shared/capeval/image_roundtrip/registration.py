"""Image round-trip registration: the SD-Turbo text-to-image weights, the ViT-g/14 CLIP and DINOv2 image encoders
and the ``image_roundtrip`` scorer."""

from __future__ import annotations

from capeval.backbones.registration import DINOV2_FILES
from capeval.core.constants import CLIP_FILES
from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import register_scorer

DIFFUSERS_FILES = (
    "model_index.json",
    "scheduler/scheduler_config.json",
    "text_encoder/config.json",
    "text_encoder/model.safetensors",
    "tokenizer/merges.txt",
    "tokenizer/special_tokens_map.json",
    "tokenizer/tokenizer_config.json",
    "tokenizer/vocab.json",
    "unet/config.json",
    "unet/diffusion_pytorch_model.safetensors",
    "vae/config.json",
    "vae/diffusion_pytorch_model.safetensors",
)

register(WeightSpec(
    name="sd-turbo", repo_id="stabilityai/sd-turbo", revision="b261bac6fd2cf515557d5d0707481eafa0485ec2",
    files=DIFFUSERS_FILES, format="diffusers", license="other (Stability AI Community License)",
    source_url="https://huggingface.co/stabilityai/sd-turbo",
    description="SD-Turbo: adversarially distilled Stable Diffusion 2.1, 1-4 steps, no guidance, 512 px",
))
register(WeightSpec(
    # the commit MTEB's model registry pins for this repository
    name="laion-clip-vit-g-14", repo_id="laion/CLIP-ViT-g-14-laion2B-s34B-b88K",
    revision="15efd0f6ac0c40c0f9da7becca03c974d7012604", files=CLIP_FILES,
    format="open_clip", license="mit", source_url="https://github.com/mlfoundations/open_clip",
    description="OpenCLIP ViT-g/14 trained on LAION-2B (capeval's default image encoder; the paper's is EVA's ViT-g/14)",
    options={"model_cfg": {"quick_gelu": False}},
))
register(WeightSpec(
    name="dinov2-small", repo_id="facebook/dinov2-small", revision="ed25f3a31f01632728cabb09d1542f84ab7b0056",
    files=DINOV2_FILES, format="transformers", license="apache-2.0",
    source_url="https://github.com/facebookresearch/dinov2", description="DINOv2 ViT-S/14 self-supervised image encoder",
))


register_scorer("image_roundtrip", factory="capeval.image_roundtrip.scorer:ImageRoundTripScorer", images="required",
                references="unused",
                help="Image round-trip: text-to-image render of the caption vs the original image (Huang et al. 2024)",
                card="capeval.image_roundtrip:module_cards.toml")
