"""The ``"transformers"`` judge backend (:class:`JudgeModel`, :mod:`capeval.judges.backend`): batched greedy
generation for a transformers image-text-to-text model (LLaVA-1.5 or any model whose processor has a chat template):
left padding with attention masks, fp16/bf16/fp32, ``device_map``; for every generated token, the judge's
probabilities of the ten digit tokens (softmax over the whole vocabulary of the raw logits, float32)."""

from __future__ import annotations

from importlib import metadata
from typing import Iterator, List, Optional, Sequence

import torch
from PIL import Image
from tqdm.auto import tqdm

from capeval.core.errors import ModelNotAvailableError
from capeval.core.device import resolve_device, resolve_dtype
from capeval.judges.backend import Generation
from capeval.judges.judge_weights import judge_model_id, resolve_judge


def _complete_llava_processor(processor, config) -> None:
    """A LLaVA processor loaded without ``processor_config.json`` (the 13B repo's layout) gets the patch size and
    feature strategy from the model's config: one image token per patch (the CLS feature is dropped)."""
    if getattr(processor, "patch_size", 0) is None:
        processor.patch_size = config.vision_config.patch_size
        processor.vision_feature_select_strategy = config.vision_feature_select_strategy
        processor.num_additional_image_tokens = 1  # CLIP's CLS token


