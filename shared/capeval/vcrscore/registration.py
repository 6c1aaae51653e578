"""VCRScore registration: the weights of its feature extractors (ViLT retrieval, DETR and YOLOS detectors, MCIP
OpenCLIP ViT-L-14-336) and of its regressor, the MCIP and regressor converters, the scorer and the trainer."""

from __future__ import annotations

from capeval.backbones.registration import register_clip_weights
from capeval.core.convert import register_converter
from capeval.core.hub import Upstream, WeightSpec, register
from capeval.core.scoring import register_scorer
from capeval.core.training import register_trainer
from capeval.vcrscore.constants import DETECTOR_FILES, GBR_FILE, VILT_FILES

register(WeightSpec(
    name="vilt-b32-finetuned-coco", repo_id="dandelin/vilt-b32-finetuned-coco", revision="main", files=VILT_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/dandelin/ViLT",
    description="ViLT-B/32 fine-tuned for COCO image-text retrieval (VCRScore feature 2)",
))
register(WeightSpec(
    # the snapshot commit public code loads it from (models--facebook--detr-resnet-50/snapshots/1d5f47b…)
    name="detr-resnet-50", repo_id="facebook/detr-resnet-50", revision="1d5f47bd3bdd2c4bbfa585418ffe6da5028b4c0b",
    files=DETECTOR_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/facebookresearch/detr",
    description="DETR ResNet-50 COCO object detector (VCRScore word pool)",
))
register(WeightSpec(
    name="yolos-small", repo_id="hustvl/yolos-small", revision="main", files=DETECTOR_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/hustvl/YOLOS",
    description="YOLOS-S COCO object detector: capeval's stand-in for VCRScore's unpublished Keras YOLOv3",
))
# the pickle at a commit of the official repository (its README says to load the .pickle beside the modules)
VCRSCORE_GBR_URL = ("https://raw.githubusercontent.com/ResearchInfoGeo/VCRScore/"
                    "5a81e9f251f2a045b8ee53d36f126161c1d3b438/model_GBR_VCR.pickle")
register(WeightSpec(
    name="vcrscore-gbr", repo_id="capeval/vcrscore-gbr", revision="main", files=(GBR_FILE,), format="json",
    license="unknown (no licence file upstream)",
    source_url="https://github.com/ResearchInfoGeo/VCRScore (model_GBR_VCR.pickle, sklearn 1.6.1)",
    description="Official VCRScore GradientBoostingRegressor as a JSON tree ensemble",
    upstream=Upstream("model_GBR_VCR.pickle", "vcrscore-gbr", url=VCRSCORE_GBR_URL,
                      sha256="95dc58f5b00a254e89f8b13a5be162d607a9efad8bb54729114d14904630c540",
                      page="https://github.com/ResearchInfoGeo/VCRScore"),
))
# The authors' site (linked by the MCIP and VCRScore READMEs); no sha256 is published
MCIP_URL = "https://visual-computing.com/files/MCIP/MCIP-ViT-L-14-336.pth"
register_clip_weights("mcip-vit-l-14-336", "capeval/mcip-vit-l-14-336", "main", "other",
                      f"{MCIP_URL} (not on the Hugging Face Hub)",
                      "MCIP retrieval-optimised OpenCLIP ViT-L-14-336 (OpenAI architecture, QuickGELU)",
                      upstream=Upstream("MCIP-ViT-L-14-336.pth", "mcip", url=MCIP_URL,
                                        page="https://github.com/ResearchInfoGeo/VCRScore (README, Download)"))


register_converter("mcip", converter="capeval.vcrscore.converters:convert_mcip",
                   help="MCIP-ViT-L-14-336.pth (OpenCLIP ViT-L-14-336 state dict) -> capeval CLIP layout")
register_converter("vcrscore-gbr", converter="capeval.vcrscore.regressor:convert_vcrscore_gbr",
                   help="VCRScore model_GBR_VCR.pickle (read with a restricted unpickler) -> JSON")
register_scorer("vcrscore", factory="capeval.vcrscore.scorer:VcrScorer", images="required", references="required",
                help="VCRScore (Ruiz et al. 2024): word precision vs references + detected objects, ViLT retrieval "
                     "logit, MCIP RefCLIP-S -> official gradient-boosted regressor",
                card="capeval.vcrscore:module_cards.toml")
register_trainer("vcrscore", configure="capeval.vcrscore.regressor:configure_training",
                 run="capeval.vcrscore.regressor:train_vcrscore",
                 help="fit VCRScore's GradientBoostingRegressor on cached feature rows; exports JSON")
