"""PAC-S / RefPAC-S demo (Hugging Face Space): score a caption of an uploaded image, with optional references."""

from capeval.demo import build_demo, clip_score_breakdown

demo = build_demo("pac_s", title="PAC-S / RefPAC-S", explanation=clip_score_breakdown())

if __name__ == "__main__":
    demo.launch()
