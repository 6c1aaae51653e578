"""make_compute_metrics with a tiny VisionEncoderDecoder trained by Seq2SeqTrainer(predict_with_generate=True), in
one process and under DDP (two gloo processes on CPU started by torchrun)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("transformers")

from capeval import InputError, ModelNotAvailableError  # noqa: E402
from capeval.integrations.transformers import AlignmentError, _RowMatcher, make_compute_metrics  # noqa: E402
from capeval.integrations.transformers import fingerprints as _fingerprints  # noqa: E402
from capeval.core.scoring import load_scorer, scorers  # noqa: E402
from capeval.testing import FAST_TINY_OPTIONS  # noqa: E402

COLORS = ["red", "green", "blue", "yellow", "black", "white", "purple", "orange", "pink", "gray"]
SHAPES = ["square", "circle", "stripe"]
SPECIALS = ["[PAD]", "[BOS]", "[EOS]", "[UNK]"]


def make_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = SPECIALS + ["a", "with", "picture", "of"] + COLORS + SHAPES
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", bos_token="[BOS]",
                                   eos_token="[EOS]", unk_token="[UNK]")


def make_model(tokenizer):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, ViTConfig, ViTModel, VisionEncoderDecoderModel

    torch.manual_seed(0)  # a wide initialisation: captions differ from image to image even after two steps
    encoder = ViTModel(ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=64, initializer_range=0.5))
    decoder = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=1, n_head=2,
                                         add_cross_attention=True, is_decoder=True, initializer_range=0.5,
                                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                         pad_token_id=tokenizer.pad_token_id))
    model = VisionEncoderDecoderModel(encoder=encoder, decoder=decoder)
    for config in (model.config, model.generation_config):
        config.decoder_start_token_id = tokenizer.bos_token_id
        config.pad_token_id = tokenizer.pad_token_id
        config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.max_length = 7
    model.generation_config.min_length = 3  # non-empty captions from an untrained decoder
    model.generation_config.suppress_tokens = [tokenizer.pad_token_id, tokenizer.bos_token_id,
                                               tokenizer.unk_token_id]
    return model


def make_dataset(tokenizer, image_processor, n=10):
    import datasets
    from PIL import Image

    rng = np.random.default_rng(0)
    images, captions, references = [], [], []
    for i in range(n):
        size = (24 + 4 * i, 40 - 2 * i)
        images.append(Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)))
        caption = f"a {COLORS[i]} {SHAPES[i % 3]}"
        captions.append(caption)
        references.append([caption, f"a picture of a {COLORS[i]} {SHAPES[(i + 1) % 3]}"][: 1 + i % 2])
    ds = datasets.Dataset.from_dict({"image": images, "caption": captions, "references": references})
    ds = ds.cast_column("image", datasets.Image())

    def preprocess(batch):
        pixel_values = image_processor([im.convert("RGB") for im in batch["image"]], return_tensors="np")["pixel_values"]
        labels = [ids + [tokenizer.eos_token_id] for ids in tokenizer(batch["caption"])["input_ids"]]
        return {"pixel_values": list(pixel_values), "labels": labels}

    return ds.map(preprocess, batched=True)


def collate(features):
    import torch

    longest = max(len(f["labels"]) for f in features)
    return {
        "pixel_values": torch.stack([torch.as_tensor(np.asarray(f["pixel_values"]), dtype=torch.float32)
                                     for f in features]),
        "labels": torch.tensor([list(f["labels"]) + [-100] * (longest - len(f["labels"])) for f in features]),
    }


def training_args(tmp_path, **overrides):
    from transformers import Seq2SeqTrainingArguments

    options = dict(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, per_device_eval_batch_size=3,
                   eval_strategy="steps", eval_steps=2, logging_steps=1, save_strategy="no", learning_rate=5e-3,
                   predict_with_generate=True, report_to=[], use_cpu=True, seed=0, dataloader_num_workers=0,
                   disable_tqdm=True)
    options.update(overrides)
    return Seq2SeqTrainingArguments(**options)


def make_image_processor():
    from transformers import ViTImageProcessor

    return ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3, image_std=[0.5] * 3)


@pytest.fixture(scope="module")
def setup(tiny_hub):
    tokenizer = make_tokenizer()
    image_processor = make_image_processor()
    dataset = make_dataset(tokenizer, image_processor)
    scorer = load_scorer("clip_s", device="cpu")
    return SimpleNamespace(tokenizer=tokenizer, image_processor=image_processor, dataset=dataset, scorer=scorer)


@pytest.fixture(scope="module")
def trained(setup, tmp_path_factory):
    """Train two steps with evaluation at step 2, scoring clip_s (positional matching, verified by labels)."""
    from transformers import Seq2SeqTrainer

    compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, setup.dataset,
                                           references_column="references")
    trainer = Seq2SeqTrainer(model=make_model(setup.tokenizer), args=training_args(tmp_path_factory.mktemp("run")),
                             train_dataset=setup.dataset, eval_dataset=setup.dataset, data_collator=collate,
                             compute_metrics=compute_metrics, processing_class=setup.tokenizer)
    trainer.train()
    return trainer


def decoded_predictions(trainer, dataset, tokenizer):
    """The trainer's model's captions for ``dataset`` in dataset order, decoded here independently."""
    from transformers import Seq2SeqTrainer

    plain = Seq2SeqTrainer(model=trainer.model, args=trainer.args, eval_dataset=dataset, data_collator=collate,
                           processing_class=tokenizer)
    predictions = plain.predict(dataset).predictions[:len(dataset)]  # (under DDP the padding samples follow)
    ids = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
    return [text.strip() for text in tokenizer.batch_decode(ids, skip_special_tokens=True)]


def direct_scores(setup, trainer):
    predictions = decoded_predictions(trainer, setup.dataset, setup.tokenizer)
    assert all(predictions)
    return setup.scorer.score(predictions, images=setup.dataset["image"], references=setup.dataset["references"])


def test_scores_in_eval_logs_equal_direct_scorer_call(setup, trained):
    evals = [entry for entry in trained.state.log_history if "eval_clip_s" in entry]
    assert len(evals) == 1 and evals[0]["step"] == 2
    expected = direct_scores(setup, trained)
    assert evals[0]["eval_clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)
    assert evals[0]["eval_refclip_s"] == pytest.approx(expected["refclip_s"], abs=1e-6)
    assert not any(key.endswith("per_sample") for key in evals[0])
    # the alignment matters: the same captions against rotated images score differently
    rotated = setup.scorer.score(decoded_predictions(trained, setup.dataset, setup.tokenizer),
                                 images=setup.dataset["image"][1:] + setup.dataset["image"][:1])
    assert rotated["clip_s"] != pytest.approx(expected["clip_s"], abs=1e-4)


def test_batch_eval_metrics_in_dataset_order(setup, trained, tmp_path):
    """Batches without inputs: matched by position across batches (verified by labels), scored once at the end."""
    from transformers import Seq2SeqTrainer

    compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, setup.dataset, references_column="references")
    trainer = Seq2SeqTrainer(model=trained.model, args=training_args(tmp_path, batch_eval_metrics=True),
                             eval_dataset=setup.dataset, data_collator=collate, compute_metrics=compute_metrics,
                             processing_class=setup.tokenizer)
    expected = direct_scores(setup, trained)
    for _ in range(2):  # a second pass starts afresh
        metrics = trainer.evaluate()
        assert metrics["eval_clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)
        assert metrics["eval_refclip_s"] == pytest.approx(expected["refclip_s"], abs=1e-6)


class _ShuffledEvalTrainer:
    """Seq2SeqTrainer evaluating in a fixed non-sequential order (as a custom sampler or grouping would)."""

    @staticmethod
    def build(model, args, setup, compute_metrics):
        from transformers import Seq2SeqTrainer

        class Shuffled(Seq2SeqTrainer):
            def _get_eval_sampler(self, eval_dataset):
                return [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]

        return Shuffled(model=model, args=args, eval_dataset=setup.dataset, data_collator=collate,
                        compute_metrics=compute_metrics, processing_class=setup.tokenizer)


@pytest.mark.parametrize("batch_eval_metrics", [True, False])
def test_out_of_order_evaluation_matched_by_inputs(setup, trained, tmp_path, batch_eval_metrics):
    compute_metrics = make_compute_metrics("clip_s", setup.tokenizer, setup.dataset, references_column="references",
                                           metric_options={"device": "cpu"})
    args = training_args(tmp_path, include_for_metrics=["inputs"], batch_eval_metrics=batch_eval_metrics)
    trainer = _ShuffledEvalTrainer.build(trained.model, args, setup, compute_metrics)
    if batch_eval_metrics:
        metrics = trainer.evaluate()
    else:  # the Trainer kept every input until the end
        with pytest.warns(UserWarning, match="set batch_eval_metrics=True"):
            metrics = trainer.evaluate()
    expected = direct_scores(setup, trained)
    assert metrics["eval_clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)
    assert metrics["eval_refclip_s"] == pytest.approx(expected["refclip_s"], abs=1e-6)


def test_out_of_order_evaluation_without_inputs_raises(setup, trained, tmp_path):
    compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, setup.dataset)
    trainer = _ShuffledEvalTrainer.build(trained.model, training_args(tmp_path), setup, compute_metrics)
    with pytest.raises(AlignmentError, match="not the dataset order"):
        trainer.evaluate()


def test_evaluate_module_metric(setup, trained, tmp_path):
    import evaluate

    from capeval.modules import module_dir

    module = evaluate.load(str(module_dir("clip_s") / "clip_s.py"), device="cpu")
    compute_metrics = make_compute_metrics(module, setup.tokenizer, setup.dataset, references_column="references")
    args = training_args(tmp_path, include_for_metrics=["inputs"], batch_eval_metrics=True)
    metrics = _ShuffledEvalTrainer.build(trained.model, args, setup, compute_metrics).evaluate()
    expected = direct_scores(setup, trained)
    assert metrics["eval_clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)


# Direct calls with hand-made EvalPrediction-like objects (no training).

def _ids(tokenizer, texts, width, fill):
    rows = [tokenizer(t)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    return np.array([r + [fill] * (width - len(r)) for r in rows])


def test_decoding_drops_padding_and_minus_100(setup):
    texts = ["a red square", "a green circle with stripe", "a blue stripe"]
    predictions = _ids(setup.tokenizer, texts, 9, setup.tokenizer.pad_token_id)
    predictions[0, 6:] = -100  # the Trainer's cross-batch padding
    subset = setup.dataset.select(range(3))
    labels = _ids(setup.tokenizer, subset["caption"], 6, -100)
    compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, subset, references_column="references")
    metrics = compute_metrics(SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None))
    expected = setup.scorer.score(texts, images=subset["image"], references=subset["references"])
    assert metrics.pop("hashcode") == expected["hashcode"] == setup.scorer.hashcode
    assert metrics == pytest.approx({k: expected[k] for k in ("clip_s", "refclip_s", "truncated_texts")})


def test_empty_predictions_raise_or_follow_the_empty_caption_policy(setup):
    subset = setup.dataset.select(range(3))
    labels = _ids(setup.tokenizer, subset["caption"], 6, -100)
    predictions = _ids(setup.tokenizer, ["a red square", "", "a blue stripe"], 6, setup.tokenizer.pad_token_id)
    eval_pred = SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None)
    with pytest.raises(InputError, match="empty .*sample 1, eval_dataset row 1.*clip_s does not score empty captions: "
                                         "pass empty_caption="):
        make_compute_metrics(setup.scorer, setup.tokenizer, subset)(eval_pred)
    with pytest.raises(InputError, match="empty .*sample 1, eval_dataset row 1.*empty_caption="):
        make_compute_metrics(setup.scorer, setup.tokenizer, subset, empty_caption="error")(eval_pred)
    kept = setup.scorer.score(["a red square", "a blue stripe"], images=[subset["image"][0], subset["image"][2]])
    fixed = make_compute_metrics(setup.scorer, setup.tokenizer, subset, empty_caption=0.0)(eval_pred)
    assert fixed["clip_s"] == pytest.approx(sum(kept["clip_s_per_sample"]) / 3)
    assert fixed["empty_captions"] == 1
    skipped = make_compute_metrics(setup.scorer, setup.tokenizer, subset, empty_caption="skip")(eval_pred)
    assert skipped["clip_s"] == kept["clip_s"] and skipped["skipped_empty_captions"] == 1
    nothing = _ids(setup.tokenizer, [""] * 3, 6, setup.tokenizer.pad_token_id)
    none_scored = make_compute_metrics(setup.scorer, setup.tokenizer, subset, empty_caption="skip")(
        SimpleNamespace(predictions=nothing, label_ids=labels, inputs=None))
    assert {k: v for k, v in none_scored.items() if k != "hashcode"} == {"skipped_empty_captions": 3}


def _pycocoevalcap(captions, references, meteor):
    """pycocoevalcap 1.2's corpus values (its PTB tokenizer and scorers, with their jars) as COCOEvalCap names them."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    from capeval.text.coco_jars import require_java

    require_java("the pycocoevalcap oracle")
    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({i: [{"caption": r} for r in refs] for i, refs in enumerate(references)})
    res = tokenizer.tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    bleu, _ = Bleu(4).compute_score(gts, res)
    values = {f"bleu_{n}": float(v) for n, v in enumerate(bleu, start=1)}
    for key, scorer in (("meteor", meteor), ("rouge_l", Rouge()), ("cider", Cider())):
        values[key] = float(scorer.compute_score(gts, res)[0])
    return values


