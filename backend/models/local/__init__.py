"""Models already on this machine: the language models other tools keep on disk, listed read-only.

places.py    where each tool keeps its models (Hugging Face hub cache, Ollama, LM Studio, llama.cpp, the
             workspace's own model_folders) and the environment variables that move them
walk.py      the bounded walk: a time budget, a depth limit, an entry limit per folder, symlink loops
             seen; every folder or file it cannot use becomes a (path, reason) in `skipped`
describe.py  one model described without loading weights: a GGUF file through the bounded header
             reader, a Hugging Face folder through config.json and the safetensors headers
fit.py       whether transformers can train it, and whether it fits this machine (the memory estimate)
scan.py      the scan of every place: its result (models, skipped, stopped early), cached in the
             workspace and run in a background thread for the UI
cli.py       `python -m backend.models list [--json] [--workspace DIR]`
"""