def pad_to_square(image: Image.Image, mean: Sequence[float]) -> Image.Image:
    """LLaVA's ``expand2square``: the image centred on a square of the image processor's mean colour."""
    image = image.convert("RGB")
    width, height = image.size
    if width == height:
        return image
    side = max(width, height)
    square = Image.new("RGB", (side, side), tuple(int(x * 255) for x in mean))
    square.paste(image, ((side - width) // 2, (side - height) // 2))
    return square


def judge_dtype(dtype, device: str = "auto", device_map=None):
    """``dtype``, or by default the official float16 on a GPU (or with a ``device_map``) and float32 on CPU."""
    if dtype is not None:
        return resolve_dtype(dtype)
    on_gpu = device_map is not None or resolve_device(device).type == "cuda"
    return resolve_dtype("float16" if on_gpu else None)


def keep_vision_tower_in_float32(model) -> bool:
    """LLaVA's loader leaves the CLIP vision tower in float32 (``device_map="auto"`` skips its float16 cast): the tower
    runs in float32 on the pixels rounded to the judge's dtype and its features are cast to that dtype before the
    projector. Does the same to a llava-hf judge running in 16 bits; False (nothing changed) for a float32 judge."""
    inner = getattr(model, "model", model)
    projector = inner.multi_modal_projector
    dtype = next(projector.parameters()).dtype
    if dtype == torch.float32:
        return False
    inner.vision_tower.float()
    projector.register_forward_pre_hook(
        lambda module, args: tuple(a.to(dtype) if torch.is_tensor(a) else a for a in args))
    return True


class JudgeModel:
    """The ``"transformers"`` judge backend: a vision-language judge loaded from the HF cache (or a folder) for
    batched greedy generation, ``batch_size`` prompts at a time (each batch left-padded)."""

    def __init__(self, ref: str, *, device: str = "auto", dtype=None, device_map=None, cache_dir=None,
                 batch_size: int = 16, float32_vision: bool = False):
        from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoProcessor

        self.directory = resolve_judge(ref, cache_dir)
        self.model_id = judge_model_id(self.directory)
        self.device = resolve_device(device) if device_map is None else None
        self.torch_dtype = judge_dtype(dtype, device, device_map)
        self.dtype = str(self.torch_dtype).replace("torch.", "")
        self.batch_size = batch_size
        try:
            model = AutoModelForImageTextToText.from_pretrained(str(self.directory), dtype=self.torch_dtype,
                                                                device_map=device_map)
        except (OSError, ValueError) as exc:
            raise ModelNotAvailableError(f"judge {ref!r} ({self.directory}) is not a transformers image-text-to-text "
                                         f"model: {exc}") from exc
        self.model = (model if device_map is not None else model.to(self.device)).eval()
        self.processor = AutoProcessor.from_pretrained(str(self.directory))
        # the PIL image backend: LLaVA's CLIP processor (transformers 4.31) resized with PIL's bicubic; transformers
        # 5 defaults to torchvision's, about one grey level away
        self.processor.image_processor = AutoImageProcessor.from_pretrained(str(self.directory), backend="pil")
        self.config = self.model.config
        self.model_type = self.config.model_type
        if self.model_type == "llava":
            _complete_llava_processor(self.processor, self.config)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos if eos is not None else
                                                                       self.tokenizer.eos_token_id])
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token_id = self.pad_id
        self.digit_ids = [self.tokenizer.encode(str(d), add_special_tokens=False)[-1] for d in range(10)]
        self.image_mean = getattr(self.processor.image_processor, "image_mean", None) or (0.5, 0.5, 0.5)
        if float32_vision:
            keep_vision_tower_in_float32(self.model)

    @classmethod
    def version(cls) -> str:
        """The installed transformers' version."""
        return metadata.version("transformers")

    @classmethod
    def dtype_name(cls, dtype, device: str, device_map) -> str:
        return str(judge_dtype(dtype, device, device_map)).replace("torch.", "")

    @property
    def input_device(self) -> torch.device:
        return self.device if self.device is not None else self.model.get_input_embeddings().weight.device

    def chat_prompt(self, messages: list) -> str:
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def answers(self, prompts: Sequence[str], images: Sequence[Image.Image], *, max_new_tokens: int,
                square: bool, label: Optional[str] = None) -> Iterator[List[Generation]]:
        """The answers to ``prompts``, ``batch_size`` at a time in order (:meth:`generate`), the images padded to a
        square of the image processor's mean colour (``square``) or taken as RGB."""
        starts = range(0, len(prompts), self.batch_size)
        for start in tqdm(starts, desc=label, unit="batch", disable=label is None or len(starts) < 2):
            chunk = slice(start, start + self.batch_size)
            pictures = [pad_to_square(image, self.image_mean) if square else image.convert("RGB")
                        for image in images[chunk]]
            yield self.generate(list(prompts[chunk]), pictures, max_new_tokens=max_new_tokens)

    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], images: Sequence[Image.Image], *,
                 max_new_tokens: int) -> List[Generation]:
        """Greedy answers to ``prompts`` (each holding the image placeholder once) about ``images``, in one left-padded
        batch."""
        from transformers import GenerationConfig

        batch = self.processor(images=list(images), text=list(prompts), padding=True, return_tensors="pt")
        batch = {k: v.to(self.input_device) for k, v in batch.items()}
        if "pixel_values" in batch and batch["pixel_values"].is_floating_point():
            batch["pixel_values"] = batch["pixel_values"].to(self.torch_dtype)
        settings = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new_tokens,
                                    eos_token_id=sorted(self.eos_ids), pad_token_id=self.pad_id,
                                    output_logits=True, return_dict_in_generate=True)
        out = self.model.generate(**batch, generation_config=settings)
        width = batch["input_ids"].shape[1]
        logits = torch.stack(out.logits, dim=1) if out.logits else torch.zeros(len(prompts), 0, 1)
        digits = torch.tensor(self.digit_ids, device=logits.device)
        results = []
        for row in range(len(prompts)):
            new = out.sequences[row, width:].tolist()
            end = next((i for i, token in enumerate(new) if token in self.eos_ids), None)
            kept = new if end is None else new[:end]
            probabilities = torch.softmax(logits[row, :len(kept)].float(), dim=-1)[:, digits].cpu()
            text = self.tokenizer.decode(kept, skip_special_tokens=True).strip()
            results.append(Generation(kept, text, end is not None, probabilities))
        return results

