"""Polos demo (Hugging Face Space): score a caption of an uploaded image against references."""

from pathlib import Path

from capeval.demo import build_demo

demo = build_demo("polos", title="Polos",
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
