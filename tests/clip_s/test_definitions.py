"""CLIP-S ``definition=``: "paper" (Hessel et al. 2021) and "torchmetrics" (torchmetrics' ``CLIPScore``), the latter
checked against torchmetrics itself on the same random weights (an HF ``CLIPModel`` holding the open_clip weights
capeval loads)."""

import gzip
import json
import re
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.core.constants import CLIPSCORE_PREFIX, OPENAI_MEAN, OPENAI_STD
from capeval.core.errors import InputError
from capeval.clip_s.scorer import TorchmetricsAggregateWarning
from capeval.core.scoring import load_scorer
from capeval.testing.tiny_clip import tiny_clip_factory

transformers = pytest.importorskip("transformers")
pytest.importorskip("torchmetrics")

CAPTIONS = ["a dog runs on the grass", "two people ride bikes down a street", "a red bus",
            "a cat sleeping on a sofa next to a window", "a bowl of fruit", "a man surfing a big wave"]
# torchmetrics runs the HF model in fp32 as capeval does; the two forwards differ only in operation order
TOLERANCE = 1e-4  # absolute, on the 0-100 scale (cosines within 1e-6)


def _images(n, size=224, seed=0):
    """Images already at the model's input size: both pipelines' resize and crop leave them as they are."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(n)]


def _hf_state_dict(open_clip_sd, layers=1):
    """The HF ``CLIPModel`` state dict holding the same weights as an OpenAI-layout (open_clip) CLIP state dict."""
    out = {"logit_scale": open_clip_sd["logit_scale"]}

    def blocks(src, dst):
        for i in range(layers):
            s, d = f"{src}.{i}", f"{dst}.{i}"
            for part, weight in zip("qkv", open_clip_sd[f"{s}.attn.in_proj_weight"].chunk(3)):
                out[f"{d}.self_attn.{part}_proj.weight"] = weight
            for part, bias in zip("qkv", open_clip_sd[f"{s}.attn.in_proj_bias"].chunk(3)):
                out[f"{d}.self_attn.{part}_proj.bias"] = bias
            for ours, theirs in (("attn.out_proj", "self_attn.out_proj"), ("ln_1", "layer_norm1"),
                                 ("ln_2", "layer_norm2"), ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
                out[f"{d}.{theirs}.weight"] = open_clip_sd[f"{s}.{ours}.weight"]
                out[f"{d}.{theirs}.bias"] = open_clip_sd[f"{s}.{ours}.bias"]

    blocks("transformer.resblocks", "text_model.encoder.layers")
    blocks("visual.transformer.resblocks", "vision_model.encoder.layers")
    out["text_model.embeddings.token_embedding.weight"] = open_clip_sd["token_embedding.weight"]
    out["text_model.embeddings.position_embedding.weight"] = open_clip_sd["positional_embedding"]
    for ours, theirs in (("ln_final", "text_model.final_layer_norm"), ("visual.ln_pre", "vision_model.pre_layrnorm"),
                         ("visual.ln_post", "vision_model.post_layernorm")):
        out[f"{theirs}.weight"] = open_clip_sd[f"{ours}.weight"]
        out[f"{theirs}.bias"] = open_clip_sd[f"{ours}.bias"]
    out["text_projection.weight"] = open_clip_sd["text_projection"].T.contiguous()
    out["visual_projection.weight"] = open_clip_sd["visual.proj"].T.contiguous()
    out["vision_model.embeddings.class_embedding"] = open_clip_sd["visual.class_embedding"]
    out["vision_model.embeddings.patch_embedding.weight"] = open_clip_sd["visual.conv1.weight"]
    out["vision_model.embeddings.position_embedding.weight"] = open_clip_sd["visual.positional_embedding"]
    return out


def _clip_tokenizer(directory):
    """A transformers CLIPTokenizer on the real CLIP BPE (open_clip's vocabulary file)."""
    from open_clip.tokenizer import SimpleTokenizer, default_bpe

    official = {"<start_of_text>": "<|startoftext|>", "<end_of_text>": "<|endoftext|>"}  # open_clip's spellings
    encoder = {official.get(token, token): index for token, index in SimpleTokenizer().encoder.items()}
    merges = gzip.open(default_bpe()).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    (directory / "vocab.json").write_text(json.dumps(encoder))
    (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return transformers.CLIPTokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"),
                                      bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                                      pad_token="<|endoftext|>", unk_token="<|endoftext|>")


@pytest.fixture(scope="module")
def same_weights(tmp_path_factory):
    """(capeval weights directory, torchmetrics ``model_name_or_path`` callable) holding one tiny random CLIP."""
    from safetensors.torch import load_file

    root = tmp_path_factory.mktemp("definitions")
    ours = root / "open_clip"
    tiny_clip_factory(seed=3)(ours)
    open_clip_sd = load_file(str(ours / "open_clip_model.safetensors"))
    config = transformers.CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 1,
                     "num_attention_heads": 1, "max_position_embeddings": 77, "hidden_act": "quick_gelu",
                     "layer_norm_eps": 1e-5, "bos_token_id": 49406, "eos_token_id": 49407, "pad_token_id": 49407},
        vision_config={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 1,
                       "image_size": 224, "patch_size": 32, "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5},
        projection_dim=32)
    model = transformers.CLIPModel(config)
    missing, unexpected = model.load_state_dict(_hf_state_dict(open_clip_sd), strict=False)
    assert not unexpected and all("position_ids" in key for key in missing), (missing, unexpected)
    hf = root / "hf"
    model.save_pretrained(hf)
    image_processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}, image_mean=list(OPENAI_MEAN),
        image_std=list(OPENAI_STD), resample=3)
    transformers.CLIPProcessor(image_processor, _clip_tokenizer(hf)).save_pretrained(hf)

    def model_and_processor():
        return (_TensorFeatures(transformers.CLIPModel.from_pretrained(hf).eval()),
                transformers.CLIPProcessor.from_pretrained(hf))

    return ours, model_and_processor


