"""Model creators: build Qwen3 / Llama graphs from a ModelConfig (chapter 08)."""
