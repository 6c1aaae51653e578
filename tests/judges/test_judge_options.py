"""Judge options are checked before anything loads: a bad value is an InputError naming the option."""

import pytest

from capeval import InputError, load_scorer


@pytest.mark.parametrize("value", [0, -5, 2.5, "big", True])
def test_cache_bytes_must_be_a_positive_integer(value, tmp_path):
    cache = tmp_path / "fleur.jsonl"
    cache.write_text("")
    with pytest.raises(InputError, match=f"cache_bytes must be a positive integer, not {value!r}"):
        load_scorer("fleur", replay=cache, cache_bytes=value)