@pytest.fixture(scope="module")
def pycocoevalcap_values(pycocoevalcap_meteor):
    """``_pycocoevalcap``, each distinct input computed once for the module (with the process's METEOR jar)."""
    from memo import memoised  # (inside: the DDP workers import this module without the tests folder on their path)

    values = memoised(lambda captions, references: _pycocoevalcap(captions, references, pycocoevalcap_meteor))
    return lambda captions, references: values(list(captions), [list(refs) for refs in references])


@pytest.mark.parametrize("metric", ["cider", ("bleu", "meteor", "rouge_l", "cider")])
def test_an_empty_decoded_caption_is_scored_as_pycocoevalcap_scores_it(setup, pycocoevalcap_values, metric):
    """A generator can output an empty string: the COCO metrics (alone or as a suite) score it by default as
    pycocoevalcap does, and refuse it under empty_caption="error", naming the row and the option."""
    from capeval.integrations.transformers import _decode

    subset = setup.dataset.select(range(len(WITH_EMPTY)))
    predictions = _ids(setup.tokenizer, WITH_EMPTY, 9, setup.tokenizer.pad_token_id)
    eval_pred = SimpleNamespace(predictions=predictions, label_ids=_ids(setup.tokenizer, subset["caption"], 6, -100),
                                inputs=None)
    decoded = _decode(setup.tokenizer, predictions)
    assert decoded[1] == ""
    expected = pycocoevalcap_values(decoded, subset["references"])
    metric = metric if isinstance(metric, str) else list(metric)
    logged = make_compute_metrics(metric, setup.tokenizer, subset, references_column="references")(eval_pred)
    logged.pop("hashcode")
    assert logged == ({"cider": expected["cider"]} if metric == "cider" else expected)
    with pytest.raises(InputError, match="(sample 1, eval_dataset row 1|the caption of image 1 is an empty caption).*"
                                         "empty_caption='score'"):
        make_compute_metrics(metric, setup.tokenizer, subset, references_column="references",
                             empty_caption="error")(eval_pred)


