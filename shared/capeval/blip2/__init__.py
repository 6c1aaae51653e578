"""BLIP2Score (EnsembEval component): BLIP-2 ITM weights and scorer."""
