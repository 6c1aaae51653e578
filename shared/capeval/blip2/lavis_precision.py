"""LAVIS's BLIP-2 image path on CUDA, on transformers' ``Blip2VisionModel`` weights.

LAVIS (the BLIP-2 code EnsembEval's BLIP2Score runs) converts the EVA ViT's conv/linear weights to fp16
(``convert_weights_to_fp16``), runs ``ln_vision(visual_encoder(image))`` under ``torch.cuda.amp.autocast(fp16)``
(``maybe_autocast``) and hands ``image_embeds.float()`` to the fp32 Q-Former. Under that autocast: conv, linear and
matmul run in fp16; LayerNorm and softmax in fp32; GELU in its input's dtype (fp16); ``torch.cat`` and ``+`` promote,
so the fp32 class token and position embedding keep the residual stream in fp32; the attention scales q before
q·kᵀ. :func:`lavis_image_embeds` writes those casts out, so the same numerics run on CPU too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LN_VISION_EPS = 1e-5  # LAVIS's ln_vision is a default-eps LayerNorm (transformers' post_layernorm uses the config's)
HALF = torch.float16


def _linear(x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    bias = None if layer.bias is None else layer.bias.to(HALF)
    return F.linear(x.to(HALF), layer.weight.to(HALF), bias)


def _layer_norm(x: torch.Tensor, norm: torch.nn.LayerNorm, eps: float) -> torch.Tensor:
    return F.layer_norm(x.float(), norm.normalized_shape, norm.weight.float(), norm.bias.float(), eps)


def _attention(x: torch.Tensor, attn) -> torch.Tensor:
    batch, tokens, width = x.shape
    qkv = _linear(x, attn.qkv).reshape(batch, tokens, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0] * attn.scale, qkv[1], qkv[2]
    weights = (q @ k.transpose(-2, -1)).float().softmax(dim=-1)
    out = (weights.to(HALF) @ v).transpose(1, 2).reshape(batch, tokens, width)
    return _linear(out, attn.projection)


def lavis_image_embeds(vision_model, pixels: torch.Tensor) -> torch.Tensor:
    """``ln_vision(visual_encoder(pixels)).float()`` with LAVIS's CUDA numerics: (n, tokens, width) float32."""
    embeddings = vision_model.embeddings
    conv = embeddings.patch_embedding
    x = F.conv2d(pixels.to(HALF), conv.weight.to(HALF), None if conv.bias is None else conv.bias.to(HALF),
                 stride=conv.stride)
    x = x.flatten(2).transpose(1, 2)
    cls = embeddings.class_embedding.float().expand(x.shape[0], -1, -1)
    x = torch.cat((cls, x), dim=1) + embeddings.position_embedding[:, : x.shape[1] + 1].float()
    for layer in vision_model.encoder.layers:
        x = x + _attention(_layer_norm(x, layer.layer_norm1, layer.layer_norm1.eps), layer.self_attn)
        hidden = _linear(_layer_norm(x, layer.layer_norm2, layer.layer_norm2.eps), layer.mlp.fc1)
        x = x + _linear(layer.mlp.activation_fn(hidden), layer.mlp.fc2)
    return _layer_norm(x, vision_model.post_layernorm, LN_VISION_EPS)
