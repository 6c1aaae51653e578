"""``capeval convert <artifact> <official-file> --output <out-dir>``: official checkpoints → our safetensors/JSON layout.

Converters read authors' files with ``torch.load(weights_only=True)`` or a restricted unpickler, never
with plain pickle, and write a model card (README.md) beside the converted weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from capeval.core.discovery import import_attr, load_registrations
from capeval.core.errors import ConversionError


@dataclass(frozen=True)
class ConverterSpec:
    name: str
    converter: str  # "module:attr" of fn(official_file, out_dir), imported on use
    help: str

    def convert(self, official_file: Path, out_dir: Path) -> None:
        import_attr(self.converter)(official_file, out_dir)


_CONVERTERS: Dict[str, ConverterSpec] = {}


def register_converter(name: str, *, converter: str, help: str) -> ConverterSpec:
    """Register ``capeval convert <name>``: ``converter`` is the ``"module:attr"`` of ``fn(official_file, out_dir)``."""
    _CONVERTERS[name] = ConverterSpec(name, converter, help)
    return _CONVERTERS[name]


def converters() -> Dict[str, ConverterSpec]:
    load_registrations()

    return dict(_CONVERTERS)


def convert(name: str, official_file, out_dir) -> Path:
    available = converters()
    if name not in available:
        raise KeyError(f"unknown artifact {name!r}; known: {sorted(available)}")
    official_file, out_dir = Path(official_file), Path(out_dir)
    if not official_file.exists():
        raise FileNotFoundError(f"official file not found: {official_file}")
    try:
        available[name].convert(official_file, out_dir)
    except ConversionError:
        raise
    except Exception as exc:  # a refused or malformed checkpoint: one line naming the file, never a traceback
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise ConversionError(f"{official_file}: cannot convert to {name!r}: {detail}") from exc
    return out_dir


def load_torch_checkpoint(path: Path):
    """``torch.load`` restricted to tensors and plain containers (no arbitrary objects)."""
    import torch

    return torch.load(str(path), map_location="cpu", weights_only=True)


def write_model_card(out_dir: Path, *, title: str, source: str, license: str, body: str) -> None:
    """A minimal hub model card with YAML metadata."""
    from capeval.core.version import __version__

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "README.md").write_text(
        f"---\nlicense: {license}\nlibrary_name: capeval\ntags:\n- image-captioning\n- evaluation\n---\n\n"
        f"# {title}\n\nConverted with capeval {__version__} (`capeval convert`) from the official file:\n"
        f"{source}\n\n{body}\n"
    )
