"""What the backends share about a model: its identity (the cache key), its options, loading
a GGUF file, memory budgets of a forward pass, where logits are read, lm-eval's tokenisation
rules, and the vLLM processor that forces continuation tokens."""
