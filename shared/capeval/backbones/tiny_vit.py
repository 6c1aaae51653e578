"""TinyViT image encoder for Segment Anything: MobileSAM's small "vit_t" encoder, written for capeval.

MobileSAM (Zhang et al. 2023) keeps SAM's prompt encoder and mask decoder and replaces the ViT image encoder by a
TinyViT-5M distilled from it. This module rebuilds that encoder so that its ``state_dict`` keys are those of the
official ``mobile_sam.pt`` under ``image_encoder.`` (``patch_embed.seq.*``, ``layers.{i}.blocks.{j}.*``,
``layers.{i}.downsample.*``, ``norm_head``, ``head``, ``neck.*``), and its output for a 1024×1024 input is the
(B, 256, 64, 64) embedding SAM's mask decoder expects:

- stem: two stride-2 3×3 conv+BN (GELU between) → 1/4 resolution;
- stage 0: MBConv blocks (1×1 expand, depthwise 3×3, 1×1 project with BN, residual, GELU);
- stages 1-3: blocks of window attention with a learned bias per head and per relative offset (|Δy|, |Δx|)
  inside the window (windows padded with zeros at the bottom/right, no mask), residual; a depthwise 3×3
  conv+BN; a pre-norm MLP with residual;
- patch merging between stages (1×1 conv, depthwise 3×3 with stride, 1×1 conv, BN after each); MobileSAM's
  last merging keeps the resolution (stride 1), so the output grid is 1/16 of the input like SAM's ViT;
- neck: 1×1 conv → LayerNorm2d → 3×3 conv → LayerNorm2d to ``out_chans`` (256), as SAM's ViT neck.

``norm_head`` and ``head`` (TinyViT's classifier) are kept only because the official checkpoint holds them;
they are not used. ``num_heads[0]`` and ``window_sizes[0]`` belong to the convolutional first stage and are
unused, as in the original.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import torch
import torch.nn.functional as F
from torch import nn

# MobileSAM's encoder (build_sam_vit_t): TinyViT-5M at 1024 px
MOBILE_SAM_ENCODER: Dict = {
    "embed_dims": [64, 128, 160, 320], "depths": [2, 2, 6, 2], "num_heads": [2, 4, 5, 10],
    "window_sizes": [7, 7, 14, 7], "mlp_ratio": 4.0, "mbconv_expand_ratio": 4.0, "local_conv_size": 3,
    "merge_strides": [2, 2, 1], "num_classes": 1000,
}
# the official code gives the patch merging into these widths stride 1 (TinyViT-5M/11M/21M's last stage)
_STRIDE_ONE_WIDTHS = (320, 448, 576)


def official_merge_strides(embed_dims: Sequence[int]) -> List[int]:
    """Strides of the patch mergings as MobileSAM's TinyViT chooses them from the stage widths."""
    return [1 if out in _STRIDE_ONE_WIDTHS else 2 for out in embed_dims[1:]]