@pytest.mark.parametrize("policy", [float("nan"), float("inf"), "zero", True])
def test_empty_caption_policy_must_be_finite(setup, policy):
    with pytest.raises(InputError, match="empty_caption must be 'score', 'error', 'skip' or a finite score"):
        make_compute_metrics(setup.scorer, setup.tokenizer, setup.dataset, empty_caption=policy)


def test_a_fixed_empty_score_is_refused_for_corpus_level_metrics(setup):
    with pytest.raises(InputError, match="bleu is corpus-level.*empty_caption='skip'"):
        make_compute_metrics("bleu", setup.tokenizer, setup.dataset, references_column="references",
                             empty_caption=0.0)


# fast settings of the slow tiny pipelines (as in tests/core/test_scorer_contract.py)
FAST = FAST_TINY_OPTIONS
# an empty caption, and one without noun phrases (HICE-S: an undefined local term, left out of its mean)
WITH_EMPTY = ["a red square", "", "a picture of a blue stripe", "with of"]


@pytest.mark.parametrize("name", sorted(scorers()))
def test_logged_values_equal_the_scorers_on_the_same_inputs(setup, name):
    """Every registered metric, by name, with an empty caption: per-sample metrics under a fixed score, corpus-level
    ones under "skip" (their corpus values: those of the other captions, never a mean of sentence values)."""
    spec = scorers()[name]
    subset = setup.dataset.select(range(len(WITH_EMPTY)))
    options = {"device": "cpu", **FAST.get(name, {})}
    if name == "cider_fixed_idf":
        from capeval.text.fixed_idf_cider import build_document_frequencies

        options["idf"] = build_document_frequencies(setup.dataset["references"])
    policy = "skip" if spec.is_corpus_level(options) else 0.0
    references_column = None if spec.references == "unused" else "references"
    compute_metrics = make_compute_metrics(name, setup.tokenizer, subset, references_column=references_column,
                                           metric_options=options, empty_caption=policy)
    eval_pred = SimpleNamespace(predictions=_ids(setup.tokenizer, WITH_EMPTY, 9, setup.tokenizer.pad_token_id),
                                label_ids=_ids(setup.tokenizer, subset["caption"], 6, -100), inputs=None)
    scorer = load_scorer(name, **options)
    inputs = {"images": None if spec.images == "unused" else subset["image"],
              "references": None if references_column is None else subset["references"]}
    if name == "spice":
        with pytest.raises(ModelNotAvailableError):
            compute_metrics(eval_pred)
        return
    logged = compute_metrics(eval_pred)
    expected = scorer.score(WITH_EMPTY, **inputs, empty_caption=policy)
    numbers = {k: float(v) for k, v in expected.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert logged == {**numbers, "hashcode": expected["hashcode"]}
    assert logged["empty_captions" if policy == 0.0 else "skipped_empty_captions"] == 1
    if policy == "skip":
        kept = scorer.score([WITH_EMPTY[i] for i in (0, 2, 3)],
                            **{k: None if v is None else [v[i] for i in (0, 2, 3)] for k, v in inputs.items()})
        assert {k: logged[k] for k in kept if k in logged and isinstance(kept[k], float)} == \
            {k: v for k, v in kept.items() if isinstance(v, float)}
    own_means = [k for k, v in expected.items() if f"{k}_per_sample" in expected and v == v]
    assert all(np.isfinite(logged[k]) for k in own_means)  # a finite mean of the scorer is logged finite


@pytest.mark.filterwarnings("ignore:the Trainer kept all")
def test_wrong_dataset_or_missing_labels_raise(setup):
    subset = setup.dataset.select(range(3))
    predictions = _ids(setup.tokenizer, ["a red square"] * 3, 6, setup.tokenizer.pad_token_id)
    labels = _ids(setup.tokenizer, subset["caption"], 6, -100)
    too_long = make_compute_metrics(setup.scorer, setup.tokenizer, setup.dataset.select(range(4)))
    with pytest.raises(AlignmentError, match="evaluated 3 samples but eval_dataset has 4 rows"):
        too_long(SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None))
    unlabelled = make_compute_metrics(setup.scorer, setup.tokenizer, subset.remove_columns("labels"))
    with pytest.raises(AlignmentError, match="cannot verify"):
        unlabelled(SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None))
    foreign = np.random.default_rng(1).normal(size=(3, 3, 32, 32)).astype(np.float32)
    by_content = make_compute_metrics(setup.scorer, setup.tokenizer, subset)
    with pytest.raises(AlignmentError, match="no eval_dataset row has the same"):
        by_content(SimpleNamespace(predictions=predictions, label_ids=labels, inputs=foreign))


