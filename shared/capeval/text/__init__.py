"""Text-only metrics: pycocoevalcap BLEU/METEOR/ROUGE-L/CIDEr(-D)/SPICE, fixed-IDF CIDEr, noun/verb overlap, MPNetScore."""
