"""HICE-S demo (Hugging Face Space): regions outlined by status and the caption's phrases, wrong ones marked."""

from pathlib import Path

from capeval.demo import build_demo, hice_overlay

demo = build_demo("hice_s", title="HICE-S / RefHICE-S", explanation=hice_overlay(),
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
