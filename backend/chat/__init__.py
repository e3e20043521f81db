"""Chat with the base model and every checkpoint side by side.

engine.py      ChatEngine: one base per (model, device, bits), LoRA checkpoints as named adapters
generation.py  settings, chat-template prompt with truncation notice, streamed generation with Stop
targets.py     what can be chatted with: runs, complete checkpoints, step and eval loss
gguf_targets.py  exported GGUF files as columns, tied to the checkpoint they came from
local_targets.py  models on this machine (the cached scan of Ollama, LM Studio, the hub cache) as columns
gguf_generation.py  a GGUF column answered by llama.cpp, with the same prompt rules
catalog.py     the choices a UI offers across runs, and column headers
preferences.py blind-mode order and per-run vote tallies (RUN_DIR/preferences.json)
cli.py         python -m backend.chat

Nothing is imported here: the UI imports targets / catalog / preferences at
start-up without pulling in torch; engine and generation load it.
"""
