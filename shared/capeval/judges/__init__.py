"""Vision-language-model judges (FLEUR, RefFLEUR): prompts as data, batched greedy generation, replayable caches."""