def test_missing_references_for_reference_metric_and_bad_columns(setup):
    with pytest.raises(InputError, match="no column"):
        make_compute_metrics(setup.scorer, setup.tokenizer, setup.dataset, references_column="captions")
    with pytest.raises(TypeError):
        make_compute_metrics(42, setup.tokenizer, setup.dataset)


@pytest.mark.filterwarnings("ignore:the Trainer kept all")
def test_on_the_fly_transform_matched_by_content(setup):
    """A dataset preprocessed by ``with_transform`` (no stored pixel values), evaluated in reverse order."""
    raw = setup.dataset.select(range(4)).select_columns(["image", "caption", "references"])

    def transform(batch):
        pixels = setup.image_processor([im.convert("RGB") for im in batch["image"]], return_tensors="np")
        return {"pixel_values": list(pixels["pixel_values"]),
                "labels": [ids + [setup.tokenizer.eos_token_id] for ids in setup.tokenizer(batch["caption"])["input_ids"]]}

    transformed = raw.with_transform(transform)
    order = [3, 1, 0, 2]
    texts = ["a red square", "a blue stripe", "a green circle", "a pink square"]
    batch = collate([transformed[i] for i in order])
    compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, transformed, references_column="references")
    metrics = compute_metrics(SimpleNamespace(predictions=_ids(setup.tokenizer, texts, 6, setup.tokenizer.pad_token_id),
                                              label_ids=batch["labels"].numpy(), inputs=batch["pixel_values"].numpy()))
    expected = setup.scorer.score(texts, images=[raw["image"][i] for i in order],
                                  references=[raw["references"][i] for i in order])
    assert metrics["clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)
    assert metrics["refclip_s"] == pytest.approx(expected["refclip_s"], abs=1e-6)


def test_dict_of_eval_datasets_scores_each_against_its_own_rows(setup, trained, tmp_path):
    """Each evaluation pass goes to the one dataset whose rows it matches, by position and by content."""
    from transformers import Seq2SeqTrainer

    eval_datasets = {"all": setup.dataset, "part": setup.dataset.select([6, 2, 9, 4, 0, 7, 3])}
    for overrides in ({}, {"batch_eval_metrics": True, "include_for_metrics": ["inputs"]}):
        compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, eval_datasets,
                                               references_column="references")
        trainer = Seq2SeqTrainer(model=trained.model, args=training_args(tmp_path, **overrides),
                                 eval_dataset=eval_datasets, data_collator=collate, compute_metrics=compute_metrics,
                                 processing_class=setup.tokenizer)
        metrics = trainer.evaluate()
        for name, dataset in eval_datasets.items():
            captions = decoded_predictions(trained, dataset, setup.tokenizer)
            expected = setup.scorer.score(captions, images=dataset["image"], references=dataset["references"])
            assert metrics[f"eval_{name}_clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)
            assert metrics[f"eval_{name}_refclip_s"] == pytest.approx(expected["refclip_s"], abs=1e-6)


def test_dict_of_eval_datasets_refuses_no_match_and_ambiguity(setup):
    subset = setup.dataset.select(range(3))
    predictions = _ids(setup.tokenizer, ["a red square"] * 3, 6, setup.tokenizer.pad_token_id)
    labels = _ids(setup.tokenizer, subset["caption"], 6, -100)
    eval_pred = SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None)
    other = setup.dataset.select([3, 4, 5])
    with pytest.raises(AlignmentError, match="match none of the eval datasets: a: .*; b: "):
        make_compute_metrics(setup.scorer, setup.tokenizer, {"a": other, "b": setup.dataset})(eval_pred)
    with pytest.raises(AlignmentError, match=r"match several eval datasets \(\['a', 'b'\]\)"):
        make_compute_metrics(setup.scorer, setup.tokenizer, {"a": subset, "b": subset.select(range(3))})(eval_pred)
    with pytest.raises(InputError, match=r"eval_dataset\['b'\] has no column"):
        make_compute_metrics(setup.scorer, setup.tokenizer, {"a": subset, "b": subset.remove_columns("image")})


