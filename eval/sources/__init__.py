"""Where the data of an evaluation come from: a build folder, a folder in the Hub layout, a
Hub organisation, or the official Evalita-LLM copies (``hf:ORG``); each is one ``Source``."""
