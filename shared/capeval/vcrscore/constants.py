"""VCRScore constants: the feature extractors' and the regressor's hub file names and the COCO detection label
names."""

VILT_FILES = ("config.json", "preprocessor_config.json", "pytorch_model.bin", "tokenizer_config.json", "vocab.txt")
DETECTOR_FILES = ("config.json", "preprocessor_config.json", "pytorch_model.bin")
GBR_FILE = "vcrscore_gbr.json"  # the regressor as a JSON tree ensemble

# COCO detection category names by id as the DETR/YOLOS configs list them ("N/A" for the 11 unused ids).
COCO_LABELS = (
    "N/A", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "N/A", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "N/A", "backpack", "umbrella", "N/A", "N/A", "handbag", "tie",
    "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove",
    "skateboard", "surfboard", "tennis racket", "bottle", "N/A", "wine glass", "cup", "fork", "knife", "spoon",
    "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake",
    "chair", "couch", "potted plant", "bed", "N/A", "dining table", "N/A", "N/A", "toilet", "N/A", "tv", "laptop",
    "mouse", "remote", "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "N/A",
    "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
)
# The official YOLOv3 names the same 80 classes with Darknet's coco.names; these six are spelled differently.
COCO_TO_DARKNET = {"motorcycle": "motorbike", "airplane": "aeroplane", "couch": "sofa", "potted plant": "pottedplant",
                   "dining table": "diningtable", "tv": "tvmonitor"}
