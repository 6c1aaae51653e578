"""capeval's core: errors, registries, weight resolution, inputs and the scorer contract (imports nothing above it)."""
