"""CLIP-S / PAC-S registration: the PAC-S weights, their converters and the ``clip_s`` / ``pac_s`` scorers."""

from __future__ import annotations

from capeval.backbones.registration import register_clip_weights
from capeval.core.convert import register_converter
from capeval.core.hub import Upstream
from capeval.core.scoring import register_scorer

# The official README links its checkpoints folder and, per file, one Google Drive id (given for both files; it is
# the ViT-B/32 link). No sha256 is published: the provenance JSON records the hash of the file converted.
PACS_FOLDER = "https://drive.google.com/drive/folders/15Da_nh7CYv8xfryIdETG6dPFSqcBiqpd"
register_clip_weights("pacs-clip-vit-b-32", "capeval/pacs-clip-vit-b-32", "main", "other",
                      "https://github.com/aimagelab/pacscore (checkpoints/clip_ViT-B-32.pth)",
                      "PAC-S positive-augmented CLIP ViT-B/32 (OpenAI format)",
                      upstream=Upstream("clip_ViT-B-32.pth", "pac-s", page=f"{PACS_FOLDER} (aimagelab/pacscore README)",
                                        url="https://drive.usercontent.google.com/download?"
                                            "id=1F-0Pma-vfJPAiDzeyl-iEdSXZIO1cDae&export=download&confirm=t"))
register_clip_weights("pacs-openclip-vit-l-14", "capeval/pacs-openclip-vit-l-14", "main", "other",
                      "https://github.com/aimagelab/pacscore (checkpoints/openClip_ViT-L-14.pth)",
                      "PAC-S positive-augmented OpenCLIP ViT-L/14 (mean = std = 0.5 normalisation)", quick_gelu=False,
                      upstream=Upstream("openClip_ViT-L-14.pth", "pac-s-vit-l-14",
                                        page=f"{PACS_FOLDER} (aimagelab/pacscore README)"))

# Long-CLIP (Zhang et al. 2024, 248 text tokens): the authors' checkpoints on the hub, at the commits that uploaded the
# current files (LongCLIP-L's was replaced on 2024-05 after the DDP fix), with their git-LFS sha256; converted once.
_LONG_CLIP_HUB = "https://huggingface.co/BeichenZhang"
for _name, _repo, _commit, _file, _sha256, _tower in (
        ("long-clip-b", "LongCLIP-B", "5ec98ddcf52692ea2e5a663a5e0f6920c4554c99", "longclip-B.pt",
         "ca2face3716d60473a4e284e5be2cf0a1f3a4ad9954a6a651d878e814cc0c894", "ViT-B/16"),
        ("long-clip-l", "LongCLIP-L", "a29856989d49817508dbda0fb95c7f6ffc314331", "longclip-L.pt",
         "9d2c12ffcbf9099f95bfb9cf8f08f949b695e22fb0018e8895e088f4a88b6afd", "ViT-L/14")):
    register_clip_weights(_name, f"capeval/{_name}", "main", "apache-2.0",
                          f"https://github.com/beichenzbc/Long-CLIP ({_LONG_CLIP_HUB}/{_repo})",
                          f"Long-CLIP {_tower}, 248-token text context (OpenAI format)",
                          upstream=Upstream(_file, "long-clip", sha256=_sha256, page=f"{_LONG_CLIP_HUB}/{_repo}",
                                            url=f"{_LONG_CLIP_HUB}/{_repo}/resolve/{_commit}/{_file}"))


_CONVERTERS = {  # upstream format → (its function in capeval.clip_s.converters, what it reads)
    "long-clip": ("convert_long_clip", "Long-CLIP longclip-B.pt / longclip-L.pt (248-token CLIP state dict)"),
    "pac-s": ("convert_pacs_vit_b_32", "PAC-S clip_ViT-B-32.pth (OpenAI-format CLIP ViT-B/32 state dict)"),
    "pac-s-vit-l-14": ("convert_pacs_vit_l_14", "PAC-S openClip_ViT-L-14.pth (OpenCLIP ViT-L/14 state dict)"),
}
for _format, (_function, _help) in _CONVERTERS.items():
    register_converter(_format, converter=f"capeval.clip_s.converters:{_function}", help=_help)
register_scorer("clip_s", factory="capeval.clip_s.scorer:clip_s", images="required", references="optional",
                help="CLIP-S (w=2.5) and, with references, RefCLIP-S (Hessel et al. 2021)",
                card="capeval.clip_s:module_cards.toml")
register_scorer("pac_s", factory="capeval.clip_s.scorer:pac_s", images="required", references="optional",
                help="PAC-S (w=2.0) and, with references, RefPAC-S (Sarto et al. 2023)",
                card="capeval.clip_s:module_cards.toml")
