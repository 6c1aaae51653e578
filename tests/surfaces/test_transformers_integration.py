"""make_compute_metrics with a tiny VisionEncoderDecoder trained by Seq2SeqTrainer(predict_with_generate=True)."""

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("transformers")

from capeval import InputError  # noqa: E402
from capeval.integrations.transformers import AlignmentError, make_compute_metrics  # noqa: E402
from capeval.core.scoring import load_scorer  # noqa: E402

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


@pytest.fixture(scope="module")
def setup(tiny_hub):
    from transformers import ViTImageProcessor

    tokenizer = make_tokenizer()
    image_processor = ViTImageProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
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
    """The trained model's captions for ``dataset`` in dataset order, decoded here independently."""
    output = trainer.predict(dataset)
    ids = np.where(output.predictions < 0, tokenizer.pad_token_id, output.predictions)
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
    metrics = _ShuffledEvalTrainer.build(trained.model, args, setup, compute_metrics).evaluate()
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
    assert metrics == pytest.approx({k: expected[k] for k in ("clip_s", "refclip_s", "truncated_texts")})


def test_empty_predictions_raise_or_get_empty_score(setup):
    subset = setup.dataset.select(range(3))
    labels = _ids(setup.tokenizer, subset["caption"], 6, -100)
    predictions = _ids(setup.tokenizer, ["a red square", "", "a blue stripe"], 6, setup.tokenizer.pad_token_id)
    eval_pred = SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None)
    with pytest.raises(InputError, match="empty"):
        make_compute_metrics(setup.scorer, setup.tokenizer, subset)(eval_pred)
    metrics = make_compute_metrics(setup.scorer, setup.tokenizer, subset, empty_score=0.0)(eval_pred)
    kept = setup.scorer.score(["a red square", "a blue stripe"], images=[subset["image"][0], subset["image"][2]])
    assert metrics["clip_s"] == pytest.approx(sum(kept["clip_s_per_sample"]) / 3)
    assert metrics["empty_predictions"] == 1


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
