"""CAPTURE demo (Hugging Face Space): a detailed caption against its references, with what it matched, missed and
invented."""

from pathlib import Path

from capeval.demo import build_demo

demo = build_demo("capture", title="CAPTURE (detailed captions)", card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
