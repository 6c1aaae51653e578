import io

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.core.inputs import check_captions, check_lengths, check_references, load_image, load_images


@pytest.mark.parametrize("mode", ["1", "L", "P", "RGB", "RGBA", "CMYK", "LA"])
def test_every_common_mode_loads_and_converts_to_rgb(mode):
    image = Image.new(mode, (17, 9))
    loaded = load_image(image)
    assert loaded.mode == mode
    assert loaded.convert("RGB").size == (17, 9)


@pytest.mark.parametrize("mode", ["I;16", "I"])
def test_sixteen_bit_images_are_scaled_not_saturated(mode, tmp_path):
    values = np.array([[0, 257, 25700], [32896, 65535, 1000]], dtype=np.uint16)
    image = Image.fromarray(values.astype(np.int32 if mode == "I" else np.uint16), mode=mode)
    expected = np.round(values / 257.0).astype(np.uint8)  # 8-bit value v is 16-bit v * 257
    loaded = load_image(image)
    assert loaded.mode == "L"
    np.testing.assert_array_equal(np.asarray(loaded), expected)
    assert image.convert("RGB").getpixel((1, 0)) == (255, 255, 255)  # what convert("RGB") alone does: saturate
    path = tmp_path / "sixteen.png"
    Image.fromarray(values).save(path)  # a real 16-bit PNG
    np.testing.assert_array_equal(np.asarray(load_image(str(path))), expected)
    np.testing.assert_array_equal(np.asarray(load_image(values)), expected)  # uint16 arrays alike


def test_float_mode_images_are_refused():
    with pytest.raises(InputError, match="mode 'F'"):
        load_image(Image.new("F", (4, 3)))


def test_sources_path_bytes_dict_array_tensor(tmp_path):
    rgb = Image.fromarray(np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3))
    path = tmp_path / "x.png"
    rgb.save(path)
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    arrays = np.asarray(rgb)
    for source in (str(path), path, {"bytes": buf.getvalue(), "path": None}, {"path": str(path), "bytes": None},
                   arrays, arrays.astype(np.float32) / 255, torch.from_numpy(arrays).permute(2, 0, 1)):
        np.testing.assert_array_equal(np.asarray(load_image(source).convert("RGB")), arrays)


@pytest.mark.parametrize("bad, message", [
    (None, "missing"),
    ("/nonexistent/image.jpg", "not found"),
    (np.zeros((3, 4, 2), np.uint8), "shape"),
    (np.full((3, 4), 2.0), r"\[0, 1\]"),
    (np.zeros((3, 4), np.int64), "dtype"),
    ({"path": None, "bytes": None}, "neither"),
    (12, "unsupported image type"),
])
def test_bad_images_raise_clear_errors(bad, message):
    with pytest.raises(InputError, match=message):
        load_image(bad, index=3)


def test_corrupt_image_file(tmp_path):
    path = tmp_path / "broken.jpg"
    path.write_bytes(b"\xff\xd8\xff not really a jpeg")
    with pytest.raises(InputError, match="corrupt or unreadable"):
        load_image(str(path))


def test_captions_and_references_validation():
    assert check_captions(["a", "b"]) == ["a", "b"]
    with pytest.raises(InputError, match=r"predictions\[1\] is an empty caption"):
        check_captions(["a", "  "])
    with pytest.raises(InputError, match="not a single string"):
        check_captions("a dog")
    with pytest.raises(InputError, match="expected a string"):
        check_captions(["a", 3])
    assert check_references(["r", ["s", "t"]], 2) == [["r"], ["s", "t"]]
    with pytest.raises(InputError, match="empty reference list"):
        check_references([["r"], []], 2)
    with pytest.raises(InputError, match="2 predictions but 1 reference"):
        check_references([["r"]], 2)
    with pytest.raises(InputError, match="mismatched lengths: predictions=2, images=3"):
        check_lengths(predictions=[1, 2], images=[1, 2, 3])


def test_load_images_decodes_a_repeated_path_once_and_keeps_input_order(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(rng.integers(0, 256, (9 + i, 7, 3), dtype=np.uint8)).save(paths[-1])
    inputs = [str(paths[0]), paths[1], str(paths[0]), np.zeros((3, 4, 3), np.uint8), str(paths[2]), str(paths[3]),
              str(paths[1])]
    loaded = load_images(inputs)
    assert loaded[0] is loaded[2] and loaded[1] is loaded[6]  # one file (a str or a Path to it): decoded once
    assert loaded[0] is not loaded[4]
    for image, source in zip(loaded, inputs):
        np.testing.assert_array_equal(np.asarray(image), np.asarray(load_image(source)))
    # images[1] fails late (a large PNG cut short: the header opens, decoding fails), images[3] at once (missing)
    big = tmp_path / "big.png"
    Image.fromarray(rng.integers(0, 256, (1200, 1200, 3), dtype=np.uint8)).save(big)
    (tmp_path / "cut.png").write_bytes(big.read_bytes()[: big.stat().st_size * 3 // 4])
    bad = [str(paths[0]), str(tmp_path / "cut.png"), str(paths[1]), str(tmp_path / "missing.png")]
    with pytest.raises(InputError, match=r"images\[1\]"):  # the first bad sample in input order, threads or not
        load_images(bad)
    with pytest.raises(InputError, match=r"images\[13\]"):
        load_images(bad, indices=[12, 13, 14, 15])


@pytest.mark.parametrize("bad, message", [
    ({"path": 7, "bytes": None}, r"images\[3\]: image dict 'path' is an int \(7\), expected a file path"),
    ({"path": ["a.png"]}, r"images\[3\]: image dict 'path' is a list"),
    ({"bytes": "not bytes", "path": None}, r"images\[3\]: image dict 'bytes' is a str, expected bytes")])
def test_image_dicts_with_wrong_types_name_the_sample_and_the_problem(bad, message):
    with pytest.raises(InputError, match=message):
        load_images([Image.new("RGB", (2, 2))] * 3 + [bad])
