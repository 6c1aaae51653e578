"""FACTUAL textual scene-graph parser (Li et al. 2023) weights, used by HICE-S's ``phrase_parser="factual"``."""

from __future__ import annotations

from pathlib import Path

from capeval.hub import WeightSpec, register

# The repo was pushed in 2023 with save_pretrained (PyTorch .bin weights, slow SentencePiece tokenizer files);
# the .bin file is read by transformers with torch.load(weights_only=True).
FACTUAL_FILES = ("config.json", "pytorch_model.bin", "spiece.model", "tokenizer_config.json",
                 "special_tokens_map.json")
_TINY_CORPUS = ["Generate Scene Graph: two brown dogs run on the green grass",
                "( dogs , is , 2 ) , ( dogs , is , brown ) , ( dogs , run on , grass ) , ( grass , is , green )",
                "Generate Scene Graph: a man riding a horse in a field near the trees",
                "( man , ride , horse ) , ( horse , in , field ) , ( field , near , trees )"]


def tiny_factual_factory(seed: int = 0):
    """Tiny random T5 with a 40-piece SentencePiece vocabulary trained here, in the hub repo's file layout."""

    def write(out_dir: Path) -> None:
        import io
        import json

        import sentencepiece as spm
        import torch
        from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

        out_dir.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(_TINY_CORPUS * 4), model_writer=buffer, vocab_size=40,
                                       pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0,
                                       model_type="unigram", minloglevel=2)
        (out_dir / "spiece.model").write_bytes(buffer.getvalue())
        (out_dir / "tokenizer_config.json").write_text(json.dumps(
            {"tokenizer_class": "T5Tokenizer", "extra_ids": 0, "model_max_length": 512}))
        (out_dir / "special_tokens_map.json").write_text(json.dumps(
            {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}))
        T5Tokenizer.from_pretrained(str(out_dir))  # the files load as the hub repo's do
        torch.manual_seed(seed)
        config = T5Config(vocab_size=96, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                          num_heads=2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        model = T5ForConditionalGeneration(config)
        config.save_pretrained(str(out_dir))
        torch.save(model.state_dict(), out_dir / "pytorch_model.bin")

    return write


register(WeightSpec(
    name="flan-t5-base-vg-factual-sg", repo_id="lizhuang144/flan-t5-base-VG-factual-sg", revision="main",
    files=FACTUAL_FILES, format="transformers", license="mit", source_url="https://github.com/zhuang-li/FACTUAL",
    description="FACTUAL scene-graph parser (Flan-T5-base fine-tuned on VG FACTUAL); HICE-S's phrase parser",
    tiny_factory=tiny_factual_factory()))