class _TensorFeatures(torch.nn.Module):
    """The HF model as torchmetrics 1.9 calls it: ``get_*_features`` returning the projected feature tensor
    (transformers 4.x; transformers 5 returns a ``ModelOutput`` whose ``pooler_output`` is that tensor)."""

    def __init__(self, model):
        super().__init__()
        self.model, self.config = model, model.config

    def get_image_features(self, *args, **kwargs):
        return _tensor(self.model.get_image_features(*args, **kwargs))

    def get_text_features(self, *args, **kwargs):
        return _tensor(self.model.get_text_features(*args, **kwargs))


def _tensor(features):
    return features if isinstance(features, torch.Tensor) else features.pooler_output


def _torchmetrics_scores(model_and_processor, arrays, captions):
    """torchmetrics ``CLIPScore`` per sample (one sample per compute) and over all samples."""
    from torchmetrics.multimodal.clip_score import CLIPScore

    metric = CLIPScore(model_name_or_path=model_and_processor)
    per_sample = []
    for array, caption in zip(arrays, captions):
        metric.reset()
        metric.update(torch.from_numpy(array).permute(2, 0, 1), caption)
        per_sample.append(float(metric.compute()))
    metric.reset()
    metric.update([torch.from_numpy(a).permute(2, 0, 1) for a in arrays], list(captions))
    return per_sample, float(metric.compute())


