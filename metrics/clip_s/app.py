"""CLIP-S / RefCLIP-S demo (Hugging Face Space): score a caption of an uploaded image, with optional references."""

from pathlib import Path

from capeval.demo import build_demo, clip_score_breakdown

demo = build_demo("clip_s", title="CLIP-S / RefCLIP-S", explanation=clip_score_breakdown(),
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