def test_whole_pass_inputs_warn_about_memory(setup):
    """Without batch_eval_metrics the Trainer keeps every input until the end: the hook says so, once."""
    subset = setup.dataset.select(range(3))
    batch = collate([subset[i] for i in range(3)])
    predictions = _ids(setup.tokenizer, ["a red square"] * 3, 6, setup.tokenizer.pad_token_id)
    eval_pred = SimpleNamespace(predictions=predictions, label_ids=batch["labels"].numpy(),
                                inputs=batch["pixel_values"].numpy())
    compute_metrics = make_compute_metrics(setup.scorer, setup.tokenizer, subset)
    with pytest.warns(UserWarning, match=r"kept all 0\.0 MiB of evaluation inputs.*batch_eval_metrics=True"):
        compute_metrics(eval_pred)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compute_metrics(eval_pred)  # once per hook
        batched = SimpleNamespace(predictions=eval_pred.predictions, label_ids=eval_pred.label_ids,
                                  inputs={"pixel_values": batch["pixel_values"]})
        make_compute_metrics(setup.scorer, setup.tokenizer, subset)(batched, compute_result=True)


def test_ddp_padding_samples_are_checked_and_left_out(setup):
    """Seq2SeqTrainer's last DDP batch ends with the pass's first samples again: left out only when they are."""
    subset = setup.dataset.select(range(3))
    labels = _ids(setup.tokenizer, setup.dataset.select([0, 1, 2, 0, 1])["caption"], 6, -100).tolist()
    batch = collate([setup.dataset[i] for i in (0, 1, 2, 0, 1)])
    samples = _fingerprints(batch["pixel_values"].numpy())
    for by_content in (False, True):
        matcher = _RowMatcher(subset, setup.tokenizer.pad_token_id, "labels", "pixel_values", 1e-3)
        assert matcher.match(5, labels, samples if by_content else None, tail=True) == [0, 1, 2]
        matcher.finish()
        matcher.reset()
        with pytest.raises(AlignmentError, match="more evaluated samples than the 3 rows"):
            matcher.match(5, labels, samples if by_content else None)  # not the last batch under DDP
        matcher.reset()
        wrong = labels[:3] + [labels[1], labels[0]]
        with pytest.raises(AlignmentError, match="sample 3 is beyond the 3 rows of eval_dataset and does not repeat "
                                                 "sample 0"):
            matcher.match(5, wrong, samples[[0, 1, 2, 1, 0]] if by_content else None, tail=True)


