"""FACTUAL textual scene-graph parser (Li et al. 2023) weights, used by HICE-S's ``phrase_parser="factual"``."""

from __future__ import annotations

from pathlib import Path

from capeval.hub import WeightSpec, register

# The hub repo at the pinned commit holds model.safetensors (no pickle) and the fast tokenizer's tokenizer.json
# next to the older pytorch_model.bin and spiece.model, which are not needed.
FACTUAL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json")
_TINY_CORPUS = ["Generate Scene Graph: two brown dogs run on the green grass",
                "( dogs , is , 2 ) , ( dogs , is , brown ) , ( dogs , run on , grass ) , ( grass , is , green )",
                "Generate Scene Graph: a man riding a horse in a field near the trees",
                "( man , ride , horse ) , ( horse , in , field ) , ( field , near , trees )"]


def tiny_factual_factory(seed: int = 0):
    """Tiny random T5 with a Unigram tokenizer trained here (``tokenizers``, T5's special ids and Metaspace
    pre-tokenisation), in the hub repo's file layout; loads with ``AutoTokenizer``/``AutoModelForSeq2SeqLM``."""

    def write(out_dir: Path) -> None:
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
        from transformers import T5Config, T5ForConditionalGeneration, T5TokenizerFast

        backend = Tokenizer(models.Unigram())
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        backend.train_from_iterator(_TINY_CORPUS, trainers.UnigramTrainer(
            vocab_size=64, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>", show_progress=False))
        backend.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                               special_tokens=[("</s>", 1)])
        tokenizer = T5TokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>",
                                    pad_token="<pad>", extra_ids=0)
        tokenizer.save_pretrained(str(out_dir))
        torch.manual_seed(seed)
        config = T5Config(vocab_size=len(tokenizer), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                          num_heads=2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        T5ForConditionalGeneration(config).save_pretrained(str(out_dir))

    return write


register(WeightSpec(
    name="flan-t5-base-vg-factual-sg", repo_id="lizhuang144/flan-t5-base-VG-factual-sg",
    revision="2e01585225e8f7fc20d922cdee9c591ea4cd6ef1", files=FACTUAL_FILES, format="transformers", license="mit",
    source_url="https://github.com/zhuang-li/FACTUAL",
    description="FACTUAL scene-graph parser (Flan-T5-base pre-trained on VG scene graphs, fine-tuned on FACTUAL); "
                "HICE-S's phrase parser",
    tiny_factory=tiny_factual_factory()))
