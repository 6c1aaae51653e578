"""CAPTURE demo (Hugging Face Space): a detailed caption against its references, with what it matched, missed and
invented, the two scene graphs side by side."""

from pathlib import Path

from capeval.demo import build_demo, capture_scene_graphs

demo = build_demo("capture", title="CAPTURE (detailed captions)", explanation=capture_scene_graphs(),
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
