"""Constants shared by several families, defined once."""

# CLIP image normalisation: OpenAI's statistics, and the mean = std = 0.5 of PAC-S's OpenCLIP ViT-L/14
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
OPENAI_PREPROCESS = {"mean": list(OPENAI_MEAN), "std": list(OPENAI_STD)}
HALF_PREPROCESS = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}

# the prompt CLIPScore (and PAC-S, Polos) put before every caption and reference
CLIPSCORE_PREFIX = "A photo depicts "

# capeval's open_clip artifact layout
CLIP_CONFIG_FILE = "open_clip_config.json"
CLIP_WEIGHTS_FILE = "open_clip_model.safetensors"
CLIP_FILES = (CLIP_CONFIG_FILE, CLIP_WEIGHTS_FILE)

# capeval's Segment Anything / MobileSAM artifact layout
SAM_CONFIG_FILE = "sam_config.json"
SAM_WEIGHTS_FILE = "sam_model.safetensors"
SAM_FILES = (SAM_CONFIG_FILE, SAM_WEIGHTS_FILE)

# the FACTUAL scene-graph parser's files at its pinned hub commit: model.safetensors (no pickle) and the fast
# tokenizer's tokenizer.json; the repo's older pytorch_model.bin and spiece.model are not needed
FACTUAL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json")

# EnsembEval's weights file (official weights, refits)
ENSEMBEVAL_WEIGHTS_FILE = "ensembeval_weights.json"
PROVENANCE_FILE = "capeval_provenance.json"  # beside weights converted from an upstream file: source, sha256, converter
TINY_MARKER_FILE = "CAPEVAL_TINY_RANDOM_WEIGHTS"  # in every snapshot written by capeval.testing: random test weights
MERGE_RECORD = "expert_merge.json"  # written by EXPERT's merge beside the weights: what they are made of
