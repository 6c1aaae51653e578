"""Shared model backbones: CLIP (open_clip), Alpha-CLIP, Segment Anything / MobileSAM (TinyViT), image feature encoders."""
