"""HICE-S registration: Alpha-CLIP, SAM, MobileSAM and FACTUAL weights, their converters and the ``hice_s`` scorer."""

from __future__ import annotations

from capeval.core.constants import CLIP_FILES, FACTUAL_FILES, SAM_FILES
from capeval.core.convert import register_converter
from capeval.core.hub import Upstream, WeightSpec, register
from capeval.core.scoring import register_scorer

ALPHA_CLIP_SOURCE = "https://github.com/SunzeY/AlphaCLIP (model-zoo.md: visual checkpoints on Google Drive)"
_DRIVE = "https://drive.usercontent.google.com/download?export=download&confirm=t&id="

# (name, title, official file, Google Drive id in the official model-zoo.md); no sha256 is published
for _name, _title, _file, _drive_id in (
        ("alpha-clip-vit-b-16", "ViT-B/16 (GRIT-20M)", "clip_b16_grit20m_fultune_2xe.pth",
         "1cj3cYwrzBivx0h0NzSjlCg9HAd5aTkDW"),
        ("alpha-clip-vit-l-14", "ViT-L/14 (GRIT-20M)", "clip_l14_grit20m_fultune_2xe.pth",
         "1WykuBYWePriCVeW5lOwBsgxgeBMzb1nd"),
        ("alpha-clip-vit-l-14-336", "ViT-L/14@336px (GRIT-1M: no GRIT-20M checkpoint is published at 336px)",
         "clip_l14@336_grit1m_fultune_8xe.pth", "1DeNbUv0lraDxJZItb7shTlvGW6z_Z9Si")):
    register(WeightSpec(
        name=_name, repo_id=f"capeval/{_name}", revision="main", files=CLIP_FILES, format="open_clip",
        license="apache-2.0", source_url=ALPHA_CLIP_SOURCE,
        description=f"Alpha-CLIP {_title} visual tower + OpenAI CLIP text tower, capeval layout",
        options={"model_cfg": {"quick_gelu": True}},
        upstream=Upstream(_file, "alpha-clip", url=_DRIVE + _drive_id,
                          page="https://github.com/SunzeY/AlphaCLIP/blob/main/model-zoo.md")))


# sha256 of the official files as published by many independent downloaders (Meta publishes the md5 prefix in the
# file name only); a download that hashes otherwise is refused
SAM_SHA256 = {"vit_b": "ec2df62732614e57411cdcf32a23ffdf28910380d03139ee0f4fcbe91eb8c912",
              "vit_l": "3adcc4315b642a4d2101128f611684e8734c41232a17c648ed1693702a49a622",
              "vit_h": "a7bf3b02f3ebf1267aba913ff637d9a2d5c33d3173bb679e46d9f338c26f262e"}
for _arch, _file in (("vit_b", "sam_vit_b_01ec64.pth"), ("vit_l", "sam_vit_l_0b3195.pth"),
                     ("vit_h", "sam_vit_h_4b8939.pth")):
    register(WeightSpec(
        name=f"sam-{_arch.replace('_', '-')}", repo_id=f"capeval/sam-{_arch.replace('_', '-')}", revision="main",
        files=SAM_FILES, format="safetensors", license="apache-2.0",
        source_url=f"https://dl.fbaipublicfiles.com/segment_anything/{_file}",
        description=f"Segment Anything {_arch} (converted to safetensors)", options={"architecture": _arch},
        upstream=Upstream(_file, "sam", url=f"https://dl.fbaipublicfiles.com/segment_anything/{_file}",
                          sha256=SAM_SHA256[_arch],
                          page="https://github.com/facebookresearch/segment-anything#model-checkpoints")))


# the file at the MobileSAM commit public code pins (the README links the master branch)
MOBILE_SAM_URL = ("https://raw.githubusercontent.com/ChaoningZhang/MobileSAM/"
                  "f706ad9c4eb7f219c00d9050e46328518ffb65d2/weights/mobile_sam.pt")
register(WeightSpec(
    name="mobile-sam", repo_id="capeval/mobile-sam", revision="main", files=SAM_FILES, format="safetensors",
    license="apache-2.0", source_url=MOBILE_SAM_URL,
    description="MobileSAM (TinyViT-5M image encoder + SAM's prompt encoder and mask decoder), converted to "
                "safetensors", options={"architecture": "mobile_sam"},
    upstream=Upstream("mobile_sam.pt", "mobile-sam", url=MOBILE_SAM_URL,
                      sha256="6dbb90523a35330fedd7f1d3dfc66f995213d81b29a5ca8108dbcdd4e37d6c2f",
                      page="https://github.com/ChaoningZhang/MobileSAM (weights/mobile_sam.pt)")))


register(WeightSpec(
    name="flan-t5-base-vg-factual-sg", repo_id="lizhuang144/flan-t5-base-VG-factual-sg",
    revision="2e01585225e8f7fc20d922cdee9c591ea4cd6ef1", files=FACTUAL_FILES, format="transformers", license="mit",
    source_url="https://github.com/zhuang-li/FACTUAL",
    description="FACTUAL scene-graph parser (Flan-T5-base pre-trained on VG scene graphs, fine-tuned on FACTUAL), "
                "loaded once per process and shared by every scene-graph metric "
                "(capeval.backbones.scene_graph_parser); HICE-S's phrase parser",
))

# each upstream format → its converter in capeval.hice_s.converters
for _format, _help in (
        ("alpha-clip", "Alpha-CLIP visual checkpoint (.pth) + the OpenAI CLIP text tower of its size"),
        ("sam", "Segment Anything sam_vit_{b,l,h}_*.pth or MobileSAM mobile_sam.pt (official state dicts)"),
        ("mobile-sam", "MobileSAM mobile_sam.pt (official state dict, TinyViT image encoder)")):
    register_converter(_format, converter=f"capeval.hice_s.converters:convert_{_format.replace('-', '_')}",
                       help=_help)
register_scorer("hice_s", factory="capeval.hice_s.scorer:HiceScorer", images="required", references="optional",
                help="HICE-S and, with references, RefHICE-S (Zeng et al. 2024): Alpha-CLIP global + "
                     "region/phrase local scores",
                card="capeval.hice_s:module_cards.toml")
