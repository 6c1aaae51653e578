"""CLIP-S / RefCLIP-S demo (Hugging Face Space): score a caption of an uploaded image, with optional references."""

from capeval.demo import build_demo, clip_score_breakdown

demo = build_demo("clip_s", title="CLIP-S / RefCLIP-S", explanation=clip_score_breakdown())

if __name__ == "__main__":
    demo.launch()
