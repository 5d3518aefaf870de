"""What is sent to the model and how its answers are read: few-shot contexts, the instruct
settings (``--setting``), matching an answer to the options, constrained decoding."""