class ConvBN(nn.Sequential):
    """Conv2d without bias followed by BatchNorm2d (keys ``c.*``, ``bn.*``)."""

    def __init__(self, in_chans: int, out_chans: int, kernel: int = 1, stride: int = 1, padding: int = 0,
                 groups: int = 1, bn_weight: float = 1.0):
        super().__init__()
        self.add_module("c", nn.Conv2d(in_chans, out_chans, kernel, stride, padding, groups=groups, bias=False))
        self.add_module("bn", nn.BatchNorm2d(out_chans))
        nn.init.constant_(self.bn.weight, bn_weight)
        nn.init.zeros_(self.bn.bias)


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of a (B, C, H, W) map (SAM's neck norm)."""

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        return self.weight[:, None, None] * ((x - mean) / torch.sqrt(var + self.eps)) + self.bias[:, None, None]


class PatchEmbed(nn.Module):
    def __init__(self, in_chans: int, dim: int):
        super().__init__()
        self.seq = nn.Sequential(ConvBN(in_chans, dim // 2, 3, 2, 1), nn.GELU(), ConvBN(dim // 2, dim, 3, 2, 1))

    def forward(self, x):
        return self.seq(x)


class MBConv(nn.Module):
    """Inverted residual: 1×1 expand, depthwise 3×3, 1×1 project (zero-initialised BN), + input, GELU."""

    def __init__(self, dim: int, expand_ratio: float):
        super().__init__()
        hidden = int(dim * expand_ratio)
        self.conv1 = ConvBN(dim, hidden)
        self.conv2 = ConvBN(hidden, hidden, 3, 1, 1, groups=hidden)
        self.conv3 = ConvBN(hidden, dim, bn_weight=0.0)

    def forward(self, x):
        y = F.gelu(self.conv1(x))
        y = F.gelu(self.conv2(y))
        return F.gelu(self.conv3(y) + x)


class PatchMerging(nn.Module):
    def __init__(self, dim: int, out_dim: int, stride: int):
        super().__init__()
        self.conv1 = ConvBN(dim, out_dim)
        self.conv2 = ConvBN(out_dim, out_dim, 3, stride, 1, groups=out_dim)
        self.conv3 = ConvBN(out_dim, out_dim)

    def forward(self, x):
        return self.conv3(F.gelu(self.conv2(F.gelu(self.conv1(x)))))


def _offset_index(window: int) -> torch.Tensor:
    """(N, N) index of the relative offset (|Δy|, |Δx|) between the tokens of a window, numbered |Δy|·w + |Δx|.

    This is the numbering TinyViT's attention gets by registering offsets in order of first appearance over
    the token pairs: the pairs with the first token at (0, 0) already meet every offset, row by row.
    """
    ys, xs = torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()
    return (ys[:, None] - ys[None, :]).abs() * window + (xs[:, None] - xs[None, :]).abs()


class Attention(nn.Module):
    """Pre-norm multi-head self-attention over one window with a learned bias per head and relative offset.

    ``qkv`` projects to ``num_heads`` consecutive groups of (q, k, v), each ``head_dim`` wide.
    """

    def __init__(self, dim: int, num_heads: int, window: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attention_biases = nn.Parameter(torch.zeros(num_heads, window * window))
        self.register_buffer("attention_bias_idxs", _offset_index(window), persistent=False)

    def forward(self, x):  # (B, N, C)
        b, n, c = x.shape
        qkv = self.qkv(self.norm(x)).view(b, n, self.num_heads, 3, self.head_dim).permute(3, 0, 2, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # (B, heads, N, head_dim)
        logits = (q @ k.transpose(-2, -1)) * self.scale + self.attention_biases[:, self.attention_bias_idxs]
        out = logits.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


class TinyViTBlock(nn.Module):
    def __init__(self, dim: int, num_heads: int, window: int, mlp_ratio: float, local_conv_size: int):
        super().__init__()
        self.window = window
        self.attn = Attention(dim, num_heads, window)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.local_conv = ConvBN(dim, dim, local_conv_size, 1, local_conv_size // 2, groups=dim)

    def _window_attention(self, x):  # (B, H, W, C)
        b, h, w, c = x.shape
        s = self.window
        pad_h, pad_w = (s - h % s) % s, (s - w % s) % s
        if pad_h or pad_w:
            x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
        ph, pw = h + pad_h, w + pad_w
        windows = x.reshape(b, ph // s, s, pw // s, s, c).transpose(2, 3).reshape(-1, s * s, c)
        out = self.attn(windows).view(b, ph // s, pw // s, s, s, c).transpose(2, 3).reshape(b, ph, pw, c)
        return out[:, :h, :w]

    def forward(self, x):  # (B, C, H, W)
        tokens = x.permute(0, 2, 3, 1)
        tokens = tokens + self._window_attention(tokens)
        x = self.local_conv(tokens.permute(0, 3, 1, 2).contiguous())
        tokens = x.permute(0, 2, 3, 1)
        tokens = tokens + self.mlp(tokens)
        return tokens.permute(0, 3, 1, 2).contiguous()


class Stage(nn.Module):
    """A TinyViT stage: its blocks (MBConv in the first stage, attention blocks after), then an optional patch
    merging."""

    def __init__(self, blocks, downsample):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.downsample = downsample

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x if self.downsample is None else self.downsample(x)


class TinyViTEncoder(nn.Module):
    """TinyViT as SAM's image encoder: (B, 3, S, S) → (B, out_chans, S/16, S/16) with MobileSAM's settings.

    Keyword arguments are the keys of :data:`MOBILE_SAM_ENCODER` plus ``img_size`` (SAM's input side, read by
    ``Sam.preprocess`` and ``SamPredictor``), ``in_chans`` and ``out_chans`` (the prompt embedding width).
    """

    def __init__(self, *, embed_dims: Sequence[int], depths: Sequence[int], num_heads: Sequence[int],
                 window_sizes: Sequence[int], mlp_ratio: float = 4.0, mbconv_expand_ratio: float = 4.0,
                 local_conv_size: int = 3, merge_strides: Sequence[int] = None, num_classes: int = 1000,
                 img_size: int = 1024, in_chans: int = 3, out_chans: int = 256):
        super().__init__()
        stages = len(embed_dims)
        if not (len(depths) == len(num_heads) == len(window_sizes) == stages >= 2):
            raise ValueError("embed_dims, depths, num_heads and window_sizes need one entry per stage (≥ 2)")
        merge_strides = list(merge_strides if merge_strides is not None else official_merge_strides(embed_dims))
        if len(merge_strides) != stages - 1:
            raise ValueError(f"merge_strides needs {stages - 1} entries, got {merge_strides}")
        self.img_size = img_size
        self.patch_embed = PatchEmbed(in_chans, embed_dims[0])
        layers = []
        for i in range(stages):
            downsample = (PatchMerging(embed_dims[i], embed_dims[i + 1], merge_strides[i])
                          if i < stages - 1 else None)
            if i == 0:
                blocks = [MBConv(embed_dims[0], mbconv_expand_ratio) for _ in range(depths[0])]
            else:
                blocks = [TinyViTBlock(embed_dims[i], num_heads[i], window_sizes[i], mlp_ratio, local_conv_size)
                          for _ in range(depths[i])]
            layers.append(Stage(blocks, downsample))
        self.layers = nn.ModuleList(layers)
        # TinyViT's classifier: present in the official checkpoint, unused by SAM
        self.norm_head = nn.LayerNorm(embed_dims[-1])
        self.head = nn.Linear(embed_dims[-1], num_classes) if num_classes > 0 else nn.Identity()
        self.neck = nn.Sequential(
            nn.Conv2d(embed_dims[-1], out_chans, kernel_size=1, bias=False), LayerNorm2d(out_chans),
            nn.Conv2d(out_chans, out_chans, kernel_size=3, padding=1, bias=False), LayerNorm2d(out_chans))
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.neck(x)


def tiny_vit_config_from_state_dict(state_dict, prefix: str = "image_encoder.") -> Dict:
    """The :class:`TinyViTEncoder` keyword arguments of an official-format TinyViT state dict.

    The unused first-stage ``num_heads``/``window_sizes`` entries and the merge strides cannot be read from
    weights: they are taken from MobileSAM's settings when everything else matches it, otherwise 1 / 7 and
    the official width rule.
    """

    def indices(stem: str) -> List[int]:
        return sorted({int(k[len(stem):].split(".")[0]) for k in state_dict if k.startswith(stem)})

    stages = indices(f"{prefix}layers.")
    if not stages or stages != list(range(len(stages))):
        raise ValueError("not a TinyViT state dict: no image_encoder.layers.{i}")
    dims, depths, heads, windows = [], [], [], []
    for i in stages:
        blocks = indices(f"{prefix}layers.{i}.blocks.")
        depths.append(len(blocks))
        if i == 0:
            dims.append(int(state_dict[f"{prefix}layers.0.blocks.0.conv1.c.weight"].shape[1]))
            heads.append(None)
            windows.append(None)
        else:
            biases = state_dict[f"{prefix}layers.{i}.blocks.0.attn.attention_biases"]
            dims.append(int(state_dict[f"{prefix}layers.{i}.blocks.0.attn.norm.weight"].shape[0]))
            heads.append(int(biases.shape[0]))
            windows.append(round(int(biases.shape[1]) ** 0.5))
    head = state_dict.get(f"{prefix}head.weight")
    config = {
        "embed_dims": dims, "depths": depths, "num_heads": heads, "window_sizes": windows,
        "mlp_ratio": int(state_dict[f"{prefix}layers.1.blocks.0.mlp.fc1.weight"].shape[0]) / dims[1],
        "mbconv_expand_ratio": int(state_dict[f"{prefix}layers.0.blocks.0.conv1.c.weight"].shape[0]) / dims[0],
        "local_conv_size": int(state_dict[f"{prefix}layers.1.blocks.0.local_conv.c.weight"].shape[-1]),
        "merge_strides": official_merge_strides(dims),
        "num_classes": int(head.shape[0]) if head is not None else 0,
    }
    known = MOBILE_SAM_ENCODER
    if all(config[k] == known[k] for k in ("embed_dims", "depths", "mlp_ratio", "mbconv_expand_ratio",
                                           "local_conv_size", "num_classes")) \
            and config["num_heads"][1:] == known["num_heads"][1:] \
            and config["window_sizes"][1:] == known["window_sizes"][1:]:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in known.items()}
    config["num_heads"][0], config["window_sizes"][0] = 1, 7
    return config
