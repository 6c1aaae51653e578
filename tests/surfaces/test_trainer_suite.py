"""The Seq2SeqTrainer hook with a metric suite (``make_compute_metrics(["coco", "clip_s"], ...)``): one pass through
:func:`capeval.suite.score_suite`, every logged value equal to the hook run with that metric alone, each CLIP backbone
loaded once (RefCLIP-S and Polos share OpenAI ViT-B/32; counted on the real ``ClipBackbone.__init__``), and a real
Trainer evaluation logging the suite."""

from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from test_transformers_integration import (_ids, collate, decoded_predictions, make_dataset,  # noqa: E402
                                           make_image_processor, make_model, make_tokenizer, training_args)

from capeval import InputError  # noqa: E402
from capeval.integrations.transformers import make_compute_metrics  # noqa: E402
from capeval.suite import select_metrics  # noqa: E402

CAPTIONS = ["a red square", "a picture of a green circle", "a blue stripe with a square", "a yellow circle"]


@pytest.fixture(scope="module")
def setup(tiny_hub):
    tokenizer = make_tokenizer()
    dataset = make_dataset(tokenizer, make_image_processor())
    subset = dataset.select(range(len(CAPTIONS)))
    eval_pred = SimpleNamespace(predictions=_ids(tokenizer, CAPTIONS, 9, tokenizer.pad_token_id),
                                label_ids=_ids(tokenizer, subset["caption"], 6, -100), inputs=None)
    return SimpleNamespace(tokenizer=tokenizer, dataset=dataset, subset=subset, eval_pred=eval_pred)


def alone(setup, name):
    """The hook with one metric, on the same predictions."""
    return make_compute_metrics(name, setup.tokenizer, setup.subset, references_column="references",
                                metric_options={"device": "cpu"})(setup.eval_pred)


def test_a_suite_logs_what_each_metric_logs_alone(setup):
    suite = make_compute_metrics(["coco", "clip_s"], setup.tokenizer, setup.subset, references_column="references",
                                 metric_options={"device": "cpu"})(setup.eval_pred)
    hashcodes = suite.pop("hashcode").split(" + ")
    expected = {}
    for name in select_metrics(["coco", "clip_s"]).names:
        values = alone(setup, name)
        assert values["hashcode"] in hashcodes
        expected.update({key: value for key, value in values.items() if key in suite})
    assert set(expected) == set(suite) >= {"bleu_1", "bleu_4", "meteor", "rouge_l", "cider", "clip_s", "refclip_s"}
    assert suite == expected  # bitwise


def test_refclip_s_and_polos_share_one_backbone_load(setup, clip_loads):
    compute_metrics = make_compute_metrics(["clip_s", "polos"], setup.tokenizer, setup.subset,
                                           references_column="references", metric_options={"device": "cpu"})
    suite = compute_metrics(setup.eval_pred)
    assert clip_loads == ["openai-clip-vit-b-32"]
    clip_loads.clear()
    separately = {**alone(setup, "clip_s"), **alone(setup, "polos")}
    assert clip_loads == ["openai-clip-vit-b-32", "openai-clip-vit-b-32"]  # alone, each loads its own
    assert {key: suite[key] for key in ("clip_s", "refclip_s", "polos")} == \
        {key: separately[key] for key in ("clip_s", "refclip_s", "polos")}


def test_a_suite_in_a_trainer_evaluation(setup, tmp_path):
    """A real Seq2SeqTrainer evaluation (batches, positional matching checked by labels) logs the suite."""
    from transformers import Seq2SeqTrainer

    compute_metrics = make_compute_metrics(["bleu", "clip_s"], setup.tokenizer, setup.dataset,
                                           references_column="references", metric_options={"device": "cpu"})
    trainer = Seq2SeqTrainer(model=make_model(setup.tokenizer), args=training_args(tmp_path, batch_eval_metrics=True),
                             eval_dataset=setup.dataset, data_collator=collate, compute_metrics=compute_metrics,
                             processing_class=setup.tokenizer)
    metrics = trainer.evaluate()
    captions = decoded_predictions(trainer, setup.dataset, setup.tokenizer)
    direct = SimpleNamespace(predictions=_ids(setup.tokenizer, captions, 12, setup.tokenizer.pad_token_id),
                             label_ids=_ids(setup.tokenizer, setup.dataset["caption"], 6, -100), inputs=None)
    for name, keys in (("bleu", ("bleu_1", "bleu_4")), ("clip_s", ("clip_s", "refclip_s"))):
        values = make_compute_metrics(name, setup.tokenizer, setup.dataset, references_column="references",
                                      metric_options={"device": "cpu"})(direct)
        for key in keys:
            assert metrics[f"eval_{key}"] == values[key], key


@pytest.mark.parametrize("metrics, options, message", [
    (["coco", "nosuch"], {}, "unknown metric 'nosuch'"),
    ([], {}, "non-empty list of metric names"),
    (["clip_s"], {"devcie": "cpu"}, "'devcie' is neither a runtime option"),
    (["clip_s"], {"polos": {"batch_size": 2}}, "'polos' is neither a runtime option"),
    (["clip_s"], {"clip_s": {"no_such_option": 1}}, "no_such_option"),
])
def test_bad_suites_are_refused_before_any_model_loads(setup, clip_loads, metrics, options, message):
    with pytest.raises(InputError, match=message):
        make_compute_metrics(metrics, setup.tokenizer, setup.subset, references_column="references",
                             metric_options=options)
    assert clip_loads == []


def test_a_suite_refuses_a_skip_or_fixed_empty_caption_policy_and_needs_references(setup):
    with pytest.raises(InputError, match="empty_caption must be 'score' or 'error' in a suite, not 'skip'"):
        make_compute_metrics(["coco"], setup.tokenizer, setup.subset, references_column="references",
                             empty_caption="skip")
    with pytest.raises(InputError, match="needs references: pass references_column="):
        make_compute_metrics(["coco", "clip_s"], setup.tokenizer, setup.subset)


def test_a_reference_free_suite(setup):
    """Without references_column a suite of reference-free metrics logs what the metric logs alone, without refs."""
    suite = make_compute_metrics(["clip_s"], setup.tokenizer, setup.subset,
                                 metric_options={"device": "cpu"})(setup.eval_pred)
    single = make_compute_metrics("clip_s", setup.tokenizer, setup.subset,
                                  metric_options={"device": "cpu"})(setup.eval_pred)
    assert suite == {"clip_s": single["clip_s"], "hashcode": single["hashcode"]}
