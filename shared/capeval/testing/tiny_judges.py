"""Tiny random stand-ins for the weights of judges/registration.py (tests and demos only)."""

from __future__ import annotations

import string
from pathlib import Path

from capeval.core.constants import OPENAI_MEAN, OPENAI_STD

SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>", "<image>")
# LLaVA-1.5's chat template shape (system text, then "USER: <image>\n... ASSISTANT:")
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ content['text'] + ' ' }}"
    "{% endfor %}{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def tiny_llama_tokenizer():
    """A character-level Llama-style fast tokenizer (``▁`` word marks, ``<s>`` prepended, one token per digit)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    pieces = ["▁", "\n", *string.ascii_letters, *string.digits, *".,:;!?()'\"-/<>"]
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *pieces])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", vocab["<s>"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>", pad_token="<pad>",
                                        extra_special_tokens={"image_token": "<image>"})
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    return tokenizer


def write_tiny_llava(out_dir: Path, seed: int = 0) -> None:
    """A tiny random ``LlavaForConditionalGeneration`` (a 2-layer CLIP vision tower on 28-pixel images: 4 image
    tokens; a 2-layer Llama whose head favours digits, dots and the end token), its processor and chat template,
    saved in shards with an index (as the 13B repo)."""
    import torch
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = tiny_llama_tokenizer()
    image_processor = CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28},
                                         image_mean=list(OPENAI_MEAN), image_std=list(OPENAI_STD))
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=14,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=TINY_CHAT_TEMPLATE)
    processor.save_pretrained(str(out_dir))
    # the 13B repo's layout: the image processor in preprocessor_config.json, no processor_config.json (the
    # loader takes the patch size and feature strategy from the model's config)
    (out_dir / "processor_config.json").unlink(missing_ok=True)
    image_processor.save_pretrained(str(out_dir))
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                       num_attention_heads=2, image_size=28, patch_size=14, projection_dim=32),
        text_config=LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                                bos_token_id=1, eos_token_id=2, pad_token_id=3),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"), vision_feature_layer=-2,
        vision_feature_select_strategy="default", projector_hidden_act="gelu")
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    with torch.no_grad():  # transformers initialises near zero: every answer would be the same
        for parameter in model.parameters():
            parameter.normal_(0, 1.0)
        favoured = {"0123456789": 3.0, ".": 4.0, "</s>": 4.0}  # answers with digits, dots and ends
        for tokens, scale in favoured.items():
            ids = tokenizer.convert_tokens_to_ids([tokens] if tokens == "</s>" else list(tokens))
            model.lm_head.weight[ids] *= scale
    model.generation_config.bos_token_id, model.generation_config.eos_token_id = 1, 2
    model.generation_config.pad_token_id = 3
    model.save_pretrained(str(out_dir), safe_serialization=True, max_shard_size="60KB")
