"""Full-size random stand-ins of the detailed-caption models, for speed benchmarks (never product code paths): the
cost of a forward or a beam search depends on the shapes, not on the weights' values.

- FACTUAL (``flan-t5-base-vg-factual-sg``): a random T5 of flan-t5-base's configuration (:data:`FLAN_T5_BASE`), with
  a SentencePiece-style Unigram tokenizer of 32,100 pieces (flan-t5-base's size) trained here on English text, so
  that a sentence takes about as many tokens as with T5's own tokenizer.
- all-mpnet-base-v2: a random MPNet-base (:data:`MPNET_BASE`) with a lower-cased WordPiece vocabulary of 30,527
  entries (all-mpnet-base-v2's size) trained the same way.
- The English text the tokenizers learn from (:func:`english_corpus`): the glosses and examples of WordNet 3.0 in
  Debian's database files (``capeval.testing.tiny_nltk.DEBIAN_WORDNET_DIR``), about 1.4 million words.
- :func:`populate_full_size_detail_cache` files both, with the NLTK data of
  :func:`capeval.testing.tiny_nltk.write_tiny_nltk_data` (WordNet 3.0 from Debian), in the hub-cache layout of
  :func:`capeval.testing.populate_tiny_hub_cache`, so that the product loaders find them offline.

Every builder takes its configuration and vocabulary size as arguments, so that a test runs the same code at a
reduced size.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from capeval.core.constants import TINY_MARKER_FILE
from capeval.core.hub import registered_weights
from capeval.testing.tiny_nltk import DEBIAN_WORDNET_DIR, write_tiny_nltk_data

# google/flan-t5-base's config.json (the FACTUAL parser is a fine-tuned flan-t5-base)
FLAN_T5_BASE: Dict[str, object] = dict(
    vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_decoder_layers=12, num_heads=12,
    relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.1,
    layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0,
    pad_token_id=0, eos_token_id=1)
T5_TOKENIZER_PIECES = 32100  # len(flan-t5-base's tokenizer): 32,000 SentencePiece pieces + 100 sentinels
# sentence-transformers/all-mpnet-base-v2's config.json
MPNET_BASE: Dict[str, object] = dict(
    vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
    hidden_act="gelu", max_position_embeddings=514, relative_attention_num_buckets=32, layer_norm_eps=1e-5,
    pad_token_id=1, bos_token_id=0, eos_token_id=2)
MPNET_SPECIALS = ("<s>", "<pad>", "</s>", "[UNK]")  # ids 0-3; "<mask>" comes last, as in all-mpnet-base-v2
FACTUAL_WEIGHTS, MPNET_WEIGHTS = "flan-t5-base-vg-factual-sg", "all-mpnet-base-v2"
NLTK_PACKAGES = {"nltk-punkt-tab": "tokenizers", "nltk-averaged-perceptron-tagger-eng": "taggers",
                 "nltk-wordnet": "corpora"}
_GLOSS = re.compile(r"\| (.*?)\s*$")


def english_corpus(wordnet_dir: Path = DEBIAN_WORDNET_DIR, limit: Optional[int] = None) -> List[str]:
    """The glosses (with their quoted examples) of WordNet's data files, in file order: at most ``limit``."""
    lines: List[str] = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(Path(wordnet_dir) / f"data.{pos}", encoding="utf-8") as data:
            for line in data:
                match = None if line.startswith("  ") else _GLOSS.search(line)
                if match:
                    lines.append(match.group(1).replace('"', ""))
                    if limit is not None and len(lines) >= limit:
                        return lines
    return lines


