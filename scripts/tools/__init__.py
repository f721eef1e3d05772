"""User tools: `python -m scripts.tools.prepare_ljspeech` and `python -m scripts.tools.synthesize`."""