# DDP: the same evaluations in two gloo processes and in this one.

EVAL_MODES = {"batch_inputs": {"batch_eval_metrics": True, "include_for_metrics": ["inputs"]},
              "whole_inputs": {"include_for_metrics": ["inputs"]},
              "batch_position": {"batch_eval_metrics": True}}


def _count_samples(obj, method: str, counts: dict, key: str) -> None:
    """Count the samples ``obj.method`` scores in this process (the real method still does the work)."""
    original = getattr(obj, method)

    def counted(*args, **kwargs):
        result = original(*args, **kwargs)
        counts[key] += len(result["clip_s_per_sample"])
        return result

    setattr(obj, method, counted)


def evaluate_modes(output_dir) -> dict:
    """Evaluate an untrained tiny model on a dict of two eval datasets (10 and 7 rows: uneven last batches under
    DDP) in each mode, with a clip_s scorer (split across processes) and, in batch_inputs mode, the clip_s
    evaluate module (scored in the main process only) and clip_s by name (loaded where it scores). Returns the metrics, the samples each metric scored in
    this process, and the generated captions."""
    import evaluate
    from transformers import Seq2SeqTrainer

    from capeval.modules import module_dir

    tokenizer = make_tokenizer()
    dataset = make_dataset(tokenizer, make_image_processor())
    eval_datasets = {"all": dataset, "part": dataset.select([6, 2, 9, 4, 0, 7, 3])}
    model = make_model(tokenizer)
    counts = {"scorer": 0, "module": 0}
    scorer = load_scorer("clip_s", device="cpu")
    _count_samples(scorer, "score_inputs", counts, "scorer")
    module = evaluate.load(str(module_dir("clip_s") / "clip_s.py"), device="cpu")
    _count_samples(module, "compute", counts, "module")
    runs = [(mode, scorer) for mode in EVAL_MODES] + [("batch_inputs_module", module), ("batch_inputs_name", "clip_s")]
    metrics = {}
    for run, metric in runs:
        options = {"device": "cpu"} if isinstance(metric, str) else None
        compute_metrics = make_compute_metrics(metric, tokenizer, eval_datasets, references_column="references",
                                               metric_options=options)
        args = training_args(output_dir, **EVAL_MODES[run.replace("_module", "").replace("_name", "")])
        trainer = Seq2SeqTrainer(model=model, args=args, eval_dataset=eval_datasets, data_collator=collate,
                                 compute_metrics=compute_metrics, processing_class=tokenizer)
        metrics[run] = {k: v for k, v in trainer.evaluate().items() if "clip_s" in k or "truncated" in k}
    captions = {name: decoded_predictions(trainer, data, tokenizer) for name, data in eval_datasets.items()}
    return {"metrics": metrics, "counts": counts, "captions": captions}