def write_factual(out_dir: Path, corpus: Iterable[str], *, config: Optional[dict] = None,
                  pieces: int = T5_TOKENIZER_PIECES, seed: int = 0) -> None:
    """A random T5 (``config``, default :data:`FLAN_T5_BASE`) and a Unigram tokenizer of ``pieces`` pieces trained on
    ``corpus``, in the FACTUAL repo's file layout (T5's special ids: pad 0, end 1, unknown 2)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration, T5TokenizerFast

    backend = Tokenizer(models.Unigram())
    backend.normalizer = normalizers.NFKC()
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    backend.train_from_iterator(list(corpus), trainers.UnigramTrainer(
        vocab_size=pieces, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>", show_progress=False))
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                           special_tokens=[("</s>", 1)])
    tokenizer = T5TokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
                                extra_ids=0)
    tokenizer.save_pretrained(str(out_dir))
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(T5Config(**(FLAN_T5_BASE if config is None else config)))
    model.generation_config = GenerationConfig(decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model.save_pretrained(str(out_dir))


def write_mpnet(out_dir: Path, corpus: Iterable[str], *, config: Optional[dict] = None, seed: int = 0) -> None:
    """A random MPNet (``config``, default :data:`MPNET_BASE`) and a lower-cased WordPiece vocabulary of the
    config's ``vocab_size`` (specials included) trained on ``corpus``, in all-mpnet-base-v2's file layout."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    config = dict(MPNET_BASE if config is None else config)
    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.train_from_iterator(list(corpus), trainers.WordPieceTrainer(
        vocab_size=config["vocab_size"] - 1, special_tokens=list(MPNET_SPECIALS), show_progress=False))
    vocab = sorted(backend.get_vocab().items(), key=lambda item: item[1])
    tokens = [token for token, _ in vocab] + ["<mask>"]
    if len(tokens) != config["vocab_size"]:
        raise ValueError(f"the corpus gives {len(tokens)} WordPiece entries, not {config['vocab_size']}: "
                         "use a larger corpus or a smaller vocab_size")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    MPNetTokenizer(vocab={token: i for i, token in enumerate(tokens)}, do_lower_case=True).save_pretrained(str(out_dir))
    torch.manual_seed(seed)
    MPNetModel(MPNetConfig(**config)).save_pretrained(str(out_dir))


def _file_snapshot(cache_dir: Path, name: str, source: Path) -> Path:
    """``source``'s files as the snapshot of the registered weight ``name`` (layout of
    :func:`capeval.testing.populate_tiny_hub_cache`, marked as random weights)."""
    from capeval.testing import snapshot_revision

    spec = registered_weights()[name]
    missing = [f for f in spec.files if not (source / f).exists()]
    if missing:
        raise RuntimeError(f"{name}: the builder did not write {missing}")
    repo_dir = Path(cache_dir) / ("models--" + spec.repo_id.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / snapshot_revision(spec)
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(source, snapshot)
    (snapshot / TINY_MARKER_FILE).write_text("full-size random weights written by capeval.testing: scores from them "
                                             "mean nothing\n")
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(snapshot_revision(spec))
    return snapshot


def populate_full_size_detail_cache(cache_dir: Path, work_dir: Path, *, factual_config: Optional[dict] = None,
                                    t5_pieces: int = T5_TOKENIZER_PIECES, mpnet_config: Optional[dict] = None,
                                    corpus_limit: Optional[int] = None,
                                    wordnet_dir: Path = DEBIAN_WORDNET_DIR) -> Path:
    """File the random FACTUAL parser, the random all-mpnet-base-v2 and the NLTK data (WordNet 3.0 from
    ``wordnet_dir``) in the hub cache ``cache_dir``; ``work_dir`` receives the builders' folders and
    ``work_dir/nltk_data``, the same NLTK files for code that reads ``nltk.data.path``, which is returned."""
    work_dir = Path(work_dir)
    corpus = english_corpus(wordnet_dir, corpus_limit)
    write_factual(work_dir / "factual", corpus, config=factual_config, pieces=t5_pieces)
    _file_snapshot(cache_dir, FACTUAL_WEIGHTS, work_dir / "factual")
    write_mpnet(work_dir / "mpnet", corpus, config=mpnet_config)
    _file_snapshot(cache_dir, MPNET_WEIGHTS, work_dir / "mpnet")
    nltk_data = write_tiny_nltk_data(work_dir, wordnet="debian", debian_wordnet_dir=wordnet_dir)
    for name, subdir in NLTK_PACKAGES.items():
        package = work_dir / "packages" / name
        shutil.copytree(nltk_data / subdir, package / subdir, dirs_exist_ok=True)
        _file_snapshot(cache_dir, name, package)
    (work_dir / "built.json").write_text(json.dumps({"factual": factual_config or FLAN_T5_BASE, "t5_pieces": t5_pieces,
                                                     "mpnet": mpnet_config or MPNET_BASE}, sort_keys=True))
    return nltk_data
