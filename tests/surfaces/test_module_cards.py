"""The metric cards' Space YAML fields that the Hub reads, and the evaluate template's sections."""

import configparser
from pathlib import Path

import pytest
import yaml

from capeval.core.hub import registered_weights
from capeval.modules import available_modules

REPO = Path(__file__).resolve().parents[2]
MODULES = available_modules()


def _card(name):
    text = (MODULES[name] / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1]), text


@pytest.mark.parametrize("name", sorted(MODULES))
def test_space_yaml_fields(name):
    meta, _ = _card(name)
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert isinstance(meta["short_description"], str) and 0 < len(meta["short_description"]) <= 60
    assert meta["license"] == setup["metadata"]["license"].lower()  # the Space holds capeval's code
    kind = {"metrics": "metric", "measurements": "measurement"}[MODULES[name].parent.name]
    assert {"evaluate", kind, "capeval"} <= set(meta["tags"])
    hub_ids = {spec.repo_id for spec in registered_weights().values()}
    models = meta.get("models", [])
    assert set(models) <= hub_ids, set(models) - hub_ids
    assert bool(models) == (kind == "metric")  # every metric runs models; the measurement none


@pytest.mark.parametrize("name", sorted(MODULES))
def test_card_has_the_template_sections(name):
    _, text = _card(name)
    for section in ("Values from Popular Papers", "Examples", "Limitations and Bias",
                    "Differences from the official implementation", "Citation"):
        assert f"# {section}\n" in text, section