def test_torchmetrics_definition_equals_torchmetrics_clipscore(same_weights):
    ours, model_and_processor = same_weights
    arrays = _images(len(CAPTIONS))
    expected, _ = _torchmetrics_scores(model_and_processor, arrays, CAPTIONS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer = load_scorer("clip_s", weights=str(ours), definition="torchmetrics", device="cpu")
    result = scorer.score(CAPTIONS, [Image.fromarray(a) for a in arrays])
    np.testing.assert_allclose(result["clip_s_per_sample"], expected, atol=TOLERANCE, rtol=0)
    assert result["clip_s"] == pytest.approx(np.mean(result["clip_s_per_sample"]))
    # torchmetrics clamps the mean of the unclamped 100·cos, capeval the cosine of each sample: the same number
    # whenever no pair's cosine is negative (the samples whose torchmetrics score is > 0)
    positive = [i for i, score in enumerate(expected) if score > 0]
    assert positive and len(positive) < len(CAPTIONS), "random weights should give both signs here"
    _, corpus = _torchmetrics_scores(model_and_processor, [arrays[i] for i in positive],
                                     [CAPTIONS[i] for i in positive])
    subset = scorer.score([CAPTIONS[i] for i in positive], [Image.fromarray(arrays[i]) for i in positive])
    assert subset["clip_s"] == pytest.approx(corpus, abs=TOLERANCE)


def test_definitions_differ_as_defined_and_paper_is_unchanged(same_weights):
    """paper: 2.5·max(cos(image, prompt + caption), 0); torchmetrics: 100·max(cos(image, caption), 0); the default
    is the paper's, bitwise as an explicit definition="paper"."""
    ours, _ = same_weights
    images = [Image.fromarray(a) for a in _images(len(CAPTIONS), seed=1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = load_scorer("clip_s", weights=str(ours), device="cpu")
        paper = load_scorer("clip_s", weights=str(ours), definition="paper", device="cpu")
        torchmetrics = load_scorer("clip_s", weights=str(ours), definition="torchmetrics", device="cpu")
    backbone = default.backbone
    image_unit = torch.nn.functional.normalize(backbone.encode_images(images), dim=-1)

    def cos(texts):
        return (image_unit * torch.nn.functional.normalize(backbone.encode_texts(texts), dim=-1)).sum(-1)

    result = default.score(CAPTIONS, images)
    assert result["clip_s_per_sample"] == paper.score(CAPTIONS, images)["clip_s_per_sample"]
    np.testing.assert_allclose(result["clip_s_per_sample"],
                               2.5 * cos([CLIPSCORE_PREFIX + c for c in CAPTIONS]).clamp(min=0), atol=1e-6)
    np.testing.assert_allclose(torchmetrics.score(CAPTIONS, images)["clip_s_per_sample"],
                               100 * cos(CAPTIONS).clamp(min=0), atol=1e-4)
    assert len({default.hashcode, paper.hashcode, torchmetrics.hashcode}) == 2
    assert default.hashcode == paper.hashcode
    assert torchmetrics.provenance["options"]["definition"] == "torchmetrics"


def test_torchmetrics_definition_refusals(same_weights):
    ours, _ = same_weights
    with pytest.raises(InputError, match="definition"):
        load_scorer("clip_s", weights=str(ours), definition="clip-retrieval", device="cpu")
    with pytest.raises(InputError, match="precision"):
        load_scorer("clip_s", weights=str(ours), definition="torchmetrics", precision="official", device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer = load_scorer("clip_s", weights=str(ours), definition="torchmetrics", device="cpu")
    image = Image.fromarray(_images(1)[0])
    with pytest.raises(InputError, match="references"):
        scorer.score(["a dog"], [image], [["a dog on grass"]])


def test_negative_cosines_under_torchmetrics_are_warned_with_torchmetrics_own_corpus_value(same_weights):
    """Where a cosine is negative, capeval's corpus value (the mean of the per-sample 100·max(cos, 0)) differs from
    torchmetrics' ``compute()`` (the clamped mean of the unclamped 100·cos): a warning says so, naming how many
    samples and torchmetrics' own value over the call's samples, equal to torchmetrics run on them."""
    ours, model_and_processor = same_weights
    arrays = _images(len(CAPTIONS))
    per_sample, corpus = _torchmetrics_scores(model_and_processor, arrays, CAPTIONS)
    negative = sum(score == 0 for score in per_sample)
    assert 0 < negative < len(CAPTIONS), "random weights should give both signs here"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scorer = load_scorer("clip_s", weights=str(ours), definition="torchmetrics", device="cpu")
    images = [Image.fromarray(a) for a in arrays]
    with pytest.warns(TorchmetricsAggregateWarning) as caught:
        result = scorer.score(CAPTIONS, images)
    message = str(next(w.message for w in caught if w.category is TorchmetricsAggregateWarning))
    assert f"{negative} of {len(CAPTIONS)} " in message
    stated = float(re.search(r"torchmetrics' CLIPScore\.compute\(\) over them: (-?[0-9.]+)", message).group(1))
    assert stated == pytest.approx(corpus, abs=1e-3)
    assert f"{result['clip_s']:.4f}" in message and abs(result["clip_s"] - corpus) > 1e-3
    positive = [i for i, score in enumerate(per_sample) if score > 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TorchmetricsAggregateWarning)
        scorer.score([CAPTIONS[i] for i in positive], [images[i] for i in positive])
