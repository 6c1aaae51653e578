"""Writes the coco_small example: synthetic pictures of coloured shapes, their reference captions as a COCO caption
annotations file and as a Karpathy split file, and three systems' COCO results files over the test split.

Deterministic: run ``python examples/coco_small/make_examples.py`` to rewrite every file of this folder.
"""

import json
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
SIZE = (160, 120)

# (coco id, Karpathy split, background, shapes [(kind, colour, box)], five reference captions)
SCENES = [
    (1201, "train", "white", [("ellipse", "red", (50, 30, 110, 90))],
     ["A red circle in the middle of a white picture.", "a single red disc on white",
      "One red round shape centred on a plain white background.", "A red ball drawn on a white page.",
      "a plain white image with a red circle at its centre"]),
    (1534, "train", "navy", [("rectangle", "yellow", (20, 20, 70, 100)), ("rectangle", "yellow", (90, 20, 140, 100))],
     ["Two yellow rectangles side by side on a dark blue background.", "two tall yellow bars on navy blue",
      "A pair of yellow blocks standing on a dark blue field.", "Dark blue picture with two yellow rectangles.",
      "two upright yellow boxes next to each other on dark blue"]),
    (2087, "train", "lightgreen", [("polygon", "purple", [(80, 15), (20, 105), (140, 105)])],
     ["A purple triangle on a light green background.", "one big purple triangle pointing up on pale green",
      "A purple pyramid shape drawn over light green.", "Light green image showing a purple triangle.",
      "an upward purple triangle filling most of a green picture"]),
    (2311, "restval", "black", [("ellipse", "white", (10, 10, 40, 40)), ("ellipse", "white", (120, 80, 150, 110))],
     ["Two small white dots in opposite corners of a black image.", "a black picture with two white circles",
      "Two tiny white circles, top left and bottom right, on black.", "White spots at the corners of a black square.",
      "black background with a pair of little white discs far apart"]),
    (2958, "val", "orange", [("rectangle", "blue", (0, 50, 160, 70))],
     ["A blue horizontal stripe across an orange background.", "an orange picture cut in half by a blue band",
      "A thin blue bar runs across the middle of the orange image.", "Orange field with a blue line through it.",
      "one horizontal blue stripe on orange"]),
    (3142, "val", "white", [("ellipse", "green", (15, 30, 75, 90)), ("rectangle", "red", (90, 30, 150, 90))],
     ["A green circle next to a red square on white.", "a green disc on the left and a red square on the right",
      "White picture with a green round shape beside a red box.", "Green circle and red square side by side.",
      "two shapes on white: a green circle and a red square"]),
    (3675, "test", "skyblue", [("ellipse", "yellow", (110, 10, 150, 50)), ("rectangle", "green", (0, 90, 160, 120))],
     ["A yellow sun in the corner of a blue sky above green grass.", "a simple drawing of a sun over a green field",
      "Yellow circle at the top right of a light blue picture with a green strip below.",
      "A child's picture of the sun, the sky and the grass.", "sky blue background, yellow sun, green ground"]),
    (4019, "test", "white", [("rectangle", "black", (40, 20, 120, 100))],
     ["A black square in the centre of a white image.", "one large black square on white",
      "A solid black box on a plain white background.", "White picture with a black square in the middle.",
      "a dark square shape centred on white"]),
    (4486, "test", "pink", [("ellipse", "blue", (20, 20, 60, 60)), ("ellipse", "blue", (100, 20, 140, 60)),
                            ("ellipse", "blue", (60, 70, 100, 110))],
     ["Three blue circles on a pink background.", "three blue dots arranged in a triangle on pink",
      "A pink picture with three blue round shapes.", "Blue circles, two at the top and one below, on pink.",
      "three small blue discs on a pink field"]),
    (5230, "test", "gray", [("polygon", "red", [(80, 10), (150, 60), (80, 110), (10, 60)])],
     ["A red diamond on a grey background.", "one red rhombus in the middle of a gray picture",
      "A red square turned on its corner, on grey.", "Grey image with a big red diamond shape.",
      "a red diamond filling the centre of a gray image"]),
    (5871, "test", "darkgreen", [("rectangle", "white", (15, 42, 50, 77)), ("rectangle", "white", (62, 42, 97, 77)),
                                 ("rectangle", "white", (109, 42, 144, 77))],
     ["Three white squares in a row on a dark green background.", "a row of white blocks on dark green",
      "Dark green picture with three white squares across the middle.", "Three white boxes side by side on green.",
      "white squares lined up across a dark green image"]),
    (6402, "test", "yellow", [("ellipse", "black", (40, 20, 120, 100)), ("ellipse", "yellow", (65, 45, 95, 75))],
     ["A black ring on a yellow background.", "a thick black circle with a yellow hole in the middle",
      "A black donut shape on yellow.", "Yellow picture with a black ring at its centre.",
      "one black ring drawn on a yellow image"]),
]

RESULTS = {  # system -> caption per test image, in SCENES order
    "baseline": ["a picture of some shapes", "a picture of a square", "a picture of some circles",
                 "a picture of a shape", "a picture of some squares", "a picture of a circle"],
    "model_a": ["a yellow circle on a blue background", "a black square on a white background",
                "blue circles on a pink background", "a red square on a grey background",
                "white squares on a green background", "a black circle on a yellow background"],
    "model_b": ["a yellow sun over green grass and a light blue sky", "a large black square centred on a white image",
                "three blue dots on a pink background", "a red diamond shape on a grey background",
                "three white squares in a line on dark green", "a black ring with a yellow centre on yellow"],
}


def file_name(coco_id: int) -> str:
    return f"COCO_val2014_{coco_id:012d}.jpg"


def draw(background, shapes) -> Image.Image:
    image = Image.new("RGB", SIZE, background)
    pen = ImageDraw.Draw(image)
    for kind, colour, box in shapes:
        getattr(pen, kind)(box, fill=colour)
    return image


def write_json(name: str, data) -> None:
    (HERE / name).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    (HERE / "images" / "val2014").mkdir(parents=True, exist_ok=True)
    for coco_id, _, background, shapes, _ in SCENES:
        draw(background, shapes).save(HERE / "images" / "val2014" / file_name(coco_id), quality=85)
    annotations = [{"image_id": coco_id, "id": 10 * coco_id + j, "caption": caption}
                   for coco_id, _, _, _, captions in SCENES for j, caption in enumerate(captions)]
    write_json("captions_val2014.json", {
        "info": {"description": "capeval coco_small example (synthetic)"},
        "images": [{"id": coco_id, "file_name": file_name(coco_id), "width": SIZE[0], "height": SIZE[1]}
                   for coco_id, *_ in SCENES],
        "annotations": annotations, "type": "captions"})
    karpathy = []
    for imgid, (coco_id, split, _, _, captions) in enumerate(SCENES):
        sentids = [5 * imgid + j for j in range(len(captions))]
        sentences = [{"tokens": caption.lower().rstrip(".").replace(",", "").split(), "raw": caption,
                      "imgid": imgid, "sentid": sentid} for sentid, caption in zip(sentids, captions)]
        karpathy.append({"filepath": "val2014", "sentids": sentids, "filename": file_name(coco_id), "imgid": imgid,
                         "split": split, "sentences": sentences, "cocoid": coco_id})
    write_json("dataset_coco.json", {"images": karpathy, "dataset": "coco"})
    test_ids = [coco_id for coco_id, split, *_ in SCENES if split == "test"]
    for system, captions in RESULTS.items():
        write_json(f"{system}.json", [{"image_id": i, "caption": c} for i, c in zip(test_ids, captions)])


if __name__ == "__main__":
    main()
