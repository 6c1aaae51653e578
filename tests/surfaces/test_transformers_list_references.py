"""The Trainer hook reads a references column through the one record → column mapping (``RecordColumns``): list
text in a cell (a dataset loaded from CSV) is the list it holds, as ``capeval score`` reads it (issue #27 item 2)."""

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from capeval import InputError  # noqa: E402
from capeval.integrations.transformers import make_compute_metrics  # noqa: E402

from test_transformers_integration import _ids, make_dataset, make_image_processor, make_tokenizer  # noqa: E402

CAPTIONS = ["a red square", "a picture of a green circle", "a blue stripe with a square"]


@pytest.fixture(scope="module")
def setup(tiny_hub):
    tokenizer = make_tokenizer()
    dataset = make_dataset(tokenizer, make_image_processor(), n=len(CAPTIONS))
    lists = [refs + ["a picture of a gray circle"] for refs in dataset["references"]]  # two or three references
    dataset = dataset.remove_columns("references").add_column("references", lists)
    as_text = dataset.add_column("gt", [json.dumps(refs) for refs in lists])  # as a CSV file holds them
    return SimpleNamespace(tokenizer=tokenizer, dataset=dataset, as_text=as_text)


def _eval_pred(setup, dataset):
    return SimpleNamespace(predictions=_ids(setup.tokenizer, CAPTIONS, 9, setup.tokenizer.pad_token_id),
                           label_ids=_ids(setup.tokenizer, dataset["caption"], 6, -100), inputs=None)


@pytest.mark.parametrize("metric, key", [("bleu", "bleu_4"), ("clip_s", "refclip_s")])
def test_list_text_references_log_what_real_lists_log(setup, metric, key):
    options = {"device": "cpu"}
    lists = make_compute_metrics(metric, setup.tokenizer, setup.dataset, references_column="references",
                                 metric_options=options)(_eval_pred(setup, setup.dataset))
    texts = make_compute_metrics(metric, setup.tokenizer, setup.as_text, references_column="gt",
                                 metric_options=options)(_eval_pred(setup, setup.as_text))
    assert texts[key] == lists[key]
    assert texts == lists


def test_bad_list_text_names_the_eval_dataset_row_and_the_column(setup):
    broken = setup.as_text.remove_columns("gt").add_column("gt", ['["a red square"]', '["a circle"', '["x"]'])
    compute_metrics = make_compute_metrics("bleu", setup.tokenizer, broken, references_column="gt")
    with pytest.raises(InputError, match=r"^eval_dataset row 1: 'gt' is not a JSON list"):
        compute_metrics(_eval_pred(setup, broken))
