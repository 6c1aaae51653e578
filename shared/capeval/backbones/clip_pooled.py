"""open_clip CLIP forwards that skip the work which cannot change a pooled feature.

A CLIP feature is read at one position: the image's class token, the text's end-of-text token. So the last residual
block needs its queries, output projection and MLP at that position only (every position still gives its keys and
values). Under the text tower's causal mask a position sees only the positions before it, so the states of a prompt
that begins many texts ("A photo depicts ") are those of the prompt alone: they are computed once
(:func:`prompt_states`) and a text that begins with it runs its remaining tokens only. Both are exact in real
arithmetic; in floats the features equal open_clip's own forward up to rounding (tested ≤ 1e-5 on full-size random
weights, ``tests/backbones/test_text_trimming.py``).

Models whose towers are not batch-first stacks of plain ``ResidualAttentionBlock`` s over ``nn.MultiheadAttention``
(OpenAI's sequence-first fp16 emulation, attention pooling, custom blocks, open_clip < 3 without
``VisionTransformer._embeds``, open_clip's unreleased 4.x blocks) get open_clip's own forward:
:func:`text_fallback_reason` / :func:`image_fallback_reason` name why, :func:`forward_paths` records which path each
tower runs, and the backbone warns (:class:`ForwardFallbackWarning`) rather than lose the speed without a word.
:func:`forwards_tag` fingerprints the code that determines the features (persisted features are keyed by it).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from functools import lru_cache
from typing import Dict, List, Optional, Sequence

import torch

POOLED = "pooled"  # forward_paths' value for a tower that runs the pooled forward


class ForwardFallbackWarning(UserWarning):
    """A CLIP tower cannot run the forward capeval meant for it (the pooled one, or OpenAI's fp16 numerics) and runs
    open_clip's own instead; the message names the reason."""


def _blocks_reason(transformer) -> Optional[str]:
    """Why ``transformer``'s blocks are not batch-first plain ``ResidualAttentionBlock`` s over
    ``nn.MultiheadAttention`` (None when they are)."""
    from open_clip.transformer import ResidualAttentionBlock

    if not hasattr(transformer, "batch_first"):
        return f"{_name(transformer)} has no batch_first attribute"
    if not transformer.batch_first:
        return "its blocks run sequence-first (batch_first=False)"
    for index, block in enumerate(transformer.resblocks):
        if type(block) is not ResidualAttentionBlock:
            return f"block {index} is {_name(block)}, not open_clip's ResidualAttentionBlock"
        if hasattr(block, "ln_1_kv"):
            return f"block {index} is a cross-attention block (ln_1_kv)"
        if type(block.attn) is not torch.nn.MultiheadAttention:
            return f"block {index}'s attention is {_name(block.attn)}, not torch.nn.MultiheadAttention"
        if not (block.attn.batch_first and block.attn._qkv_same_embed_dim):
            return f"block {index}'s attention is not a batch-first self-attention with one in_proj_weight"
    return None


def _name(obj) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def text_fallback_reason(model) -> Optional[str]:
    """Why ``model``'s text tower cannot run :func:`encode_text_pooled` (None when it can: causal, pooled at the
    end-of-text token, plain blocks)."""
    missing = [name for name in ("transformer", "attn_mask", "text_pool_type") if not hasattr(model, name)]
    if missing:
        return f"{_name(model)} has no {', '.join(missing)} (not open_clip's CLIP text tower)"
    if model.attn_mask is None:
        return "the text tower is not causal (no attn_mask)"
    if model.text_pool_type not in ("argmax", "eos"):
        return f"text pooling {model.text_pool_type!r} is not at the end-of-text token"
    reason = _blocks_reason(model.transformer)
    return None if reason is None else f"text tower: {reason}"


def image_fallback_reason(model) -> Optional[str]:
    """Why ``model``'s image tower cannot run :func:`encode_image_pooled` (None when it can: a ViT pooled at its class
    token, plain blocks)."""
    from open_clip.transformer import VisionTransformer

    visual = model.visual
    if type(visual) is not VisionTransformer:
        return f"the image tower is {_name(visual)}, not open_clip's VisionTransformer"
    if not hasattr(visual, "_embeds"):
        return "open_clip's VisionTransformer has no _embeds (open_clip < 3)"
    if getattr(visual, "attn_pool", None) is not None:
        return "the image tower pools by attention"
    if getattr(visual, "pool_type", None) != "tok":
        return f"image pooling {getattr(visual, 'pool_type', None)!r} is not the class token"
    if visual.output_tokens:
        return "the image tower outputs its tokens"
    reason = _blocks_reason(visual.transformer)
    return None if reason is None else f"image tower: {reason}"


def text_prunable(model) -> bool:
    """Whether ``model``'s text tower is causal, pooled at the end-of-text token and made of plain blocks."""
    return text_fallback_reason(model) is None


def image_prunable(model) -> bool:
    """Whether ``model``'s image tower is a ViT pooled at its class token and made of plain blocks."""
    return image_fallback_reason(model) is None


def forward_paths(model) -> Dict[str, str]:
    """Which forward each tower of ``model`` runs: :data:`POOLED`, or ``"open_clip: <reason>"``."""
    reasons = {"text": text_fallback_reason(model), "image": image_fallback_reason(model)}
    return {tower: POOLED if reason is None else f"open_clip: {reason}" for tower, reason in reasons.items()}


# this module's functions whose code determines a feature (looked up when fingerprinted: a replaced one counts)
FORWARD_FUNCTIONS = ("_blocks_reason", "text_fallback_reason", "image_fallback_reason", "blocks_pooled",
                     "attention_at_one_query", "project_text", "eot_positions", "prompt_states", "encode_text_pooled",
                     "encode_image_pooled")


def forwards_tag(code: Sequence[object] = ()) -> str:
    """A fingerprint of what determines a CLIP feature besides the weights and options: the source of this module's
    :data:`FORWARD_FUNCTIONS` and of ``code`` (the caller's forward functions, methods and shape constants; a value
    without source counts by its ``repr``), open_clip's ``transformer`` module and ``CLIP`` class, and torch's
    major.minor version. Deterministic across processes; it changes when any of that code changes."""
    module = sys.modules[__name__]
    return _fingerprint(tuple(getattr(module, name) for name in FORWARD_FUNCTIONS) + tuple(code))


@lru_cache(maxsize=32)
def _fingerprint(code: tuple) -> str:
    import open_clip.transformer
    from open_clip.model import CLIP

    digest = hashlib.sha256(f"torch {'.'.join(torch.__version__.split('.')[:2])}\n".encode())
    for part in (*code, open_clip.transformer, CLIP):
        digest.update(_source(part).encode("utf-8") + b"\0")
    return f"forwards-{digest.hexdigest()[:16]}"


def _source(part) -> str:
    """``part``'s source code; a value without source (a constant) by its ``repr``."""
    if not (inspect.isfunction(part) or inspect.ismethod(part) or inspect.isclass(part) or inspect.ismodule(part)):
        return repr(part)
    try:
        return inspect.getsource(part)
    except (OSError, TypeError):  # no source shipped: its qualified name and open_clip's version stand in
        import open_clip

        return f"{getattr(part, '__module__', '')}.{getattr(part, '__qualname__', part)} {open_clip.__version__}"


def blocks_pooled(transformer, x: torch.Tensor, at: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                  context: Optional[Sequence[torch.Tensor]] = None) -> torch.Tensor:
    """``transformer(x, attn_mask)`` read at position ``at[b]`` of each row ``b``: (B, D).

    ``context``: for each block, its first LayerNorm's output (P, D) at P positions that precede ``x``'s in every row
    (a shared prompt); ``x``'s positions then attend to them too, and ``attn_mask`` is (S, P + S) over them and ``x``.
    """
    blocks = transformer.resblocks
    rows = torch.arange(len(x), device=x.device)
    mask = None if attn_mask is None else attn_mask.to(x.dtype)
    for index, block in enumerate(blocks):
        last = index == len(blocks) - 1
        if context is None and not last:
            x = block(x, attn_mask=mask)  # open_clip's own block
            continue
        normed = block.ln_1(x)
        keys = normed if context is None else torch.cat([context[index].expand(len(x), -1, -1), normed], 1)
        if last:  # each row's query (its pooled position) sees its own keys
            x = x[rows, at].unsqueeze(1)
            attended = attention_at_one_query(block.attn, normed[rows, at].unsqueeze(1), keys,
                                              None if mask is None else mask[at])
        else:
            attended = block.attn(normed, keys, keys, need_weights=False, attn_mask=mask)[0]
        x = x + block.ls_1(attended)
        x = x + block.ls_2(block.mlp(block.ln_2(x)))
    return x[:, 0]


def attention_at_one_query(attn: torch.nn.MultiheadAttention, queries: torch.Tensor, keys: torch.Tensor,
                           key_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``attn(queries, keys, keys)`` for one query per row (``queries`` (B, 1, D), ``keys`` (B, S, D), additive
    ``key_mask`` (B, S)), written as matrix products: on CPU, PyTorch's fused attention kernel gives a single query
    different bits in different threads' shares of the batch, so a feature would depend on its row in the forward
    whenever more than one thread runs; batched matrix products treat every row alike."""
    width, heads = attn.embed_dim, attn.num_heads
    bias = attn.in_proj_bias
    query = torch.nn.functional.linear(queries, attn.in_proj_weight[:width], None if bias is None else bias[:width])
    key, value = torch.nn.functional.linear(keys, attn.in_proj_weight[width:],
                                            None if bias is None else bias[width:]).chunk(2, dim=-1)

    def split(t):  # (B, heads, positions, head width)
        return t.unflatten(-1, (heads, -1)).transpose(1, 2)

    scores = split(query) @ split(key).transpose(-1, -2) * (width // heads) ** -0.5
    if key_mask is not None:
        scores = scores + key_mask[:, None, None, :]
    return attn.out_proj((scores.softmax(-1) @ split(value)).transpose(1, 2).flatten(2))


def project_text(model, pooled: torch.Tensor) -> torch.Tensor:
    """open_clip's text projection of pooled states: a ``Linear``, a matrix or none."""
    if isinstance(model.text_projection, torch.nn.Linear):
        return model.text_projection(pooled)
    return pooled if model.text_projection is None else pooled @ model.text_projection


def eot_positions(model, tokens: torch.Tensor) -> torch.Tensor:
    """The position each row of ``tokens`` is pooled at (open_clip's ``text_global_pool``)."""
    if model.text_pool_type == "argmax":
        return tokens.argmax(dim=-1)
    return (tokens == model.text_eos_id).int().argmax(dim=-1)


def prompt_states(model, ids: Sequence[int]) -> List[torch.Tensor]:
    """Per text block, its first LayerNorm's output (P, D) at the positions of the prompt token ``ids`` (P of them),
    from one forward of the prompt alone."""
    cast_dtype = model.transformer.get_cast_dtype()
    width = len(ids)
    tokens = torch.tensor([list(ids)], device=model.positional_embedding.device)
    x = model.token_embedding(tokens).to(cast_dtype) + model.positional_embedding[:width].to(cast_dtype)
    mask = model.attn_mask[:width, :width].to(x.dtype)
    blocks, states = model.transformer.resblocks, []
    for block in blocks:
        states.append(block.ln_1(x)[0])
        if block is not blocks[-1]:  # the last block's output at the prompt is never read
            x = block(x, attn_mask=mask)
    return states


def encode_text_pooled(model, tokens: torch.Tensor, prompt: Optional[Sequence[torch.Tensor]] = None) -> torch.Tensor:
    """The text features of ``tokens`` (B, W) for a model with :func:`text_prunable`; with ``prompt`` (the
    :func:`prompt_states` of the P ids every row begins with), only positions P… run."""
    cast_dtype = model.transformer.get_cast_dtype()
    width, start = tokens.shape[1], 0 if prompt is None else len(prompt[0])
    at = eot_positions(model, tokens) - start
    x = model.token_embedding(tokens[:, start:]).to(cast_dtype) + model.positional_embedding[start:width].to(cast_dtype)
    pooled = blocks_pooled(model.transformer, x, at, model.attn_mask[start:width, :width], prompt)
    return project_text(model, model.ln_final(pooled))  # LayerNorm is per position: the same on the pooled rows


def encode_image_pooled(model, pixels: torch.Tensor) -> torch.Tensor:
    """``model.encode_image(pixels)``, its last block at the class token only (for a model with
    :func:`image_prunable`; open_clip's own forward otherwise)."""
    if not image_prunable(model):
        return model.encode_image(pixels)
    visual = model.visual
    x = visual._embeds(pixels)
    pooled = visual.ln_post(blocks_pooled(visual.transformer, x, torch.zeros(len(x), dtype=torch.long,
                                                                               device=x.device)))
    return pooled if visual.proj is None else pooled @ visual.proj
