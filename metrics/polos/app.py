"""Polos demo (Hugging Face Space): score a caption of an uploaded image against references."""

from capeval.demo import build_demo

demo = build_demo("polos", title="Polos")

if __name__ == "__main__":
    demo.launch()