# one torchrun for the module: each process evaluates every mode, then scores the captions with empty ones
DDP_WORKER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import test_transformers_integration as t

rank = os.environ["RANK"]
json.dump(t.evaluate_modes(sys.argv[2]), open(os.path.join(sys.argv[2], f"rank{rank}.json"), "w"))
json.dump(t.score_with_empty_captions(), open(os.path.join(sys.argv[2], f"empty{rank}.json"), "w"))
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_gloo_processes(worker: str, tmp_path, env: dict) -> None:
    """``worker`` (given this test folder and ``tmp_path``) in two CPU processes under torchrun, one thread each."""
    (tmp_path / "worker.py").write_text(worker)
    env = {**os.environ, **env, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), str(tmp_path / "worker.py"), str(Path(__file__).parent),
           str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]


@pytest.fixture(scope="module")
def ddp_run(tiny_hub, tmp_path_factory):
    """The folder of the module's one torchrun of :data:`DDP_WORKER` (two gloo processes)."""
    folder = tmp_path_factory.mktemp("ddp")
    offline = {k: "1" for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_EVALUATE_OFFLINE")}
    _run_two_gloo_processes(DDP_WORKER, folder, {**offline, "HF_HUB_CACHE": str(tiny_hub),
                                                 "HF_MODULES_CACHE": str(folder / "modules")})
    return folder


def test_ddp_two_gloo_processes_equal_one_process(ddp_run, tmp_path):
    """torchrun --nproc_per_node=2 (gloo, CPU): with batch_eval_metrics + include_for_metrics=["inputs"] the
    Trainer passes gathered predictions but local inputs; every mode, on a dict of eval datasets, gives the
    one-process metrics in both processes; the scorer's samples are split, the module scores in process 0."""
    ranks = [json.loads((ddp_run / f"rank{rank}.json").read_text()) for rank in range(2)]

    single = evaluate_modes(tmp_path / "single")
    scorer = load_scorer("clip_s", device="cpu")
    dataset = make_dataset(make_tokenizer(), make_image_processor())
    subsets = {"all": dataset, "part": dataset.select([6, 2, 9, 4, 0, 7, 3])}
    for name, subset in subsets.items():  # the one-process metrics, computed independently
        expected = scorer.score(single["captions"][name], images=subset["image"], references=subset["references"])
        for run in single["metrics"]:
            assert single["metrics"][run][f"eval_{name}_clip_s"] == pytest.approx(expected["clip_s"], abs=1e-6)
            assert single["metrics"][run][f"eval_{name}_refclip_s"] == pytest.approx(expected["refclip_s"], abs=1e-6)
    for out in ranks:
        assert out["captions"] == single["captions"]
        assert out["metrics"].keys() == single["metrics"].keys()
        for run, metrics in single["metrics"].items():
            assert out["metrics"][run].keys() == metrics.keys()
            for key, value in metrics.items():
                assert out["metrics"][run][key] == pytest.approx(value, abs=1e-6), (run, key)
    scored = [out["counts"] for out in ranks]
    assert single["counts"]["scorer"] == 3 * 17 and single["counts"]["module"] == 17
    assert [c["scorer"] for c in scored] == [27, 24]  # per pass: 5 + 5 of "all", 4 + 3 of "part"
    assert [c["module"] for c in scored] == [17, 0]


DDP_WITH_EMPTY = ["a red square", "", "a blue stripe", "a green circle", ""]


def score_with_empty_captions() -> dict:
    """The hook's metrics for captions with two empty ones, under "skip" and a fixed score (clip_s by name)."""
    tokenizer = make_tokenizer()
    dataset = make_dataset(tokenizer, make_image_processor()).select(range(len(DDP_WITH_EMPTY)))
    eval_pred = SimpleNamespace(predictions=_ids(tokenizer, DDP_WITH_EMPTY, 9, tokenizer.pad_token_id),
                                label_ids=_ids(tokenizer, dataset["caption"], 6, -100), inputs=None)
    out = {}
    for policy in ("skip", 0.25):
        compute_metrics = make_compute_metrics("clip_s", tokenizer, dataset, references_column="references",
                                               metric_options={"device": "cpu"}, empty_caption=policy)
        out[str(policy)] = compute_metrics(eval_pred)
    return out


def test_ddp_empty_captions_logged_as_the_scorer_scores_them(ddp_run):
    """Under DDP each process scores its share of the non-empty captions; the merged metrics are the scorer's own
    under the same policy."""
    ranks = [json.loads((ddp_run / f"empty{rank}.json").read_text()) for rank in range(2)]
    scorer = load_scorer("clip_s", device="cpu")
    dataset = make_dataset(make_tokenizer(), make_image_processor()).select(range(len(DDP_WITH_EMPTY)))
    for policy in ("skip", 0.25):
        expected = scorer.score(DDP_WITH_EMPTY, images=dataset["image"], references=dataset["references"],
                                empty_caption=policy)
        numbers = {k: v for k, v in expected.items() if isinstance(v, (int, float))}
        for out in ranks:
            assert out[str(policy)].pop("hashcode") == expected["hashcode"]
            assert out[str(policy)] == pytest.approx(numbers, abs=1e-6)
